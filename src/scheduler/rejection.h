// Why a pod cannot go to a node, in words a person can act on: the reasons
// Filter returns to kube-scheduler, which shows them in the pod's
// FailedScheduling event. Pure functions; thread-safe.
//
//   core::FitFailure why = core::FitsNode(pod, node);
//   if (why != core::FitFailure::kNone) Rejection r = ExplainMisfit(pod, node, why, true);
//   // r.reason: "node n3: no GPU with 8192 MiB and 30 percent free; largest
//   //            free share is 6144 MiB and 100 percent on GPU 3 (A100)"
//
// No reason holds a '%': kube-scheduler uses them as the format string of the
// FailedScheduling Event.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/ledger.h"
#include "core/model.h"
#include "core/policy.h"

namespace tessera::scheduler {

struct Rejection {
  std::string reason;
  // True when freeing the node (preemption) would not help either: a model
  // the pod does not allow, a GPU or node too small for it.
  bool unresolvable = false;
};

// Explains `why` (FitsNode(pod, node), not kNone). With `detailed` the reason
// starts with "node NAME: " and says how close the node comes (free CPU, the
// GPU with the largest free share); without it, it depends only on the pod
// and the kind of failure, so kube-scheduler's event can group many nodes
// under one reason.
Rejection ExplainMisfit(const core::PodRequest& pod, const core::NodeState& node, core::FitFailure why,
                        bool detailed);

// A problem no node in the cluster can solve, or "" when none: the pod allows
// only models no GPU has, avoids every model there is, or asks more memory
// per GPU than any GPU of an allowed model has. `models` maps each model in
// the cluster to its largest GPU's memory; when empty, nothing is checked.
std::string ClusterWideProblem(const core::PodRequest& pod,
                               const std::map<std::string, int64_t, std::less<>>& models);

// "8192 MiB and 30 percent", "8192 MiB", "30 percent", "a whole GPU".
std::string DescribeShare(const core::ContainerRequest& c);

// The GPUs of an assignment for logs: "[0:8192MiB/30%]" for one container,
// "[trainer 0:whole 1:whole; sidecar 2:4096MiB/20%]" for several.
std::string DescribeAssignment(const core::Assignment& a);

}  // namespace tessera::scheduler
