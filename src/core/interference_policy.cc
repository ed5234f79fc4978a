#include "core/interference_policy.h"

#include <algorithm>
#include <cmath>

namespace tessera::core {

std::vector<int64_t> InterferencePolicy::PodBusy(const PodRequest& pod) const {
  std::vector<int64_t> busy;
  const std::vector<int64_t>* e = book_ != nullptr ? book_->Expected(pod.key) : nullptr;
  busy = e != nullptr ? *e : PredictBusy(pod, std::nullopt, options_.default_factor);
  // To the nearest step, so pods of one shape with near-equal predictions
  // share the placer's cached scores.
  for (int64_t& b : busy) b = (b + kBusyStep / 2) / kBusyStep * kBusyStep;
  return busy;
}

std::string InterferencePolicy::CacheKey(const PodRequest& pod) const {
  std::string key = "busy";
  for (int64_t b : PodBusy(pod)) key += "," + std::to_string(b);
  return key;
}

void InterferencePolicy::SeeCluster(const Ledger& ledger) {
  if (!(options_.fade_below_free > 0) || ledger.version() == seen_ledger_version_) return;
  seen_ledger_version_ = ledger.version();
  int64_t total = 0, used = 0;
  for (const NodeState& node : ledger.nodes()) {
    for (size_t i = 0; i < node.gpus.size() && i < node.info.gpus.size(); ++i) {
      if (!node.info.gpus[i].healthy) continue;
      total += kCoreMilliPerGpu;
      used += node.gpus[i].core_used_milli;
    }
  }
  const double free = total > 0 ? static_cast<double>(total - used) / static_cast<double>(total) : 0.0;
  const double kept = std::clamp(free / options_.fade_below_free, 0.0, 1.0);
  const int step = static_cast<int>(std::floor(kept * kFadeSteps + 1e-9));
  if (step != fade_step_) {
    fade_step_ = step;
    ++fade_changes_;  // every cached score is stale
  }
}

Candidate InterferencePolicy::Evaluate(const PodRequest& pod, const NodeState& node, Rng& /*rng*/) {
  const std::vector<int64_t> busy = PodBusy(pod);
  // Predicted busy milli per GPU of the node now.
  std::array<int64_t, 64> load{};
  const int ngpu = std::min<int>(static_cast<int>(node.gpus.size()), 64);
  const std::vector<int64_t>* booked = book_ ? book_->NodeBusy(node.info.name) : nullptr;
  for (int i = 0; i < ngpu; ++i) {
    if (book_ != nullptr) {
      load[i] = booked && static_cast<size_t>(i) < booked->size() ? (*booked)[i] : 0;
    } else {
      load[i] = std::llround(options_.default_factor * static_cast<double>(node.gpus[i].core_used_milli));
    }
  }
  const int64_t ceiling = std::llround(options_.ceiling * 1000.0);
  auto over = [&](int64_t v) { return std::max<int64_t>(0, v - ceiling); };

  Candidate best;
  double best_raw = 0;
  bool first = true;
  packing_.ForEachPick(pod, node, [&](const GpuPick& pick, int64_t score) {
    // Busy each picked GPU would gain (containers in pick order).
    int64_t added_over = 0;
    int k = 0;
    for (size_t c = 0; c < pod.containers.size(); ++c) {
      const int64_t b = c < busy.size() ? busy[c] : 0;
      for (int g = 0; g < pod.containers[c].gpu_count; ++g) {
        const int i = pick.index[k++];
        const int64_t now = i < ngpu ? load[i] : 0;
        added_over += over(now + b) - over(now) - over(b);
      }
    }
    const double weight = options_.weight * static_cast<double>(fade_step_) / kFadeSteps;
    const double raw = static_cast<double>(score) - weight * static_cast<double>(added_over) / 10.0;
    if (first || raw > best_raw) {  // lowest GPU index wins ties, as in tessera
      best_raw = raw;
      best.pick = pick;
      first = false;
    }
  });
  const double clamped = std::clamp(std::floor(best_raw), 0.0, static_cast<double>(kMaxNodeScore));
  best.score = static_cast<int64_t>(clamped);
  best.fine = best_raw < 0 ? best_raw : 0;
  return best;
}

}  // namespace tessera::core
