// tessera: Tessera's default placement policy. FGD's fragmentation gradient
// with two changes:
//  - the target workload is learned online from the pods seen so far (the
//    classes covering 95 % of arrivals), not fixed in advance from a trace;
//  - a CPU-stranding term: a node whose idle GPUs could no longer be fed with
//    CPU at the workload's CPU-per-GPU ratio counts those GPUs as lost too,
//    so CPU-heavy pods stop starving GPU-rich nodes of CPU.
// Like FGD, the score is trunc(100 * sigmoid(-delta / 1000)) and ties go to
// the node first in a fixed order, which packs work onto fewer nodes.
#pragma once

#include <functional>
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
};

class TesseraPolicy final : public PlacementPolicy {
 public:
  explicit TesseraPolicy(TesseraPolicyOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "tessera"; }
  void OnArrival(const PodRequest& pod) override;
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override;
  uint64_t epoch() const override { return epoch_; }
  TieBreak tie_break() const override { return TieBreak::kNodeOrder; }

  const TargetWorkload& workload() const { return workload_; }

  // Calls `fn(pick, score)` for every GPU choice Evaluate weighs on `node`,
  // in the order it weighs them (Evaluate keeps the first best), so policies
  // that build on tessera can adjust each choice's score.
  void ForEachPick(const PodRequest& pod, const NodeState& node,
                   const std::function<void(const GpuPick&, int64_t)>& fn);

 private:
  void Refresh();
  double FragNow(const NodeState& node);

  TesseraPolicyOptions options_;
  using Key = std::tuple<int64_t, int64_t, int, std::vector<std::string>>;
  std::map<Key, std::pair<int64_t, TaskClass>> seen_;
  int64_t arrivals_ = 0;
  int64_t gpu_cpu_seen_ = 0, gpu_milli_seen_ = 0;
  double cpu_per_gpu_ = 0;  // learned CPU milli wanted per 1000 GPU milli
  double Strand(int64_t cpu_left, int64_t idle_milli) const;
  int64_t next_refresh_ = 32;
  uint64_t epoch_ = 0;
  TargetWorkload workload_;
  std::unordered_map<const NodeState*, std::tuple<uint64_t, uint64_t, double>> now_cache_;
};

}  // namespace tessera::core
