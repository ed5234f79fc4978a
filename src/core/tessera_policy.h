// tessera: Tessera's default placement policy. FGD's fragmentation gradient
// with three changes:
//  - the target workload is learned online from the pods seen so far (the
//    classes covering 95 % of arrivals), not fixed in advance from a trace;
//  - a CPU-stranding term: a node whose idle GPUs could no longer be fed with
//    CPU at the workload's CPU-per-GPU ratio counts those GPUs as lost too,
//    so CPU-heavy pods stop starving GPU-rich nodes of CPU;
//  - a dead-capacity term: free share on a GPU that no learned class could
//    use at all (too small for every class, or its node too short of CPU)
//    counts again on top of FGD's expectation, so the policy avoids leaving
//    slivers that only a pod the workload never asks for could fill.
// Like FGD, the score is trunc(100 * sigmoid(-delta / 1000)) and ties go to
// the node first in a fixed order, which packs work onto fewer nodes.
//
// A node's value depends only on its GPU model, free CPU and the multiset of
// its GPUs' free shares, so values are memoised on that state (until the
// workload is next refreshed): many nodes of a cluster are in one of a few
// states (empty, full, one share taken), which keeps the policy cheap.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/policy.h"

namespace tessera::core {

struct TesseraPolicyOptions {
  // Re-derive the target workload after 32 arrivals, then whenever the
  // count doubles, and at least every `refresh_every` arrivals. Each refresh
  // invalidates cached scores, so it is kept rare.
  int refresh_every = 4096;
  // Share of arrivals the learned target workload covers (rarest classes
  // dropped first), as FGD's typical pods do.
  double coverage = 0.95;
  // Weight of the CPU-stranding term: idle GPU milli on a node beyond what its
  // free CPU can feed at the CPU-per-GPU ratio of the GPU pods seen so far.
  double strand_weight = 1.0;
  // Weight of the dead-capacity term: free GPU milli that no learned class
  // fits (model, CPU and share, and enough such GPUs for multi-GPU classes).
  double dead_weight = 1.0;
  // A refresh whose workload is within this L1 distance of the current one
  // (sum over classes of |weight change|), and whose CPU-per-GPU ratio moved
  // by less than this fraction, is not adopted, so cached scores stay valid.
  // 0: adopt every refresh.
  double refresh_tolerance = 0.15;

  // The policy as it was before the dead-capacity term ("tessera-v1").
  static TesseraPolicyOptions V1() {
    TesseraPolicyOptions o;
    o.dead_weight = 0;
    o.refresh_tolerance = 0;
    return o;
  }
};

// Sum over classes of |weight in a - weight in b| (a class missing from one
// side counts with weight 0 there): 0 for equal workloads, at most 2.
double WorkloadDistance(const TargetWorkload& a, const TargetWorkload& b);

class TesseraPolicy final : public PlacementPolicy {
 public:
  explicit TesseraPolicy(TesseraPolicyOptions options = {}, std::string name = "tessera")
      : options_(options), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  void OnArrival(const PodRequest& pod) override;
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override;
  uint64_t epoch() const override { return epoch_; }
  TieBreak tie_break() const override { return TieBreak::kNodeOrder; }

  const TargetWorkload& workload() const { return workload_; }
  const TesseraPolicyOptions& options() const { return options_; }

  // The value the policy minimises for a node in the given state (GPU milli):
  // FGD's fragmentation against the learned workload, plus the stranding and
  // dead-capacity terms. Exposed for tests.
  double NodeValue(const std::string& model, int64_t cpu_left, std::span<const int64_t> gpu_left);
  // Free GPU milli of the given state that no learned class could use.
  int64_t DeadMilli(const std::string& model, int64_t cpu_left, std::span<const int64_t> gpu_left);

  // Calls `fn(pick, score)` for every GPU choice Evaluate weighs on `node`,
  // in the order it weighs them (Evaluate keeps the first best), so policies
  // that build on tessera can adjust each choice's score.
  void ForEachPick(const PodRequest& pod, const NodeState& node,
                   const std::function<void(const GpuPick&, int64_t)>& fn);

 private:
  void Refresh();
  // The node's value as it is, and its model's id, cached per node version.
  double FragNow(const NodeState& node, int* model_id);
  struct NodeTerms {
    double frag = 0, strand = 0;
    int64_t dead = 0;
  };
  double ValueOf(int model_id, int64_t cpu_left, std::span<const int64_t> gpu_left);
  template <typename Fn>
  void Picks(const PodRequest& pod, const NodeState& node, bool distinct_only, Fn&& fn);
  NodeTerms ComputeTerms(int model_id, int64_t cpu_left, std::span<const int64_t> gpu_left) const;
  // Per learned class, whether it allows the GPU model with this id.
  int ModelId(const std::string& model);

  TesseraPolicyOptions options_;
  std::string name_;
  using Key = std::tuple<int64_t, int64_t, int, std::vector<std::string>>;
  std::map<Key, std::pair<int64_t, TaskClass>> seen_;
  int64_t arrivals_ = 0;
  int64_t gpu_cpu_seen_ = 0, gpu_milli_seen_ = 0;
  double cpu_per_gpu_ = 0;  // learned CPU milli wanted per 1000 GPU milli
  double Strand(int64_t cpu_left, int64_t idle_milli) const;
  int64_t next_refresh_ = 32;
  uint64_t epoch_ = 0;
  TargetWorkload workload_;
  std::unordered_map<const NodeState*, std::tuple<uint64_t, uint64_t, double, int>> now_cache_;

  std::unordered_map<std::string, int> model_ids_;
  std::vector<std::vector<char>> allows_;  // [model id][class]: class allows the model
  // NodeValue memo: (model id, GPU count, free CPU, sorted free shares).
  struct StateKey {
    std::array<uint64_t, 5> w{};
    bool operator==(const StateKey&) const = default;
  };
  struct StateHash {
    size_t operator()(const StateKey& k) const;
  };
  std::unordered_map<StateKey, double, StateHash> memo_;
};

}  // namespace tessera::core
