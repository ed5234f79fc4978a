#include "cuda/launch_gate.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "cuda/driver_table.h"
#include "cuda/runtime.h"

namespace tessera::cuda {

// An event of the measurement chain, shared by the run it ends, the run
// it starts, and its stream's chain. Guarded by LaunchGate::mu_.
struct LaunchGate::Event {
  CUevent e;
  CUcontext ctx;
  int refs;
};

namespace {

// How often the helper polls, and the longest the gate sleeps while
// measurements it waits for are outstanding.
constexpr uint64_t kPollUs = 1000;
// How often a launch held back only by the arbiter's in-flight cap looks
// for its measurements: far below a kernel, so a low-priority container
// still keeps the GPU busy.
constexpr uint64_t kCapPollUs = 100;
// Queued runs beyond which an admitted launch drains too (the helper is
// missing or behind): the queue and the event pool stay bounded.
constexpr size_t kMaxPending = 256;

uint64_t MonotonicNowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

void MonotonicSleepUntilUs(uint64_t us) {
  timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// The calling thread's capture-interaction mode, relaxed: the gate's event
// calls are then never "potentially unsafe" under an application's capture.
// True when exchanged (*mode: the caller's, for RestoreCapture); a driver
// that cannot exchange modes (no capture) is left alone.
bool RelaxCapture(CUstreamCaptureMode* mode) {
  *mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  return TESSERA_REAL(cuThreadExchangeStreamCaptureMode)(mode) == CUDA_SUCCESS;
}
void RestoreCapture(CUstreamCaptureMode mode) {
  TESSERA_REAL(cuThreadExchangeStreamCaptureMode)(&mode);
}

}  // namespace

GateClock MonotonicClock() { return GateClock{&MonotonicNowUs, &MonotonicSleepUntilUs}; }

LaunchGate::LaunchGate(region::Layout* layout, GateClock clock) : layout_(layout), clock_(clock) {}

void LaunchGate::AttachBoard(int gpu, region::Board* board) {
  if (!ValidGpu(gpu)) return;
  MutexLock l(mu_);
  boards_[gpu] = board;
}

bool LaunchGate::Busy(const PerGpu& g, uint64_t now_us) const {
  return !g.pending.empty() || g.measuring > 0 ||
         (g.inflight_us > 0 && now_us < g.last_admit_us + g.inflight_us + 2 * kPollUs);
}

void LaunchGate::Publish(int gpu, uint64_t now_us, bool sample) {
  region::Board* b = boards_[gpu];
  if (b == nullptr) return;
  PerGpu& g = gpus_[gpu];
  const bool busy = Busy(g, now_us);
  if (g.board_slot == -1 && busy) {
    // Claimed at the first busy moment; -2: the board was full (this
    // process reads it but is not seen on it).
    if (g.board_token == 0) {
      g.board_token = (static_cast<uint64_t>(getpid()) << 32) | (MonotonicNowUs() & 0xffffffffu) | 1u;
    }
    g.board_slot = region::ClaimBoardSlot(*b, g.board_token, now_us);
    if (g.board_slot < 0) {
      g.board_slot = -2;
      TESSERA_LOG(kLogWarn, "GPU %d: the busy board is full; this process is not seen on it", gpu);
    }
  }
  if (g.board_slot >= 0) {
    if (busy) {
      region::MarkBusy(*b, g.board_slot, now_us);
    } else {
      region::MarkIdle(*b, g.board_slot, now_us);
    }
  }
  if (sample || !g.share.Started()) g.share.Sample(now_us, region::OthersBusy(*b, g.board_slot, now_us));
}

void LaunchGate::PublishAll() {
  const uint64_t now = clock_.now_us();
  MutexLock l(mu_);
  for (int gpu = 0; gpu < region::kMaxGpus; ++gpu) Publish(gpu, now, /*sample=*/true);
}

LaunchGate::Event* LaunchGate::NewEvent(CUcontext ctx, CUstream stream) {
  CUevent e = nullptr;
  {
    MutexLock l(mu_);
    std::vector<CUevent>& free_list = free_[ctx];
    if (!free_list.empty()) {
      e = free_list.back();
      free_list.pop_back();
    }
  }
  if (e == nullptr && TESSERA_REAL(cuEventCreate)(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    return nullptr;
  }
  if (TESSERA_REAL(cuEventRecord)(e, stream) != CUDA_SUCCESS) {
    TESSERA_REAL(cuEventDestroy_v2)(e);  // perhaps of a destroyed context: not reused
    return nullptr;
  }
  Event* ev = new (std::nothrow) Event{e, ctx, 1};
  if (ev == nullptr) {
    MutexLock l(mu_);
    free_[ctx].push_back(e);  // unmeasured: the launch is charged its estimate
  }
  return ev;
}

void LaunchGate::Settle(PerGpu& g, const void* fn, uint64_t estimate_us,
                        const uint64_t* measured_us) {
  g.inflight_us -= std::min(g.inflight_us, estimate_us);
  auto it = g.functions.find(fn);
  if (it == g.functions.end()) return;  // forgotten meanwhile
  if (it->second.unmeasured > 0) --it->second.unmeasured;
  if (measured_us != nullptr) it->second.estimate.Observe(*measured_us);
}

void LaunchGate::Unref(Event* e) {
  if (e == nullptr || --e->refs > 0) return;
  free_[e->ctx].push_back(e->e);
  delete e;
}

LaunchGate::Ticket LaunchGate::Before(const void* fn, CUstream stream, bool ptsz) {
  Ticket t;
  const int gpu = CurrentGpu().index;  // the container's GPU index: its bucket
  if (!ValidGpu(gpu)) return t;
  ComputeBucket bucket(layout_->compute[gpu], &layout_->arbiter);
  if (!bucket.Limited()) return t;
  if (bucket.PassThrough()) {
    // `share` with no arbiter yet: not gated, but counted, so an arbiter
    // that starts sees who is active (captured launches too: no driver call
    // is spent telling them apart here).
    layout_->compute[gpu].launches.fetch_add(1, std::memory_order_relaxed);
    return t;
  }
  // Captured: nothing runs now, and the gate must not wait, record, query
  // or charge (an event recorded in a capture cannot be queried). The graph
  // is gated when launched.
  if (StreamCapturing(stream, ptsz)) return t;
  // Relaxed from here to the end of After(), the launch included (a launch
  // on a stream that is not capturing is no unsafe call, so relaxing it
  // changes nothing): two mode exchanges per launch, not four.
  t.relaxed = RelaxCapture(&t.caller_mode);
  StartHelper();

  if (stream == nullptr) stream = ptsz ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  t.stream = stream;
  t.key_thread = stream == CU_STREAM_PER_THREAD ? static_cast<uint64_t>(pthread_self()) : 0;
  CUcontext ctx = nullptr;
  TESSERA_REAL(cuCtxGetCurrent)(&ctx);
  t.ctx = ctx;
  const StreamKey key{ctx, stream, t.key_thread};

  // The queue is drained, and the open run closed, when the bucket does not
  // admit at once (a decision they may change), not before every launch:
  // the helper drains the queue anyway.
  bool drained = false;
  bool backlog = false;
  ShareClock::Mark mark;  // where this launch's run is measured from, if it starts one
  uint64_t counted_to = clock_.now_us();  // throttled_us holds this wait up to here
  bool waited = false;
  for (;;) {
    const uint64_t now = clock_.now_us();
    bucket.Refill(now);
    uint64_t wake;
    bool measuring;
    {
      MutexLock l(mu_);
      PerGpu& g = gpus_[gpu];
      if (g.functions.size() >= kMaxFunctions && g.pending.empty()) g.functions.clear();
      FnEstimate& f = g.functions[fn];
      const bool unknown_in_flight = !f.estimate.Known() && f.unmeasured > 0;
      // Below a higher priority on this GPU, little is queued at a time, so
      // a hold reaches the GPU soon (one launch always passes).
      const uint64_t cap = bucket.ArbiterAlive(now)
                               ? layout_->compute[gpu].inflight_cap_us.load(std::memory_order_relaxed)
                               : 0;
      const uint64_t next_us = f.estimate.Known() ? f.estimate.Us() : g.estimate.Us();
      const bool under_cap = cap == 0 || g.inflight_us == 0 || g.inflight_us + next_us <= cap;
      if (!unknown_in_flight && under_cap && bucket.Admits(g.inflight_us)) {
        t.estimate_us = next_us;
        t.fn = fn;
        t.solo = !f.estimate.Known();
        ++f.unmeasured;
        g.inflight_us += t.estimate_us;
        g.last_admit_us = now;
        Publish(gpu, now, /*sample=*/false);
        mark = g.share.At(now);
        backlog = g.pending.size() > kMaxPending;
        break;
      }
      // Another thread is settling a measurement this decision may need:
      // wait for it (briefly, in real time), not for the gate's clock.
      measuring = g.measuring > 0;
      wake = bucket.NextAdmitUs(now, g.inflight_us);
      if (!g.pending.empty()) wake = std::min(wake, now + kPollUs);
      // Held back only by the in-flight cap: the GPU runs out of this
      // process's work as soon as the oldest launch ends, so look again
      // soon (a 1 ms look left the GPU idle between kernels of 1-2 ms).
      if (!unknown_in_flight && !under_cap && bucket.Admits(g.inflight_us)) {
        wake = std::min(wake, now + kCapPollUs);
      }
    }
    if (measuring) {
      MonotonicSleepUntilUs(MonotonicNowUs() + 20);
      continue;
    }
    if (!drained) {
      drained = true;
      CloseOpenRun(gpu, key);
      while (DrainOne(gpu)) {
      }
      continue;
    }
    if (!waited) layout_->compute[gpu].waiting.fetch_add(1, std::memory_order_relaxed);
    waited = true;
    clock_.sleep_until_us(wake);
    // The wait so far, at every wake: besides the metric, it tells the
    // arbiter this waiting thread is alive (a process killed here leaves
    // `waiting` raised but adds nothing more).
    const uint64_t woke = clock_.now_us();
    layout_->compute[gpu].throttled_us.fetch_add(woke - counted_to, std::memory_order_relaxed);
    counted_to = woke;
    while (DrainOne(gpu)) {
    }
  }
  if (waited) {
    layout_->compute[gpu].throttled_us.fetch_add(clock_.now_us() - counted_to, std::memory_order_relaxed);
    layout_->compute[gpu].waiting.fetch_sub(1, std::memory_order_relaxed);
  }

  if (backlog) {
    while (DrainOne(gpu)) {
    }
  }

  t.gpu = gpu;
  t.run.from = mark;  // kept unless the launch joins an open run (its own)
  // Where this launch is measured from: the open run on its stream while
  // the stream is busy; else the stream's last end while it has not
  // completed (and nothing ran elsewhere on this GPU since); else a fresh
  // start event. A run open on another stream is not touched (that stream
  // may be gone): charged its estimates.
  Event* last = nullptr;
  Run held;
  {
    MutexLock l(mu_);
    PerGpu& g = gpus_[gpu];
    if (g.open.start != nullptr) {
      held = g.open;
      g.open = Run();
      if (!(g.open_stream == key)) ChargeEstimates(gpu, held);
    } else if (g.last_end != nullptr && g.last_stream == key) {
      last = g.last_end;
      ++last->refs;
    }
  }
  if (held.start != nullptr) {
    if (TESSERA_REAL(cuStreamQuery)(stream) == CUDA_ERROR_NOT_READY) {
      if (!t.solo) {
        t.run = held;
        t.busy = true;
        return t;
      }
      // Measured alone: its start, recorded behind the run, ends the run.
      t.run.start = NewEvent(ctx, stream);
      MutexLock l(mu_);
      if (t.run.start != nullptr) {
        ++t.run.start->refs;
        Queue(gpu, held, t.run.start, key, /*chain=*/false);
      } else {
        ChargeEstimates(gpu, held);
      }
      return t;
    }
    // Idle since some time after its last launch: its end is lost.
    MutexLock l(mu_);
    ChargeEstimates(gpu, held);
  } else if (last != nullptr) {
    if (TESSERA_REAL(cuEventQuery)(last->e) == CUDA_ERROR_NOT_READY) {
      t.run.start = last;
      t.busy = true;
      return t;
    }
    MutexLock l(mu_);
    Unref(last);
  }
  t.run.start = NewEvent(ctx, stream);
  return t;
}

void LaunchGate::After(Ticket& t, CUresult r) {
  if (t.gpu < 0) return;
  Run& run = t.run;
  const bool launched = r == CUDA_SUCCESS;
  if (launched && run.start != nullptr) {
    run.launches[run.n++] = Launch{t.fn, t.estimate_us};
    run.estimate_us += t.estimate_us;
  }
  const StreamKey key{t.ctx, t.stream, t.key_thread};
  if (run.start != nullptr && run.n > 0 && t.busy && !t.solo && run.n < kRunLaunches &&
      run.estimate_us < kRunUs) {
    // Left open, unless another run is (one per GPU), or the bucket or the
    // arbiter's in-flight cap (a priority below another) needs this
    // measurement soon.
    bool kept = false;
    {
      MutexLock l(mu_);
      PerGpu& g = gpus_[t.gpu];
      const uint64_t cap = layout_->compute[t.gpu].inflight_cap_us.load(std::memory_order_relaxed);
      if (g.open.start == nullptr && (cap == 0 || g.inflight_us + kRunUs <= cap) &&
          ComputeBucket(layout_->compute[t.gpu]).Admits(g.inflight_us + kRunUs)) {
        Unref(g.last_end);  // the run continues the chain
        g.last_end = nullptr;
        g.open = run;
        g.open_stream = key;
        if (launched) layout_->compute[t.gpu].launches.fetch_add(1, std::memory_order_relaxed);
        kept = true;
      }
    }
    if (kept) {
      if (t.relaxed) RestoreCapture(t.caller_mode);
      t.relaxed = false;
      return;
    }
  }
  Event* end = run.start != nullptr && run.n > 0 ? NewEvent(t.ctx, t.stream) : nullptr;
  if (t.relaxed) RestoreCapture(t.caller_mode);
  t.relaxed = false;
  MutexLock l(mu_);
  PerGpu& g = gpus_[t.gpu];
  if (launched && run.start == nullptr) {
    // Unmeasurable (no start event): charged its estimate.
    ComputeBucket(layout_->compute[t.gpu]).Charge(t.estimate_us);
    Settle(g, t.fn, t.estimate_us, nullptr);
  } else if (!launched) {
    Settle(g, t.fn, t.estimate_us, nullptr);  // refused: nothing ran
  }
  if (run.start == nullptr) return;
  if (run.n == 0) {
    Unref(run.start);
    return;
  }
  if (end == nullptr) {
    ChargeEstimates(t.gpu, run);
    return;
  }
  Queue(t.gpu, run, end, key, /*chain=*/true);
  if (launched) layout_->compute[t.gpu].launches.fetch_add(1, std::memory_order_relaxed);
}

void LaunchGate::ChargeEstimates(int gpu, Run& run) {
  PerGpu& g = gpus_[gpu];
  ComputeBucket(layout_->compute[gpu]).Charge(run.estimate_us);
  for (uint32_t i = 0; i < run.n; ++i) {
    Settle(g, run.launches[i].fn, run.launches[i].estimate_us, nullptr);
  }
  Unref(run.start);
  run = Run();
}

void LaunchGate::Queue(int gpu, Run& run, Event* end, const StreamKey& key, bool chain) {
  PerGpu& g = gpus_[gpu];
  if (chain && g.open.start == nullptr) {
    ++end->refs;
    Unref(g.last_end);
    g.last_end = end;
    g.last_stream = key;
  }
  g.pending.push_back(Pending{run, end});
  run = Run();
}

void LaunchGate::CloseOpenRun(int gpu, const StreamKey& key) {
  Run held;
  {
    MutexLock l(mu_);
    PerGpu& g = gpus_[gpu];
    if (g.open.start == nullptr) return;
    held = g.open;
    g.open = Run();
    if (!(g.open_stream == key)) {
      ChargeEstimates(gpu, held);
      return;
    }
  }
  Event* end = TESSERA_REAL(cuStreamQuery)(key.stream) == CUDA_ERROR_NOT_READY
                   ? NewEvent(key.ctx, key.stream)
                   : nullptr;
  MutexLock l(mu_);
  if (end != nullptr) {
    Queue(gpu, held, end, key, /*chain=*/true);
  } else {
    ChargeEstimates(gpu, held);
  }
}

bool LaunchGate::DrainOne(int gpu) {
  Pending p;
  {
    MutexLock l(mu_);
    if (gpus_[gpu].pending.empty()) return false;
    p = gpus_[gpu].pending.front();
    gpus_[gpu].pending.pop_front();
    ++gpus_[gpu].measuring;
  }
  const CUresult q = TESSERA_REAL(cuEventQuery)(p.end->e);
  if (q == CUDA_ERROR_NOT_READY) {
    MutexLock l(mu_);
    gpus_[gpu].pending.push_front(p);
    --gpus_[gpu].measuring;
    return false;
  }
  uint64_t us = p.run.estimate_us;  // an event error (context gone): the estimates
  float ms = 0;
  bool measured = false;
  if (q == CUDA_SUCCESS &&
      TESSERA_REAL(cuEventElapsedTime)(&ms, p.run.start->e, p.end->e) == CUDA_SUCCESS && ms >= 0) {
    us = static_cast<uint64_t>(static_cast<double>(ms) * 1000.0 + 0.5);
    measured = true;
  }
  const uint64_t now = clock_.now_us();
  bool one_fn = true;
  for (uint32_t i = 1; i < p.run.n; ++i) one_fn = one_fn && p.run.launches[i].fn == p.run.launches[0].fn;
  MutexLock l(mu_);
  PerGpu& g = gpus_[gpu];
  --g.measuring;
  if (boards_[gpu] != nullptr && measured) {
    // Other contexts busy meanwhile: the span covers their slices too;
    // charged only this process's share of it (contention.h).
    g.share.Sample(now, region::OthersBusy(*boards_[gpu], g.board_slot, now));
    us = g.share.Charge(us, p.run.from, g.share.Now());
  }
  // The run's time, charged once; a function learns from it only when the
  // run holds its launches alone.
  const uint64_t each = p.run.n > 0 ? us / p.run.n : us;
  ComputeBucket(layout_->compute[gpu]).Charge(us);
  g.estimate.Observe(each);
  for (uint32_t i = 0; i < p.run.n; ++i) {
    Settle(g, p.run.launches[i].fn, p.run.launches[i].estimate_us, one_fn ? &each : nullptr);
  }
  Unref(p.run.start);
  Unref(p.end);
  Publish(gpu, now, /*sample=*/false);  // idle once nothing is in flight
  return true;
}

void LaunchGate::Drain() {
  for (int gpu = 0; gpu < region::kMaxGpus; ++gpu) {
    while (DrainOne(gpu)) {
    }
  }
}

void LaunchGate::StartHelper() {
  {
    MutexLock l(mu_);
    if (helper_started_) return;
    helper_started_ = true;
  }
  // Detached, with every signal blocked: the application's handlers never
  // run on it, and exit never waits for it.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t tid;
  if (pthread_create(&tid, &attr, &LaunchGate::HelperMain, this) != 0) {
    TESSERA_LOG(kLogWarn, "no helper thread: launches are measured at the gate only");
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
}

void* LaunchGate::HelperMain(void* self) {
  auto* gate = static_cast<LaunchGate*>(self);
  // Relaxed for good: this thread makes no call but the gate's.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  TESSERA_REAL(cuThreadExchangeStreamCaptureMode)(&mode);
  while (!gate->stop_.load(std::memory_order_acquire)) {
    gate->Drain();
    gate->PublishAll();
    MonotonicSleepUntilUs(MonotonicNowUs() + kPollUs);
  }
  return nullptr;
}

void LaunchGate::Stop() {
  stop_.store(true, std::memory_order_release);
  // No launch follows to close them: charged now. try_lock: exit may come
  // from a signal handler that interrupted this thread inside the gate; then
  // the open runs (at most kRunUs each) stay uncharged rather than hang exit.
  if (!mu_.TryLock()) return;
  for (int gpu = 0; gpu < region::kMaxGpus; ++gpu) {
    if (gpus_[gpu].open.start != nullptr) ChargeEstimates(gpu, gpus_[gpu].open);
    if (boards_[gpu] != nullptr && gpus_[gpu].board_slot >= 0) {
      region::ReleaseBoardSlot(*boards_[gpu], gpus_[gpu].board_slot, gpus_[gpu].board_token);
      gpus_[gpu].board_slot = -2;  // the helper, still running, writes no mark there again
    }
  }
  mu_.Unlock();
}

void LaunchGate::PrepareFork() { mu_.Lock(); }
void LaunchGate::ParentAfterFork() { mu_.Unlock(); }
void LaunchGate::ChildAfterFork() {
  mu_.Unlock();
  MutexLock l(mu_);
  // The parent's events belong to contexts the child cannot use: dropped
  // (not destroyed), and the child starts with nothing in flight, and
  // claims board slots of its own (boards_ stays mapped).
  for (PerGpu& g : gpus_) g = PerGpu();
  free_.clear();
  helper_started_ = false;
}

}  // namespace tessera::cuda
