// The fake driver's simulated GPU time: kernels and graphs have durations
// (fake_control.h), each stream runs its work in order on a timeline, and
// events, stream and context synchronization answer from that timeline. The
// clock is virtual and deterministic: it moves only when a host thread waits
// (synchronize, a launch into a full queue, the sleep control), plus host
// time per launch (FAKE_CUDA_LAUNCH_HOST_NS, default 1000), so tests do not
// depend on the machine's load.
//
// Streams of one device run concurrently with each other (their work
// overlaps in time), except that the legacy default stream waits for every
// blocking stream and every blocking stream waits for it, as in CUDA. A
// stream holds at most kQueueDepth unfinished launches; one more waits for
// the oldest, as a real driver's push buffer makes the host wait.
//
// Other contexts on a device (tessera_fake_cuda_set_neighbours): the
// device is time-sliced between this process and that many saturating
// contexts of other processes, in equal slices, as a real driver does. A
// launch of d then takes (1 + n) x d on the timeline, so events around it
// span the neighbours' slices too, while only d of it is this process's
// GPU time (tessera_fake_cuda_busy_us counts that).
//
// On a capturing stream (fake_capture.cc) launches and event records are
// added to the capture's graph instead: nothing runs and the clock stays.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/fake_state.h"

namespace fake {
namespace {

constexpr size_t kQueueDepth = 64;

struct Stream {
  Stream() = default;
  Stream(int d, bool b) : dev(d), blocking(b) {}
  int dev = 0;
  bool blocking = true;  // synchronizes with the legacy default stream
  uint64_t tail_ns = 0;
  std::deque<uint64_t> unfinished;  // end times of launches not yet done
};

struct Event {
  bool timing;
  bool recorded = false;
  uint64_t t_ns = 0;
  uint64_t capture_id = 0;  // last recorded in this capture; 0: outside any
};

struct Interval {
  uint64_t start, end;
  uint64_t work;  // this process's GPU time in it (end - start without neighbours)
};

struct Timeline {
  uint64_t now_ns = 1'000'000'000;
  uint64_t default_kernel_ns;
  uint64_t launch_host_ns;
  std::map<CUfunction, uint64_t> kernel_ns;
  Stream legacy[kMaxDevices];
  std::set<Stream*> streams;  // created, per-thread and legacy
  std::vector<Interval> busy[kMaxDevices];
  uint64_t launches[kMaxDevices] = {};
  uint64_t coop[kMaxDevices] = {};
  uint64_t coop_grid[kMaxDevices] = {};
  uint64_t events_recorded = 0;
  uint32_t neighbours[kMaxDevices] = {};

  Timeline() {
    default_kernel_ns = EnvU("FAKE_CUDA_KERNEL_US", 10) * 1000;
    launch_host_ns = EnvU("FAKE_CUDA_LAUNCH_HOST_NS", 1000);
    for (int d = 0; d < kMaxDevices; ++d) {
      legacy[d].dev = d;
      legacy[d].blocking = true;
      streams.insert(&legacy[d]);
    }
  }
};

// Guarded by S().mu.
Timeline& T() {
  static Timeline* t = new Timeline();  // leaked: outlives every caller
  return *t;
}

thread_local Stream* t_per_thread[kMaxDevices] = {};

Stream* PerThread(int dev) {
  if (t_per_thread[dev] == nullptr) {
    t_per_thread[dev] = new Stream(dev, true);  // lives as long as the process
    T().streams.insert(t_per_thread[dev]);
  }
  return t_per_thread[dev];
}

// The stream a handle names; nullptr when it names none. `ptsz`: a NULL
// handle means the per-thread default stream (the _ptsz entry points).
Stream* Resolve(CUstream s, bool ptsz) {
  const int dev = t_device < 0 ? 0 : t_device;
  if (s == nullptr) return ptsz ? PerThread(dev) : &T().legacy[dev];
  if (s == CU_STREAM_LEGACY) return &T().legacy[dev];
  if (s == CU_STREAM_PER_THREAD) return PerThread(dev);
  Stream* st = reinterpret_cast<Stream*>(s);
  return T().streams.count(st) != 0 ? st : nullptr;
}

// When work submitted to `st` now may start: after the stream's own work and,
// across the legacy default stream, after the streams it synchronizes with.
uint64_t ReadyAt(const Stream* st) {
  Timeline& t = T();
  uint64_t at = std::max(t.now_ns, st->tail_ns);
  if (!st->blocking) return at;
  if (st == &t.legacy[st->dev]) {
    for (const Stream* o : t.streams) {
      if (o->dev == st->dev && o->blocking) at = std::max(at, o->tail_ns);
    }
  } else {
    at = std::max(at, t.legacy[st->dev].tail_ns);
  }
  return at;
}

void Advance(uint64_t to_ns) { T().now_ns = std::max(T().now_ns, to_ns); }

uint64_t DurationOf(CUfunction f) {
  auto it = T().kernel_ns.find(f);
  return it != T().kernel_ns.end() ? it->second : T().default_kernel_ns;
}

CUresult Launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, CUstream s, bool ptsz,
                bool cooperative) {
  std::lock_guard<std::mutex> l(S().mu);
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (f == nullptr || gx == 0 || gy == 0 || gz == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* st = Resolve(s, ptsz);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (Capture* c = CaptureOfLocked(st); c != nullptr) {
    if (CUresult r = CaptureUsableLocked(c); r != CUDA_SUCCESS) return r;
    c->graph->kernel_ns += DurationOf(f);  // a kernel node: runs with the graph
    return CUDA_SUCCESS;
  }
  if (CUresult r = ImplicitLocked(st); r != CUDA_SUCCESS) return r;
  if (cooperative) {
    ++T().coop[st->dev];
    T().coop_grid[st->dev] = uint64_t{gx} * gy * gz;
  }
  EnqueueLocked(st, DurationOf(f));
  return CUDA_SUCCESS;
}

bool IsCooperative(const CUlaunchConfig* config) {
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
        config->attrs[i].value.cooperative != 0)
      return true;
  }
  return false;
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction f, bool ptsz) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->hStream, ptsz,
                IsCooperative(config));
}

CUresult Record(CUevent e, CUstream s, bool ptsz) {
  CountCall("cuEventRecord");
  std::lock_guard<std::mutex> l(S().mu);
  Stream* st = Resolve(s, ptsz);
  if (e == nullptr || st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  Event* ev = reinterpret_cast<Event*>(e);
  if (Capture* c = CaptureOfLocked(st); c != nullptr) {
    if (CUresult r = CaptureUsableLocked(c); r != CUDA_SUCCESS) return r;
    ev->capture_id = c->id;  // an event node: completes when the graph runs
    ++T().events_recorded;
    return CUDA_SUCCESS;
  }
  if (CUresult r = ImplicitLocked(st); r != CUDA_SUCCESS) return r;
  ev->recorded = true;
  ev->capture_id = 0;
  ev->t_ns = ReadyAt(st);
  ++T().events_recorded;
  return CUDA_SUCCESS;
}

// Synchronizing or querying a capturing stream breaks its capture, whatever
// the thread's mode; the legacy stream then depends on capturing streams.
CUresult StreamWaitable(Stream* st) {
  if (Capture* c = CaptureOfLocked(st); c != nullptr) {
    c->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult r = ImplicitLocked(st); r != CUDA_SUCCESS) return r;
  return UnsafeCallLocked();
}

CUresult StreamSync(CUstream s, bool ptsz) {
  std::lock_guard<std::mutex> l(S().mu);
  Stream* st = Resolve(s, ptsz);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = StreamWaitable(st); r != CUDA_SUCCESS) return r;
  Advance(ReadyAt(st));
  return CUDA_SUCCESS;
}

CUresult StreamQuery(CUstream s, bool ptsz) {
  CountCall("cuStreamQuery");
  std::lock_guard<std::mutex> l(S().mu);
  Stream* st = Resolve(s, ptsz);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = StreamWaitable(st); r != CUDA_SUCCESS) return r;
  return ReadyAt(st) <= T().now_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// This thread's calls per counted API (tessera_fake_cuda_thread_calls).
thread_local std::map<std::string, uint64_t> t_calls;

}  // namespace

void CountCall(const char* api) { ++t_calls[api]; }

uint64_t EnqueueLocked(void* stream, uint64_t duration_ns) {
  Timeline& t = T();
  Stream* st = static_cast<Stream*>(stream);
  t.now_ns += t.launch_host_ns;
  while (!st->unfinished.empty() && st->unfinished.front() <= t.now_ns) st->unfinished.pop_front();
  if (st->unfinished.size() >= kQueueDepth) {
    Advance(st->unfinished.front());
    st->unfinished.pop_front();
  }
  const uint64_t start = ReadyAt(st);
  const uint64_t end = start + duration_ns * (1 + t.neighbours[st->dev]);
  st->tail_ns = end;
  st->unfinished.push_back(end);
  if (duration_ns > 0) t.busy[st->dev].push_back({start, end, duration_ns});
  ++t.launches[st->dev];
  return end;
}

void* ResolveStreamLocked(CUstream s, bool ptsz) { return Resolve(s, ptsz); }

StreamInfo InfoLocked(void* stream) {
  const Stream* st = static_cast<Stream*>(stream);
  return StreamInfo{st->dev, st->blocking, st == &T().legacy[st->dev]};
}

}  // namespace fake

using namespace fake;

extern "C" {

void tessera_fake_cuda_set_kernel_us(CUfunction fn, uint64_t us) {
  std::lock_guard<std::mutex> l(S().mu);
  T().kernel_ns[fn] = us * 1000;
}
uint64_t tessera_fake_cuda_now_us() {
  std::lock_guard<std::mutex> l(S().mu);
  return T().now_ns / 1000;
}
namespace {
// The tick (tessera_fake_cuda_set_tick); guarded by S().mu, called without it.
uint64_t g_tick_period_us = 0;
void (*g_tick)(uint64_t, void*) = nullptr;
void* g_tick_arg = nullptr;
}  // namespace

void tessera_fake_cuda_set_tick(uint64_t period_us, void (*cb)(uint64_t now_us, void* arg), void* arg) {
  std::lock_guard<std::mutex> l(S().mu);
  g_tick_period_us = cb != nullptr ? period_us : 0;
  g_tick = cb;
  g_tick_arg = arg;
}

void tessera_fake_cuda_sleep_until_us(uint64_t us) {
  for (;;) {
    void (*cb)(uint64_t, void*) = nullptr;
    void* arg = nullptr;
    uint64_t at = 0;
    {
      std::lock_guard<std::mutex> l(S().mu);
      const uint64_t now_us = T().now_ns / 1000;
      if (g_tick_period_us != 0) {
        const uint64_t boundary = (now_us / g_tick_period_us + 1) * g_tick_period_us;
        if (boundary <= us) {
          Advance(boundary * 1000);
          cb = g_tick;
          arg = g_tick_arg;
          at = boundary;
        }
      }
      if (cb == nullptr) {
        Advance(us * 1000);
        return;
      }
    }
    cb(at, arg);
  }
}
void tessera_fake_cuda_advance_us(uint64_t us) {
  std::lock_guard<std::mutex> l(S().mu);
  T().now_ns += us * 1000;
}
uint64_t tessera_fake_cuda_busy_us(int dev, uint64_t from_us, uint64_t to_us) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev < 0 || dev >= kMaxDevices) return 0;
  const uint64_t from = from_us * 1000, to = to_us * 1000;
  uint64_t ns = 0;
  for (const Interval& i : T().busy[dev]) {
    const uint64_t a = std::max(i.start, from), b = std::min(i.end, to);
    // Only this process's part of an interval time-sliced with neighbours.
    if (b > a) ns += (b - a) * i.work / (i.end - i.start);
  }
  return ns / 1000;
}
void tessera_fake_cuda_set_neighbours(int dev, uint32_t contexts) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev >= 0 && dev < kMaxDevices) T().neighbours[dev] = contexts;
}
uint64_t tessera_fake_cuda_launches(int dev) {
  std::lock_guard<std::mutex> l(S().mu);
  return dev >= 0 && dev < kMaxDevices ? T().launches[dev] : 0;
}
uint64_t tessera_fake_cuda_cooperative_launches(int dev, uint64_t* last_grid_blocks) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev < 0 || dev >= kMaxDevices) return 0;
  if (last_grid_blocks != nullptr) *last_grid_blocks = T().coop_grid[dev];
  return T().coop[dev];
}
uint64_t tessera_fake_cuda_thread_calls(const char* api) {
  const auto it = t_calls.find(api);
  return it != t_calls.end() ? it->second : 0;
}
uint64_t tessera_fake_cuda_events_recorded() {
  std::lock_guard<std::mutex> l(S().mu);
  return T().events_recorded;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  CountCall("cuCtxGetCurrent");
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_ctx != nullptr) {
    *ctx = t_ctx;
    return CUDA_SUCCESS;
  }
  *ctx = t_device < 0 ? nullptr : reinterpret_cast<CUcontext>(static_cast<uintptr_t>(t_device + 1));
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize() {
  std::lock_guard<std::mutex> l(S().mu);
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = UnsafeCallLocked(); r != CUDA_SUCCESS) return r;
  for (const Stream* st : T().streams) {
    if (st->dev == t_device) Advance(st->tail_ns);
  }
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* s, unsigned int flags) {
  std::lock_guard<std::mutex> l(S().mu);
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  Stream* st = new Stream(t_device, (flags & CU_STREAM_NON_BLOCKING) == 0);
  T().streams.insert(st);
  *s = reinterpret_cast<CUstream>(st);
  return CUDA_SUCCESS;
}
CUresult cuStreamCreateWithPriority(CUstream* s, unsigned int flags, int) {
  return cuStreamCreate(s, flags);
}
CUresult cuStreamDestroy_v2(CUstream s) {
  std::lock_guard<std::mutex> l(S().mu);
  Stream* st = reinterpret_cast<Stream*>(s);
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
      T().streams.erase(st) == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  // Its work still runs (CUDA lets destroyed streams drain); keep its intervals.
  ForgetStreamLocked(st);
  delete st;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) { return StreamSync(s, false); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { return StreamSync(s, true); }
CUresult cuStreamQuery(CUstream s) { return StreamQuery(s, false); }
CUresult cuStreamQuery_ptsz(CUstream s) { return StreamQuery(s, true); }

CUresult cuEventCreate(CUevent* e, unsigned int flags) {
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new Event{(flags & CU_EVENT_DISABLE_TIMING) == 0});
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }
CUresult cuEventRecord(CUevent e, CUstream s) { return Record(e, s, false); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return Record(e, s, true); }
CUresult cuEventQuery(CUevent e) {
  CountCall("cuEventQuery");
  std::lock_guard<std::mutex> l(S().mu);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const Event* ev = reinterpret_cast<Event*>(e);
  if (ev->capture_id != 0) return CapturedEventLocked(ev->capture_id);
  if (CUresult r = UnsafeCallLocked(); r != CUDA_SUCCESS) return r;
  return !ev->recorded || ev->t_ns <= T().now_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult cuEventSynchronize(CUevent e) {
  std::lock_guard<std::mutex> l(S().mu);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const Event* ev = reinterpret_cast<Event*>(e);
  if (ev->capture_id != 0) return CapturedEventLocked(ev->capture_id);
  if (CUresult r = UnsafeCallLocked(); r != CUDA_SUCCESS) return r;
  if (ev->recorded) Advance(ev->t_ns);
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  std::lock_guard<std::mutex> l(S().mu);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const Event* a = reinterpret_cast<Event*>(start);
  const Event* b = reinterpret_cast<Event*>(end);
  if (a->capture_id != 0) return CapturedEventLocked(a->capture_id);
  if (b->capture_id != 0) return CapturedEventLocked(b->capture_id);
  if (!a->timing || !b->timing || !a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (a->t_ns > T().now_ns || b->t_ns > T().now_ns) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((static_cast<double>(b->t_ns) - static_cast<double>(a->t_ns)) / 1e6);
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return cuEventElapsedTime(ms, start, end);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned, unsigned,
                        unsigned, unsigned, CUstream s, void**, void**) {
  return Launch(f, gx, gy, gz, s, false, false);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned,
                             unsigned, unsigned, unsigned, CUstream s, void**, void**) {
  return Launch(f, gx, gy, gz, s, true, false);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void**, void**) {
  return LaunchEx(config, f, false);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void**, void**) {
  return LaunchEx(config, f, true);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned,
                                   unsigned, unsigned, unsigned, CUstream s, void**) {
  return Launch(f, gx, gy, gz, s, false, true);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned, unsigned, unsigned, unsigned, CUstream s,
                                        void**) {
  return Launch(f, gx, gy, gz, s, true, true);
}
CUresult cuLaunch(CUfunction f) { return Launch(f, 1, 1, 1, nullptr, false, false); }
CUresult cuLaunchGrid(CUfunction f, int w, int h) {
  if (w <= 0 || h <= 0) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, static_cast<unsigned>(w), static_cast<unsigned>(h), 1, nullptr, false, false);
}
CUresult cuLaunchGridAsync(CUfunction f, int w, int h, CUstream s) {
  if (w <= 0 || h <= 0) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, static_cast<unsigned>(w), static_cast<unsigned>(h), 1, s, false, false);
}

}  // extern "C"
