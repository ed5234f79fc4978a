// kube-scheduler's default node scoring (kube_default_policy.h).
#include "core/kube_default_policy.h"

#include <algorithm>
#include <cmath>

namespace tessera::core {
namespace {

// NodeResourcesFit's leastRequestedScore.
int64_t LeastRequested(int64_t requested, int64_t capacity) {
  if (requested > capacity) return 0;
  return (capacity - requested) * kMaxNodeScore / capacity;
}

// NodeResourcesBalancedAllocation's balancedResourceScore for two resources.
int64_t Balanced(int64_t cpu, int64_t cpu_cap, int64_t mem, int64_t mem_cap) {
  double f[2];
  int n = 0;
  if (cpu_cap > 0) f[n++] = std::min(1.0, static_cast<double>(cpu) / static_cast<double>(cpu_cap));
  if (mem_cap > 0) f[n++] = std::min(1.0, static_cast<double>(mem) / static_cast<double>(mem_cap));
  const double std_dev = n == 2 ? std::abs(f[0] - f[1]) / 2 : 0.0;
  return static_cast<int64_t>((1 - std_dev) * static_cast<double>(kMaxNodeScore));
}

}  // namespace

int64_t KubeDefaultScore(const PodRequest& pod, const NodeState& node) {
  const int64_t cpu_cap = node.info.cpu_milli, mem_cap = node.info.memory_mib;
  const int64_t cpu = node.cpu_used_milli + pod.cpu_milli, mem = node.mem_used_mib + pod.memory_mib;
  int64_t fit = 0, resources = 0;
  if (cpu_cap > 0) { fit += LeastRequested(cpu, cpu_cap); ++resources; }
  if (mem_cap > 0) { fit += LeastRequested(mem, mem_cap); ++resources; }
  if (resources > 0) fit /= resources;
  int64_t balanced = 0;
  if (pod.cpu_milli > 0 || pod.memory_mib > 0) {  // best-effort pods score 0 there
    const int64_t with = Balanced(cpu, cpu_cap, mem, mem_cap);
    const int64_t without = Balanced(node.cpu_used_milli, cpu_cap, node.mem_used_mib, mem_cap);
    balanced = kMaxNodeScore / 2 + (kMaxNodeScore / 2 + with - without) / 2;
  }
  return fit + balanced;
}

Candidate KubeDefaultPolicy::Evaluate(const PodRequest& pod, const NodeState& node, Rng& /*rng*/) {
  Candidate c;
  PickGpus(pod, node, GpuSelect::kBestFit, nullptr, &c.pick);
  const int64_t total = KubeDefaultScore(pod, node);
  c.score = total / 2;
  c.fine = static_cast<double>(total);
  return c;
}

}  // namespace tessera::core
