// The compute gate of libtessera-cuda.so: holds launches while the GPU's
// bucket (compute_gate.h) is in debt and measures the GPU time each launch
// really took with a pair of events, which a helper thread (and the gate
// itself, when the bucket does not admit a launch at once) polls with
// cuEventQuery / cuEventElapsedTime.
// The application's streams are never synchronized. A launch is one unit
// whatever it holds: a kernel, a cooperative kernel or a whole graph.
//
// Measurement chain: the end event of a launch is the start of the next one
// when both are on the same stream, nothing was launched elsewhere on the
// GPU in between, and that end has not yet completed (the stream is busy).
// Otherwise a fresh start event is recorded just before the launch, so idle
// time and other streams' work are never charged to it. Launches on
// different streams that run concurrently are each charged in full
// (conservative).
//
// Runs: while a stream stays busy, back-to-back launches on it share one
// pair of events, so the GPU does not stop for a timestamp between every
// two kernels. A launch that continues the chain (the stream busy) leaves
// its run open, with no end event, and the next launch on the same stream
// joins it when cuStreamQuery finds the stream still busy (no idle time
// then lies between them). A run is closed, its end event recorded after
// its last launch, when it holds kRunLaunches launches or kRunUs of
// estimated time, when its stream was idle before the launch, when the
// launch's function has no estimate yet (measured alone), when another
// run is open on the GPU, or when the bucket is close to its limit; its
// measured time is charged once, and settles its launches. One run is open
// per GPU at a time. A run that cannot be closed after its last launch (the
// stream went idle before the next one, the next launch is on another
// stream, which the gate never touches later, or the process exits) charges
// its launches their estimates.
//
// Estimates are kept per function (kernel or graph): until one launch of a
// function has been measured, its next launch waits for that measurement, so
// a long kernel seen for the first time cannot be queued many times over on
// a guess. A function's estimate learns only from measurements it can be
// given: a run of its launches alone (each the run's mean); a run of
// several functions is charged whole and settles them at their estimates.
//
// Stream capture: a launch on a capturing stream (StreamCapturing,
// runtime.h) runs nothing, so it passes straight to the driver, neither
// held, recorded nor charged; its graph is gated and charged as one launch
// at cuGraphLaunch. Every event call of the gate (create, record, query,
// elapsed time, destroy) runs with the calling thread's capture-interaction
// mode relaxed: a gated launch relaxes it once in Before() and After()
// restores it, so the launch itself runs relaxed too, which changes nothing
// for a launch on a stream that is not capturing (the helper is relaxed
// throughout):
// under a global capture in any thread, or a global or thread-local one in
// this thread, a query from a thread that is not relaxed would fail and
// invalidate the application's capture.
//
// Contexts sharing the GPU (contention.h): where the GPU has a busy board
// (region/board.h, AttachBoard), the gate keeps this process's mark on it
// busy while it has work in flight (set at each admission, refreshed and
// cleared by the helper and by each measurement) and charges each measured
// run its span times the mean share of the GPU this process had meanwhile
// (1 / (1 + other contexts busy)), so a container is not charged the slices
// the driver gave its neighbours. Without a board nothing changes: the run
// is charged as measured.
//
// Thread-safety: all methods are thread-safe; mu_ is never held across a
// driver call. One instance per process, owned by the runtime.
//
//   LaunchGate::Ticket t = gate.Before(stream, /*ptsz=*/false);
//   CUresult r = real_launch(...);
//   gate.After(t, r);
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/thread_annotations.h"
#include "cuda/compute_gate.h"
#include "cuda/contention.h"
#include "cuda/cuda_api.h"
#include "region/board.h"
#include "region/region.h"

namespace tessera::cuda {

// Where the gate reads time and sleeps: CLOCK_MONOTONIC, or a test's clock.
struct GateClock {
  uint64_t (*now_us)();
  void (*sleep_until_us)(uint64_t);
};
GateClock MonotonicClock();

class LaunchGate {
 public:
  struct Event;
  // Back-to-back launches on one stream measured by one pair of events.
  static constexpr uint32_t kRunLaunches = 16;
  static constexpr uint64_t kRunUs = 500;  // estimated GPU time of a run, at most
  struct Launch {
    const void* fn = nullptr;
    uint64_t estimate_us = 0;
  };
  // Launches since `start` (one reference) on one stream, with no end yet.
  struct Run {
    Event* start = nullptr;
    ShareClock::Mark from;  // when its first launch was admitted
    uint32_t n = 0;
    uint64_t estimate_us = 0;  // the sum of the launches'
    Launch launches[kRunLaunches];
  };
  // What Before() admitted; After() completes it. gpu: the container's GPU
  // index (not the CUDA ordinal); < 0: not gated.
  struct Ticket {
    int gpu = -1;
    CUstream stream = nullptr;
    CUcontext ctx = nullptr;
    uint64_t key_thread = 0;
    Run run;               // the run this launch joins (run.start: none, unmeasured)
    bool busy = false;     // the stream was busy before the launch: the run may stay open
    bool solo = false;     // its function has no estimate: measured alone
    const void* fn = nullptr;
    uint64_t estimate_us = 0;
    // The thread's capture-interaction mode is relaxed from Before() until
    // After(), which restores caller_mode.
    bool relaxed = false;
    CUstreamCaptureMode caller_mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  };

  // `layout` outlives the gate.
  LaunchGate(region::Layout* layout, GateClock clock);

  // The busy board of the container's GPU `gpu` (mapped for the life of
  // the process), before the first launch. Without one, measured runs are
  // charged as measured.
  void AttachBoard(int gpu, region::Board* board) TESSERA_EXCLUDES(mu_);

  // Blocks (sleeping) while the bucket of the current device (the one of
  // its index among the container's GPUs, device_map.h) does not admit a
  // launch of `fn` (a CUfunction or CUgraphExec), then finds where the
  // launch is measured from on `stream` (`ptsz`: a NULL stream is the
  // per-thread default stream): the stream's open run, its last end, or a
  // start event recorded now. On a capturing stream: returns at once, not
  // gated.
  // A gated ticket leaves the thread's capture-interaction mode relaxed:
  // the caller makes no call but the launch before passing it to After().
  Ticket Before(const void* fn, CUstream stream, bool ptsz);
  // After the driver accepted (or refused, `r`) the launch: leaves its run
  // open, or records the run's end event and queues it for measurement;
  // restores the thread's mode. Called once for every ticket Before()
  // returned, gated or not.
  void After(Ticket& t, CUresult r);
  // Fork handlers (pthread_atfork, through the runtime): the child has no
  // helper thread, and its parent's events and contexts are not its own.
  void PrepareFork() TESSERA_ACQUIRE(mu_);
  void ParentAfterFork() TESSERA_RELEASE(mu_);
  void ChildAfterFork() TESSERA_RELEASE(mu_);
  // At exit: the helper stops at its next wake-up; exit never waits for it.
  // Open runs are charged their estimates (unless another call of the gate
  // holds its lock: exit never waits).
  void Stop();

 private:
  struct Pending {
    Run run;
    Event* end;
  };
  struct FnEstimate {
    LaunchEstimate estimate;
    uint32_t unmeasured = 0;  // launches admitted, not yet measured
  };
  static constexpr size_t kMaxFunctions = 1 << 16;  // beyond: forget and relearn
  struct StreamKey {
    CUcontext ctx;  // the legacy and per-thread handles name one stream per context
    CUstream stream;
    uint64_t thread;  // the per-thread default stream is one per thread
    bool operator==(const StreamKey& o) const {
      return ctx == o.ctx && stream == o.stream && thread == o.thread;
    }
  };
  struct PerGpu {
    uint64_t inflight_us = 0;  // estimates of admitted, unmeasured launches
    LaunchEstimate estimate;  // any function: for functions not yet measured
    std::unordered_map<const void*, FnEstimate> functions;
    std::deque<Pending> pending;
    int measuring = 0;            // entries taken off `pending` by a drainer, not yet settled
    StreamKey last_stream{};      // the stream of the last launch admitted here
    Event* last_end = nullptr;    // its end event (one reference); none while a run is open
    Run open;                     // the open run (open.start: none), on open_stream
    StreamKey open_stream{};
    uint64_t last_admit_us = 0;   // the gate clock at the last admission
    int board_slot = -1;          // this process's slot on boards_[gpu]; -1: none yet
    uint64_t board_token = 0;
    ShareClock share;             // this process's share of the GPU over time
  };

  Event* NewEvent(CUcontext ctx, CUstream stream) TESSERA_EXCLUDES(mu_);  // recorded, 1 reference
  void Unref(Event* e) TESSERA_REQUIRES(mu_);
  // A launch left the in-flight set: measured (`measured_us`) or not.
  void Settle(PerGpu& g, const void* fn, uint64_t estimate_us, const uint64_t* measured_us)
      TESSERA_REQUIRES(mu_);
  // Charges `run`'s launches their estimates, settles them, and empties it.
  void ChargeEstimates(int gpu, Run& run) TESSERA_REQUIRES(mu_);
  // Queues `run` for measurement, ended by `end` (one reference, taken);
  // `chain`: `end` becomes the end of the last launch on `key`.
  void Queue(int gpu, Run& run, Event* end, const StreamKey& key, bool chain) TESSERA_REQUIRES(mu_);
  // Closes gpu's open run when the bucket does not admit: measured when it
  // is on `key`'s stream and that is still busy, else at its estimates.
  // Requires the calling thread's capture-interaction mode relaxed.
  void CloseOpenRun(int gpu, const StreamKey& key) TESSERA_EXCLUDES(mu_);
  // Charges the oldest queued run of `gpu` if its events have completed;
  // false when there is none. Never blocks. Drain: every GPU, until none.
  // Both require the calling thread's capture-interaction mode relaxed.
  bool DrainOne(int gpu) TESSERA_EXCLUDES(mu_);
  void Drain() TESSERA_EXCLUDES(mu_);
  void StartHelper() TESSERA_EXCLUDES(mu_);
  // Whether gpu's in-flight work may still be running at `now_us`: queued
  // runs, a measurement being settled, or recent admissions (an open run
  // whose stream went idle is not waited for).
  bool Busy(const PerGpu& g, uint64_t now_us) const TESSERA_REQUIRES(mu_);
  // Claims this process's board slot if needed, marks it busy or idle as
  // Busy() says, and with `sample` samples the share clock. Nothing without a board.
  void Publish(int gpu, uint64_t now_us, bool sample) TESSERA_REQUIRES(mu_);
  // The helper's pass: Publish(sample) for every GPU with a board.
  void PublishAll() TESSERA_EXCLUDES(mu_);
  static void* HelperMain(void* self);

  region::Layout* const layout_;
  const GateClock clock_;
  Mutex mu_;  // never held across a driver call
  PerGpu gpus_[region::kMaxGpus] TESSERA_GUARDED_BY(mu_);
  region::Board* boards_[region::kMaxGpus] TESSERA_GUARDED_BY(mu_) = {};  // kept across fork
  std::map<CUcontext, std::vector<CUevent>> free_ TESSERA_GUARDED_BY(mu_);
  bool helper_started_ TESSERA_GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_{false};
};

}  // namespace tessera::cuda
