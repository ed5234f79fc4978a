// Expected GPU load: how busy each GPU is predicted to be from the shares
// placed on it, and the per-workload utilization history the predictions come
// from. Pure values; no I/O, no clock (callers pass times in).
//
// A share's *busy fraction* is the share of one GPU's time its kernels are
// expected to run, in milli (0..1000), as the node agent measures it
// (pod_usage.h, GpuUse::utilization x 1000). It is at most the share's core
// request under the default isolation, which throttles a container to its
// share. Predictions come from a WorkloadHistory when the pod's workload has
// been measured, else from the request times a default factor.
//
//   WorkloadHistory history;
//   history.Observe("Deployment/ns/web", 0.42, now_s);
//   std::vector<int64_t> busy = PredictBusy(pod, history.Predict(key, now_s), /*default_factor=*/1.0);
//   book.Expect(pod.key, busy);              // before placer.Place
//   book.Place(pod, assignment);             // after ledger.Assume
//   book.Release(pod.key);                   // after ledger.Forget
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model.h"

namespace tessera::core {

// The key a workload's history is kept under: the tessera.io/workload label
// when set ("label/NAMESPACE/VALUE"), else the pod's controlling owner
// ("KIND/NAMESPACE/NAME", e.g. "Deployment/ml/web"; callers resolve a
// ReplicaSet to its Deployment and a Pod of a Job to the Job), else "" (no
// history: the pod is predicted from its request).
std::string WorkloadKey(std::string_view ns, std::string_view label, std::string_view owner_kind,
                        std::string_view owner_name);

struct WorkloadHistoryOptions {
  // Weight of the newest observation in the moving averages (EWMA).
  double alpha = 0.3;
  // Prediction = mean + spread_weight x mean absolute deviation, so a
  // workload that swings is predicted nearer its peaks.
  double spread_weight = 1.0;
  // A workload not observed for this long is forgotten (Predict: none).
  int64_t max_age_s = 7 * 24 * 3600;
  // Most workloads kept; the least recently observed is dropped beyond it.
  size_t max_keys = 10000;
};

// A short history of measured GPU utilization per workload: an exponentially
// weighted mean and mean absolute deviation of the busy fraction of one GPU
// share (0..1), with the time of the last observation.
class WorkloadHistory {
 public:
  explicit WorkloadHistory(WorkloadHistoryOptions options = {}) : options_(options) {}

  // Records one measurement of a share of the workload: `utilization` is the
  // share of one GPU's time it was busy (clamped to 0..1; NaN is ignored),
  // `at_s` when (seconds on any clock the caller keeps monotonic). An empty
  // key is ignored.
  void Observe(std::string_view key, double utilization, int64_t at_s);

  // The predicted busy fraction (0..1) of one share of the workload at
  // `now_s`; none when the key is empty, unknown or older than max_age_s.
  std::optional<double> Predict(std::string_view key, int64_t now_s) const;

  size_t size() const { return entries_.size(); }
  const WorkloadHistoryOptions& options() const { return options_; }

 private:
  struct Entry {
    double mean = 0;
    double deviation = 0;
    int64_t samples = 0;
    int64_t last_s = 0;
  };
  WorkloadHistoryOptions options_;
  std::map<std::string, Entry, std::less<>> entries_;
};

// The predicted busy milli of each GPU share of `pod`, one value per
// container (0 for containers without GPUs): min(measured, request) when the
// workload's history gives `measured`, else default_factor x request. A
// share asked with core 0 (memory only, no compute cap) counts as 1000.
// Results are clamped to 0..1000.
std::vector<int64_t> PredictBusy(const PodRequest& pod, std::optional<double> measured,
                                 double default_factor);

// The predicted busy milli on every GPU from the pods placed on them, kept
// beside the Ledger by its caller (the ledger itself books requests only).
// A pod's prediction is set with Expect before it is placed (the placement
// policy reads it), booked with Place and dropped with Release.
// Thread-safety: none, as the Ledger.
class GpuLoadBook {
 public:
  // Sets the prediction for a pod about to be placed (per container, as
  // PredictBusy returns). Replaces an earlier one.
  void Expect(std::string_view pod_key, std::vector<int64_t> busy_per_container);
  // The prediction set for the pod; nullptr when none.
  const std::vector<int64_t>* Expected(std::string_view pod_key) const;

  // Books the pod's predicted busy on the GPUs of `assignment` (a pod without
  // an Expect is booked at its full request). Placing a pod twice replaces
  // its earlier booking.
  void Place(const PodRequest& pod, const Assignment& assignment);
  // Drops the pod's booking and prediction; unknown pods are ignored.
  void Release(std::string_view pod_key);

  // Predicted busy milli on GPU `gpu` of `node` (may exceed 1000 when
  // predictions do); 0 when nothing is booked there.
  int64_t GpuBusy(std::string_view node, int gpu) const;
  // All of a node's GPUs at once (index -> busy milli; may be shorter than the
  // node's GPU list); nullptr when nothing was ever booked there.
  const std::vector<int64_t>* NodeBusy(std::string_view node) const;

 private:
  void Unbook(const std::string& key);

  struct Booked {
    std::string node;
    std::vector<std::pair<int, int64_t>> gpus;  // (index, busy milli)
  };
  std::unordered_map<std::string, std::vector<int64_t>> expected_;
  std::unordered_map<std::string, Booked> booked_;
  std::unordered_map<std::string, std::vector<int64_t>> node_busy_;  // node -> per GPU
};

// The knobs of the tessera-interference placement policy
// (interference_policy.h); here so PolicyConfig can carry them.
struct InterferenceOptions {
  // Predicted combined busy fraction a GPU should stay under.
  double ceiling = 0.70;
  // Predicted busy fraction of a share without history, as a fraction of
  // its core request (1.0: a share is as busy as its request lets it be).
  double default_factor = 1.0;
  // Score points per percentage point of GPU load pushed over the ceiling.
  double weight = 1.0;
  // Below this fraction of the cluster's GPU compute free, the penalty
  // fades linearly to none at 0 free, so a cluster running full packs as
  // tessera does (0: never fades).
  double fade_below_free = 0.0;
};

}  // namespace tessera::core
