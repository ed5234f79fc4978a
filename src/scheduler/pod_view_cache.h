// PodViewCache: the pods the extender decoded from kube-scheduler's calls
// (and the pending pods the pod watch decoded), by uid, so one pod is decoded once per uid and resourceVersion across
// filter, prioritize, preempt and bind (kube-scheduler sends the same Pod
// object to each verb of a scheduling cycle, and bind sends only its uid).
// Bounded: beyond `capacity` uids the oldest remembered is forgotten.
// A pod object without a resourceVersion is never reused (Find misses), so
// hand-written requests are decoded every time; it is still remembered for
// Bind. Thread-safe.
//
//   PodViewCache cache(4096);
//   std::shared_ptr<const core::PodView> pod = cache.Find(uid, rv);
//   if (pod == nullptr) { pod = Decode(...); cache.Remember(pod); }
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/pod_view.h"
#include "core/thread_annotations.h"

namespace tessera::scheduler {

class PodViewCache {
 public:
  // `capacity`: how many uids are remembered (at least 1).
  explicit PodViewCache(size_t capacity);
  PodViewCache(const PodViewCache&) = delete;
  PodViewCache& operator=(const PodViewCache&) = delete;

  // The view remembered for `uid` when it was decoded at `resource_version`;
  // nullptr when there is none, it is of another version, or either is
  // empty. A hit is counted in hits().
  std::shared_ptr<const core::PodView> Find(std::string_view uid, std::string_view resource_version);

  // The view last remembered for `uid`, of any version; nullptr when none
  // (or `uid` is empty).
  std::shared_ptr<const core::PodView> Latest(std::string_view uid) const;

  // Remembers `pod` under its uid, replacing what was remembered for it
  // (keeping its place in the age order). Ignored for nullptr or an empty uid.
  void Remember(std::shared_ptr<const core::PodView> pod);

  size_t size() const;
  // How many Find calls returned a view (decodes saved), since construction.
  uint64_t hits() const;

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const core::PodView>> by_uid_ TESSERA_GUARDED_BY(mu_);
  std::deque<std::string> order_ TESSERA_GUARDED_BY(mu_);  // uids, oldest first
  uint64_t hits_ TESSERA_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::scheduler
