#include "core/fgd_policy.h"

#include <cmath>

namespace tessera::core {
int64_t FgdScore(double delta) {
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / 1000.0)));
}

double FragAfter(const TargetWorkload& w, const PodRequest& pod, const NodeState& node,
                 const GpuPick& pick) {
  GpuLeft left = FreeCore(node);
  int k = 0;
  for (const auto& c : pod.containers)
    for (int g = 0; g < c.gpu_count; ++g) left.left[pick.index[k++]] -= c.core_milli_per_gpu;
  return NodeFragAmount(w, node.model(), node.CpuFree() - pod.cpu_milli, left.span());
}

double FgdPolicy::FragNow(const NodeState& node) {
  auto& slot = now_cache_[&node];
  if (slot.first != node.version || node.version == 0) {
    const GpuLeft left = FreeCore(node);
    slot = {node.version, NodeFragAmount(workload_, node.model(), node.CpuFree(), left.span())};
  }
  return slot.second;
}

int64_t FgdPolicy::ScorePick(const PodRequest& pod, const NodeState& node, const GpuPick& pick, Rng& /*rng*/) {
  return FgdScore(FragAfter(workload_, pod, node, pick) - FragNow(node));
}

Candidate FgdPolicy::Evaluate(const PodRequest& pod, const NodeState& node, Rng& /*rng*/) {
  Candidate best;
  const double before = FragNow(node);
  if (!IsSingleShare(pod)) {
    // CPU-only, whole-GPU and multi-container pods: the lowest-index fully
    // free GPUs (whole) or best fit (shares), then the fragmentation change.
    PickGpus(pod, node, GpuSelect::kBestFit, nullptr, &best.pick);
    best.score = FgdScore(FragAfter(workload_, pod, node, best.pick) - before);
    return best;
  }
  // A sharing pod: try every GPU it fits on; the lowest index wins ties.
  bool found = false;
  for (const GpuPick& pick : ShareCandidates(pod, node)) {
    const int64_t s = FgdScore(FragAfter(workload_, pod, node, pick) - before);
    if (!found || s > best.score) {
      best.score = s;
      best.pick = pick;
      found = true;
    }
  }
  return best;
}

}  // namespace tessera::core
