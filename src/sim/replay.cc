#include "sim/replay.h"

#include <algorithm>
#include <chrono>

#include "core/dra_policy.h"
#include "core/ledger.h"
#include "core/placer.h"
#include "core/policy.h"
#include "core/random.h"
#include "sim/workload.h"

namespace tessera::sim {

std::vector<std::string> ReplayPolicyNames() {
  std::vector<std::string> names = core::PolicyNames();
  for (auto& n : core::DraPolicyNames()) names.push_back(std::move(n));
  return names;
}

Result<std::unique_ptr<core::PlacementPolicy>> MakeReplayPolicy(std::string_view name,
                                                                const core::PolicyConfig& config) {
  const auto dra = core::DraPolicyNames();
  if (std::find(dra.begin(), dra.end(), name) != dra.end()) return core::MakeDraPolicy(name, config);
  auto policy = core::MakePolicy(name, config);
  if (policy.ok()) return policy;
  std::string known;
  for (const auto& n : ReplayPolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown policy \"" + std::string(name) + "\" (known: " + known + ")");
}

core::Placer SeededPlacer(core::PlacementPolicy& policy, size_t node_count, uint64_t seed) {
  core::Placer placer(policy, seed ^ 0x7e55e7a5eedULL);
  std::vector<int> rank(node_count);
  for (size_t i = 0; i < rank.size(); ++i) rank[i] = static_cast<int>(i);
  core::Rng order_rng(seed * 0x9e3779b97f4a7c15ULL + 1);
  order_rng.Shuffle(rank);
  placer.SetNodeRank(std::move(rank));
  return placer;
}

Result<RunResult> Replay(const std::vector<core::NodeInfo>& nodes,
                         const std::vector<core::PodRequest>& arrivals, const ReplayOptions& options,
                         ReplayStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  core::PolicyConfig config{options.typical, options.interference, nullptr};
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<core::PlacementPolicy> policy,
                           MakeReplayPolicy(options.policy, config));
  core::Ledger ledger;
  for (const auto& n : nodes) TESSERA_RETURN_IF_ERROR(ledger.AddNode(n));
  core::Placer placer = SeededPlacer(*policy, ledger.nodes().size(), options.seed);

  RunResult run;
  run.policy = options.policy;
  run.seed = options.seed;
  run.total_gpus = ledger.TotalGpus();
  run.samples.reserve(arrivals.size());

  // Per-node fragmentation for the report, recomputed only for changed nodes.
  const size_t n = ledger.nodes().size();
  std::vector<uint64_t> seen_version(n, 0);
  std::vector<core::FragBreakdown> frag(n);
  int64_t arrived = 0, used = 0;
  ReplayStats st;
  for (const core::PodRequest& pod : arrivals) {
    arrived += PodGpuMilli(pod);
    ++st.arrived;
    Result<core::Assignment> a = placer.Place(pod, ledger);
    if (a.ok()) {
      Status s = ledger.Assume(pod, *a);
      if (!s.ok()) return Internal("placer chose a placement the ledger refuses: " + s.ToString());
      used += PodGpuMilli(pod);
      ++st.placed;
      for (const core::ContainerRequest& c : pod.containers) {
        if (c.gpu_count > 0 && c.core_milli_per_gpu < core::kCoreMilliPerGpu) {
          run.end.shares_placed[c.core_milli_per_gpu] += c.gpu_count;
        }
      }
    } else {
      ++st.failed;
    }
    double frag_sum = 0, idle_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const core::NodeState& node = ledger.nodes()[i];
      if (seen_version[i] != node.version) {
        const core::GpuLeft left = core::FreeCore(node);
        frag[i] = core::NodeFragBreakdown(options.typical, node.model(), node.CpuFree(), left.span());
        seen_version[i] = node.version;
      }
      frag_sum += frag[i].fragmented;
      idle_sum += frag[i].idle();
    }
    run.samples.push_back({arrived, used, frag_sum, idle_sum});
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const core::NodeState& node : ledger.nodes()) {
    run.end.cpu_free_milli += node.CpuFree();
    run.end.cpu_milli += node.info.cpu_milli;
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      if (!node.info.gpus[g].healthy) continue;
      const int64_t free = node.GpuCoreFree(static_cast<int>(g));
      if (free == core::kCoreMilliPerGpu) run.end.whole_idle_milli += free;
      else if (node.gpus[g].sharers == 1 && node.gpus[g].core_used_milli >= 800) run.end.large_share_milli += free;
      else if (free < kSmallSliverMilli) run.end.small_sliver_milli += free;
      else run.end.other_sliver_milli += free;
    }
  }
  if (stats) *stats = st;
  return run;
}

}  // namespace tessera::sim
