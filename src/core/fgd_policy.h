// FGD: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23). Places a
// pod where it raises the node's fragmentation (fragmentation.h) the least,
// and picks the GPU the same way. Score = trunc(100 * sigmoid(-delta/1000)),
// as in the artifact.
#pragma once

#include <unordered_map>

#include "core/policy.h"

namespace tessera::core {

class FgdPolicy final : public PlacementPolicy {
 public:
  explicit FgdPolicy(TargetWorkload workload) : workload_(std::move(workload)) {}
  std::string_view name() const override { return "fgd"; }
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override;
  int64_t ScorePick(const PodRequest& pod, const NodeState& node, const GpuPick& pick, Rng& rng) override;

 private:
  // Fragmentation of the node as it is, cached by the node's version.
  double FragNow(const NodeState& node);

  TargetWorkload workload_;
  std::unordered_map<const NodeState*, std::pair<uint64_t, double>> now_cache_;
};

// FGD's node score for a fragmentation change of `delta` GPU milli (after
// minus before): trunc(100 * sigmoid(-delta / 1000)); 50 when nothing changes.
int64_t FgdScore(double delta);

// The node's fragmentation after placing `pod` on `node` with `pick`, for
// policies that build on FGD.
double FragAfter(const TargetWorkload& w, const PodRequest& pod, const NodeState& node,
                 const GpuPick& pick);

}  // namespace tessera::core
