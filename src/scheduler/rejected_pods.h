// Pods the extender just turned away for lack of room, remembered for a few
// seconds so that a share freed right after can wake them. kube-scheduler may
// see a pod's deletion before tessera-scheduler's watch does, retry a waiting
// pod against the stale ledger, and then park it until the next cluster event.
// Thread-safe.
//
//   rejected.Note("ns/p", "uid-1", now);                 // filter found no room
//   for (auto& p : rejected.TakeSince(now - seconds(5)))  // after a share is freed
//     PokeSoKubeSchedulerRetries(p);
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/thread_annotations.h"

namespace tessera::scheduler {

class RejectedPods {
 public:
  using Clock = std::chrono::steady_clock;
  struct Pod {
    std::string key;  // namespace/name
    std::string uid;
    Clock::time_point at;
  };

  // Keeps at most `capacity` pods, each for at most `keep`.
  explicit RejectedPods(size_t capacity = 4096, std::chrono::seconds keep = std::chrono::seconds(30))
      : capacity_(capacity), keep_(keep) {}

  // Records that `key` found no room at `at`; a newer note replaces an older
  // one of the same pod.
  void Note(const std::string& key, const std::string& uid, Clock::time_point at);

  // Forgets `key` (filter found room for it after all).
  void Forget(const std::string& key);

  // Removes and returns the pods noted at or after `since`, oldest first, at
  // most `max` of them (the rest stay for the next call).
  std::vector<Pod> TakeSince(Clock::time_point since, size_t max = SIZE_MAX);

  size_t size() const;

 private:
  void PruneLocked(Clock::time_point now) TESSERA_REQUIRES(mu_);

  const size_t capacity_;
  const std::chrono::seconds keep_;
  mutable Mutex mu_;
  std::deque<Pod> pods_ TESSERA_GUARDED_BY(mu_);  // oldest first
};

}  // namespace tessera::scheduler
