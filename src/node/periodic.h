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
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tessera::node {

class PeriodicLoop {
 public:
  // `interval` > 0.
  PeriodicLoop(std::chrono::milliseconds interval, std::function<void()> pass);
  ~PeriodicLoop();  // Stop()
  PeriodicLoop(const PeriodicLoop&) = delete;
  PeriodicLoop& operator=(const PeriodicLoop&) = delete;

  // Starts the thread; no-op when it runs.
  void Start();
  // Ends the thread after the pass in flight, if any. Idempotent.
  void Stop();

 private:
  void Loop();

  const std::chrono::milliseconds interval_;
  const std::function<void()> pass_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace tessera::node
