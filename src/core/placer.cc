#include "core/placer.h"

#include <array>

namespace tessera::core {

Placer::Placer(PlacementPolicy& policy, uint64_t seed) : policy_(policy), rng_(seed) {}

std::string ShapeKey(const PodRequest& pod, const PlacementPolicy& policy) {
  std::string key = std::to_string(pod.cpu_milli) + "/" + std::to_string(pod.memory_mib) + "/" +
                    std::string(IsolationName(pod.isolation));
  for (const auto& c : pod.containers) {
    key += "|" + std::to_string(c.gpu_count) + "," + std::to_string(c.mem_mib_per_gpu) + "," +
           std::to_string(c.core_milli_per_gpu);
    for (const auto& m : c.models.allowed) key += "+" + m;
    for (const auto& m : c.models.avoided) key += "-" + m;
  }
  if (std::string extra = policy.CacheKey(pod); !extra.empty()) key += "#" + extra;
  return key;
}

int Placer::ShapeId(const PodRequest& pod) {
  auto [it, inserted] = shapes_.emplace(ShapeKey(pod, policy_), static_cast<int>(shapes_.size()));
  if (inserted) cache_.emplace_back();
  return it->second;
}

Candidate Placer::Score(const PodRequest& pod, const NodeState& node) {
  return policy_.Evaluate(pod, node, rng_);
}

Assignment MakeAssignment(const PodRequest& pod, const NodeState& node, const GpuPick& pick) {
  Assignment a;
  a.node = node.info.name;
  int k = 0;
  for (const auto& c : pod.containers) {
    ContainerAssignment ca{c.name, {}};
    for (int g = 0; g < c.gpu_count; ++g) {
      const int idx = pick.index[k++];
      const GpuInfo& gpu = node.info.gpus[idx];
      ca.gpus.push_back({idx, gpu.uuid, ShareMemMiB(c, gpu), c.core_milli_per_gpu});
    }
    a.containers.push_back(std::move(ca));
  }
  return a;
}

Result<Assignment> Placer::Place(const PodRequest& pod, const Ledger& ledger) {
  policy_.OnArrival(pod);
  policy_.SeeCluster(ledger);
  const auto& nodes = ledger.nodes();
  const int shape = ShapeId(pod);
  auto& row = cache_[shape];
  if (row.size() != nodes.size()) row.assign(nodes.size(), CacheEntry{});
  const bool cacheable = policy_.Cacheable();
  const bool all_equal = policy_.ScoresAllEqual();
  const uint64_t epoch = policy_.epoch();
  const bool by_order = policy_.tie_break() == TieBreak::kNodeOrder;

  int best = -1;
  Candidate best_c;
  int ties = 0;
  std::array<int, 7> why{};
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const NodeState& node = nodes[i];
    CacheEntry& e = row[i];
    const bool fresh = e.version == node.version + 1;
    if (!fresh) {  // the filter depends only on the shape and the node
      e.version = node.version + 1;
      e.why = FitsNode(pod, node);
      e.fits = e.why == FitFailure::kNone;
      e.epoch = epoch + 1;  // score not computed yet
    }
    if (!e.fits) {
      ++why[static_cast<int>(e.why)];
      continue;
    }
    if (all_equal) {  // uniform choice; evaluated after the loop
      if (rng_.Below(static_cast<uint64_t>(++ties)) == 0) best = i;
      continue;
    }
    if (!cacheable || e.epoch != epoch) {
      e.candidate = policy_.Evaluate(pod, node, rng_);
      e.epoch = epoch;
    }
    const Candidate& c = e.candidate;
    const bool better = best < 0 || c.score > best_c.score ||
                        (c.score == best_c.score && c.fine > best_c.fine);
    const bool equal = best >= 0 && c.score == best_c.score && c.fine == best_c.fine;
    if (better) {
      best = i;
      best_c = c;
      ties = 1;
    } else if (equal) {
      if (by_order) {
        const int ri = rank_.empty() ? i : rank_[i];
        const int rb = rank_.empty() ? best : rank_[best];
        if (ri < rb) { best = i; best_c = c; }
      } else if (rng_.Below(static_cast<uint64_t>(++ties)) == 0) {
        best = i;
        best_c = c;
      }
    }
  }
  if (all_equal && best >= 0) best_c = policy_.Evaluate(pod, nodes[best], rng_);
  if (best < 0) {
    std::string msg = "0/" + std::to_string(nodes.size()) + " nodes fit " + pod.key;
    std::string sep = ": ";
    for (int f = 1; f < static_cast<int>(why.size()); ++f) {
      if (why[f] == 0) continue;
      msg += sep + std::to_string(why[f]) + " " + std::string(FitFailureName(static_cast<FitFailure>(f)));
      sep = ", ";
    }
    return ResourceExhausted(std::move(msg));
  }
  return MakeAssignment(pod, nodes[best], best_c.pick);
}

}  // namespace tessera::core
