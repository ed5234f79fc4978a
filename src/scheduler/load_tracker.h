// LoadTracker: how busy the extender expects each GPU to be, learned from the
// tessera.io/usage annotations node agents write on their pods (core/pod_usage.h):
// a utilization history per workload (core::WorkloadHistory) and the
// predicted busy fraction of every GPU from the pods on it
// (core::GpuLoadBook), which the tessera-interference policy scores against.
// No I/O and no lock: ClusterState calls it under its own mutex.
//
// A pod's workload (core::PodView::workload) is its tessera.io/workload
// label, else its controlling owner (the pods of a Deployment's ReplicaSets
// count as the Deployment), else the pod itself, so a bare pod learns from
// its own measurements while a new one is predicted from its request.
//
//   LoadTracker load(LoadTrackerOptions{});
//   load.Pending(key, pod.workload, request, now_s);             // unbound pod seen
//   load.Placed(key, workload, request, assignment, now_s);      // it holds a share
//   if (*load.Measured(key, usage_text, usage, now_s)) ledger.Touch(node);
//   load.Released(key);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/load.h"
#include "core/model.h"
#include "core/status.h"
#include "core/pod_usage.h"

namespace tessera::scheduler {

struct LoadTrackerOptions {
  // Learn from tessera.io/usage. When false every share is predicted at
  // default_factor x its request for its whole life.
  bool learn = true;
  // Predicted busy fraction of a share without history, as a fraction of its
  // core request.
  double default_factor = 1.0;
  core::WorkloadHistoryOptions history;
};

class LoadTracker {
 public:
  explicit LoadTracker(LoadTrackerOptions options = {});

  // An unbound pod: sets its predicted busy (what the policy scores it
  // with). Ignored for a pod placed already (assumed at bind).
  void Pending(const std::string& pod_key, const std::string& workload, const core::PodRequest& request,
               int64_t now_s);
  // The pod holds `assignment` now (bound, or assumed at bind): books its
  // prediction on the assignment's GPUs. `workload` may be "" when not known
  // yet (assumed before the pod watch showed it): the pod itself is used.
  void Placed(const std::string& pod_key, const std::string& workload, const core::PodRequest& request,
              const core::Assignment& assignment, int64_t now_s);
  // The pod holds no share and is not pending any more.
  void Released(const std::string& pod_key);

  // The pod's tessera.io/usage text as last seen (`usage`: it decoded). A
  // text seen before for the pod changes nothing. Otherwise the mean
  // utilization of the pod's measured GPU shares (1-99 % compute under the
  // interception library, where the launch gate measures GPU time; others
  // report 0 and are left out) is added to its workload's history
  // and, when the pod is placed, it is re-booked at its workload's new
  // prediction. True when that changed what a GPU is booked with (scores on
  // the node are stale); the decode error for a malformed text. `workload`
  // updates the pod's workload when not empty.
  Result<bool> Measured(const std::string& pod_key, const std::string& workload, const std::string& usage_text,
                        const Result<core::PodUsage>& usage, int64_t now_s);

  // Read under the caller's lock.
  const core::GpuLoadBook& book() const { return book_; }
  const core::WorkloadHistory& history() const { return history_; }
  const LoadTrackerOptions& options() const { return options_; }
  // Usage samples taken into the history so far.
  int64_t samples() const { return samples_; }

 private:
  struct PodLoad {
    std::string workload;
    std::string usage_text;
    bool placed = false;
    core::PodRequest request;
    core::Assignment assignment;
  };
  std::vector<int64_t> Predict(const PodLoad& pod, int64_t now_s) const;

  LoadTrackerOptions options_;
  core::WorkloadHistory history_;
  core::GpuLoadBook book_;
  std::unordered_map<std::string, PodLoad> pods_;
  int64_t samples_ = 0;
};

}  // namespace tessera::scheduler
