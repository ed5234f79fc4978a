// kube-scheduler's default node scoring for a pod whose only GPU request is a
// ResourceClaim, as a placement policy: what places such a pod when no
// extender steers it (the "DRA, kube-scheduler alone" case of
// docs/notes/dra.md, "Placement under DRA").
//
// The model (Kubernetes 1.36 defaults, pkg/scheduler/apis/config/v1 and
// framework/plugins/noderesources): of the default score plugins only two
// tell nodes apart for such a pod, both on CPU and memory with weight 1:
//  - NodeResourcesFit, strategy LeastAllocated: per resource
//    (allocatable - requested) * 100 / allocatable, with `requested` the
//    node's pods plus this one, averaged;
//  - NodeResourcesBalancedAllocation: s = (1 - |cpu fraction - memory
//    fraction| / 2) * 100, taken with and without the pod, scored
//    50 + (50 + s_with - s_without) / 2.
// DynamicResources scores only claims with prioritized alternatives
// (firstAvailable), none here; TaintToleration, NodeAffinity,
// PodTopologySpread and InterPodAffinity give every node the same score to a
// pod without tolerations, affinities or spread constraints (the system
// default spread constraints apply only to pods of a Service, ReplicaSet or
// StatefulSet; the trace's pods have no owners); ImageLocality is not
// modelled. Equal totals are broken at random, as kube-scheduler's
// selectHost does. GPUs play no part in the score; the GPU pick Evaluate
// fills is best fit (the DRA variants replace it with the allocator's pick).
// Candidate.score is half the total (to stay in 0..kMaxNodeScore) and
// Candidate.fine the total, so nodes rank exactly by the total.
// Not modelled: percentageOfNodesToScore (kube-scheduler scores only part of
// the feasible nodes in clusters above 100 nodes unless it is set to 100),
// and the 100m / 200 MiB that pods without requests count as.
//
// Thread-safety: as every PlacementPolicy, used by one thread at a time.
#pragma once

#include "core/policy.h"

namespace tessera::core {

// NodeResourcesFit (LeastAllocated) plus NodeResourcesBalancedAllocation for
// `pod` on `node`, each 0..100, so 0..200; integer arithmetic as
// kube-scheduler's. Resources a node has none of are left out.
int64_t KubeDefaultScore(const PodRequest& pod, const NodeState& node);

class KubeDefaultPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "kube-default"; }
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override;
  TieBreak tie_break() const override { return TieBreak::kRandom; }
};

}  // namespace tessera::core
