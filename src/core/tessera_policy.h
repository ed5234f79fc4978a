// tessera: Tessera's default placement policy. It places one pod at a time,
// as the extender sees them, and learns the target workload online (the
// classes covering 95 % of the pods seen so far). Each node gets a value, in
// GPU milli, that estimates how much of its free capacity will end up wasted;
// the pod goes where its placement raises that value least. The value sums:
//  - expected waste per GPU (the default's main term): a GPU with f milli
//    free is filled by the learned classes' shares that fit it, recursively,
//    and whatever no share is likely to fill stays wasted (ExpectedWaste);
//    this looks ahead over the arrivals to come, so a share goes where what
//    it leaves behind is likely to be filled, not merely where it fits best
//    now;
//  - a CPU-stranding term: a node whose idle GPUs could no longer be fed with
//    CPU at the workload's CPU-per-GPU ratio counts those GPUs as lost too,
//    so CPU-heavy pods stop starving GPU-rich nodes of CPU; where the pods
//    seen ask for clearly more CPU than the GPU pods alone (many CPU-only
//    pods), the ratio is raised, so each node keeps more CPU per idle GPU
//    (cpu_pressure_gain);
//  - a dead-capacity term: free share on a GPU that no learned class could
//    use at all counts again, in part when it is too small for every class
//    (dead_weight), in full when the node lacks the CPU or GPU model every
//    class needs (starved_weight), so the policy avoids leaving capacity
//    that only a pod the workload never asks for could use;
//  - FGD's fragmentation against the learned workload (weight 0 in the
//    default; 1 in the earlier policies tessera-v1 and tessera-v2).
// Like FGD, the score is trunc(100 * sigmoid(-delta / 1000)) and ties go to
// the node first in a fixed order, which packs work onto fewer nodes.
//
// A node's value depends only on its GPU model, free CPU and the multiset of
// its GPUs' free shares, so values are memoised on that state (until the
// workload is next refreshed): many nodes of a cluster are in one of a few
// states (empty, full, one share taken), which keeps the policy cheap.
//
// Thread-safety: as every PlacementPolicy, used by one thread at a time.
//
//   TesseraPolicy p;                        // the default, "tessera"
//   for (const PodRequest& pod : seen) p.OnArrival(pod);
//   Candidate c = p.Evaluate(pod, node, rng);
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
  // fits (share, and enough such GPUs for multi-GPU classes) on a node where
  // some class has the CPU and model it needs.
  double dead_weight = 0.5;
  // Weight of the starved term: free GPU milli on a node where no learned GPU
  // class has the CPU (or GPU model) it needs.
  double starved_weight = 1.0;
  // Weight of FGD's fragmentation against the learned workload.
  double frag_weight = 0;
  // Weight of the expected-waste term: the sum over GPUs of ExpectedWaste.
  double waste_weight = 1.0;
  // Expected waste: a free share that the learned GPU classes fitting it make
  // up this share of GPU demand or more is counted as filled; below it, in
  // proportion (see ExpectedWaste). 0: any fitting share counts as filling.
  double fill_threshold = 0.08;
  // Expected waste: the part of the next fill that goes to the fitting share
  // leaving the least waste, as a placer choosing among many GPUs tends to
  // do; the rest is drawn by popularity (see ExpectedWaste).
  double fill_greedy = 0.6;
  // A refresh whose workload is within this L1 distance of the current one
  // (sum over classes of |weight change|), and whose CPU-per-GPU ratio moved
  // by less than this fraction, is not adopted, so cached scores stay valid.
  // 0: adopt every refresh.
  double refresh_tolerance = 0.15;
  // CPU pressure. c = CPU milli asked by all pods seen / CPU milli asked by
  // the GPU pods seen (1 without CPU-only pods). The stranding term's
  // CPU-per-GPU ratio is multiplied by
  //   clamp(1 + cpu_pressure_gain * (c - cpu_pressure_knee), 1, cpu_pressure_max),
  // so where CPU-only pods will compete for the CPU, nodes keep more of it
  // per idle GPU. 0: the plain ratio (tessera-v3 and earlier). Only pods
  // passed to OnArrival count: the simulator passes every pod, the extender
  // every pod holding a GPU share and every bound pod without GPUs.
  double cpu_pressure_gain = 1.0;
  double cpu_pressure_knee = 1.2;
  double cpu_pressure_max = 2.0;

  // The default before the CPU-pressure boost ("tessera-v3").
  static TesseraPolicyOptions V3() {
    TesseraPolicyOptions o;
    o.cpu_pressure_gain = 0;
    return o;
  }

  // The default before the expected-waste term ("tessera-v2"): FGD's
  // fragmentation, stranding and dead capacity.
  static TesseraPolicyOptions V2() {
    TesseraPolicyOptions o = V3();
    o.frag_weight = 1.0;
    o.waste_weight = 0;
    o.dead_weight = 1.0;
    return o;
  }
  // The policy before the dead-capacity term ("tessera-v1").
  static TesseraPolicyOptions V1() {
    TesseraPolicyOptions o = V2();
    o.dead_weight = 0;
    o.starved_weight = 0;
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
  int64_t ScorePick(const PodRequest& pod, const NodeState& node, const GpuPick& pick, Rng& rng) override;
  uint64_t epoch() const override { return epoch_; }
  TieBreak tie_break() const override { return TieBreak::kNodeOrder; }

  const TargetWorkload& workload() const { return workload_; }
  const TesseraPolicyOptions& options() const { return options_; }
  // The stranding term's CPU milli per 1000 idle GPU milli, as learned at the
  // last adopted refresh (CPU pressure included); 0 before the first.
  double strand_ratio() const { return cpu_per_gpu_; }

  // The value the policy minimises for a node in the given state (GPU milli):
  // the weighted sum of the expected-waste, stranding, dead-capacity and
  // fragmentation terms. Exposed for tests.
  double NodeValue(const std::string& model, int64_t cpu_left, std::span<const int64_t> gpu_left);
  // W(f): the GPU milli of a GPU with f = `free_milli` free (clamped to
  // 0..1000) that is expected to stay unused. Over the learned workload's
  // GPU classes (CPU, model and GPU count set aside; a k-GPU class counts k
  // times, whole GPUs as shares of 1000), p(s) is the share of GPU demand
  // asking for s milli per GPU and P(f) the part with s <= f; with
  // t = fill_threshold and g = fill_greedy:
  //   W(f) = f                                              when P(f) = 0,
  //   W(f) = (1 - r) f + r ((1 - g) A(f) + g B(f)),  r = min(1, P(f) / t),
  //   A(f) = sum_{s<=f} p(s) W(f - s) / P(f),  B(f) = min_{s<=f} W(f - s).
  // A GPU with room for common shares is filled by them, partly by the one
  // that fits best (B), partly by popularity (A), and its waste is what they
  // leave; room that only rare shares fit is mostly wasted. 0 before the
  // first refresh.
  double ExpectedWaste(int64_t free_milli) const;
  // Free GPU milli of the given state that no learned class could use
  // (starved nodes included).
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
    double frag = 0, strand = 0, waste = 0;
    int64_t dead = 0;     // free milli no class could use (starved included)
    int64_t starved = 0;  // all idle milli when no GPU class has the CPU and model
  };
  // Fills waste_ (ExpectedWaste for 0..1000) from workload_.
  void BuildWasteTable();
  double ValueOf(int model_id, int64_t cpu_left, std::span<const int64_t> gpu_left);
  // The score of placing `pod` on `node` with `pick`, given the node's value
  // `before` and its model id and free shares as they are.
  int64_t PickScore(const PodRequest& pod, const NodeState& node, const GpuPick& pick, int model_id, double before,
                    const GpuLeft& left);
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
  int64_t gpu_cpu_seen_ = 0, gpu_milli_seen_ = 0, cpu_seen_ = 0;
  double cpu_per_gpu_ = 0;  // learned CPU milli wanted per 1000 GPU milli, CPU pressure included
  double Strand(int64_t cpu_left, int64_t idle_milli) const;
  int64_t next_refresh_ = 32;
  uint64_t epoch_ = 0;
  TargetWorkload workload_;
  std::vector<double> waste_;  // [free milli 0..1000]: ExpectedWaste
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
