// tessera-interference: tessera's packing (fragmentation gradient with the
// CPU-stranding term, tessera_policy.h) that also keeps each GPU's predicted
// busy fraction under a ceiling where it can.
//
// Each GPU's predicted load is the sum of the predicted busy fractions of the
// shares on it (load.h): from a GpuLoadBook when the caller keeps one, else
// default_factor x the core milli the ledger has allocated there. For every
// GPU choice tessera weighs, the policy subtracts a penalty for the load it
// would push over the ceiling beyond what the pod alone would (a pod busier
// than the ceiling on its own is over it anywhere, so that part is not held
// against any GPU):
//   over(g)  = max(0, load_g + busy - ceiling) - max(0, load_g - ceiling)
//   penalty  = weight x 100 x sum over the pick's GPUs of (over(g) - max(0, busy - ceiling))
//   score    = clamp(tessera_score - penalty, 0, 100)
// (busy: the pending pod's prediction rounded to 25 milli; load_g from the
// book as booked.)
// A node whose every fitting GPU is over the ceiling still fits: it only
// ranks below nodes with room under it; among nodes all clamped to 0 the
// smaller penalty wins (Candidate::fine). With weight 0 it is tessera.
// With fade_below_free F > 0, the penalty is scaled by min(1, free / F)
// (free: the cluster's free fraction of GPU compute, in steps of 5 %), so
// as the cluster fills up the policy packs more and more like tessera.
#pragma once

#include <string>

#include "core/load.h"
#include "core/tessera_policy.h"

namespace tessera::core {

class InterferencePolicy final : public PlacementPolicy {
 public:
  // The pending pod's predicted busy milli is rounded to this step (2.5 % of
  // a GPU) before scoring, which bounds the placer's score cache.
  static constexpr int64_t kBusyStep = 25;

  // `book` may be null (loads then come from the ledger's core allocation x
  // default_factor); when set it must outlive the policy.
  explicit InterferencePolicy(InterferenceOptions options = {}, const GpuLoadBook* book = nullptr)
      : options_(options), book_(book) {}
  std::string_view name() const override { return "tessera-interference"; }
  void OnArrival(const PodRequest& pod) override { packing_.OnArrival(pod); }
  // Reads the cluster's free GPU compute for fade_below_free (when the
  // ledger changed since the last call).
  void SeeCluster(const Ledger& ledger) override;
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override;
  uint64_t epoch() const override { return packing_.epoch() + fade_changes_; }
  TieBreak tie_break() const override { return TieBreak::kNodeOrder; }
  std::string CacheKey(const PodRequest& pod) const override;

  const InterferenceOptions& options() const { return options_; }

 private:
  std::vector<int64_t> PodBusy(const PodRequest& pod) const;

  InterferenceOptions options_;
  const GpuLoadBook* book_;
  TesseraPolicy packing_{TesseraPolicyOptions::V1()};  // its measured knobs build on tessera-v1
  // The penalty's share kept, in steps of 1/kFadeSteps (kFadeSteps: all).
  static constexpr int kFadeSteps = 20;
  int fade_step_ = kFadeSteps;
  uint64_t fade_changes_ = 0;
  uint64_t seen_ledger_version_ = 0;
};

}  // namespace tessera::core
