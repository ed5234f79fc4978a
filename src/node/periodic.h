// Runs one pass of a node-agent loop (reconciliation, usage, region
// cleanup) every interval on a thread of its own, so a slow API server or
// kubelet in one loop never delays another, nor the kubelet watch. The first
// pass runs one interval after Start. Stop wakes the thread at once and
// waits for the pass in flight.
// Thread-safety: Start and Stop from one thread; the pass runs on the loop's.
//
//   PeriodicLoop reconcile(std::chrono::seconds(10), [&] { reconciler.Pass(); });
//   reconcile.Start();
//   ...
//   reconcile.Stop();  // also on destruction
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "core/thread_annotations.h"

namespace tessera::node {

class PeriodicLoop {
 public:
  // `interval` > 0.
  PeriodicLoop(std::chrono::milliseconds interval, std::function<void()> pass);
  ~PeriodicLoop();  // Stop()
  PeriodicLoop(const PeriodicLoop&) = delete;
  PeriodicLoop& operator=(const PeriodicLoop&) = delete;

  // Starts the thread; no-op when it runs.
  void Start() TESSERA_EXCLUDES(mu_);
  // Ends the thread after the pass in flight, if any. Idempotent.
  void Stop() TESSERA_EXCLUDES(mu_);

 private:
  void Loop() TESSERA_EXCLUDES(mu_);

  const std::chrono::milliseconds interval_;
  const std::function<void()> pass_;
  Mutex mu_;
  CondVar wake_;  // stopping
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tessera::node
