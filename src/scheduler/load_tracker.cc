#include "scheduler/load_tracker.h"

#include <chrono>

#include "core/codec.h"

namespace tessera::scheduler {
namespace {

// Whether the launch gate measures the GPU time of container `name`.
bool Measurable(const core::PodRequest& request, const std::string& name) {
  if (request.isolation != core::Isolation::kHook) return false;
  for (const core::ContainerRequest& c : request.containers)
    if (c.name == name) return c.core_milli_per_gpu > 0 && c.core_milli_per_gpu < core::kCoreMilliPerGpu;
  return false;
}

}  // namespace

LoadTracker::LoadTracker(LoadTrackerOptions options) : options_(options), history_(options.history) {}

std::vector<int64_t> LoadTracker::Predict(const PodLoad& pod, int64_t now_s) const {
  const std::optional<double> measured = options_.learn ? history_.Predict(pod.workload, now_s) : std::nullopt;
  return core::PredictBusy(pod.request, measured, options_.default_factor);
}

void LoadTracker::Pending(const std::string& pod_key, const std::string& workload, const core::PodRequest& request,
                          int64_t now_s) {
  PodLoad& pod = pods_[pod_key];
  if (pod.placed) return;  // booked already (assumed at bind)
  if (!workload.empty()) pod.workload = workload;
  if (pod.workload.empty()) pod.workload = "Pod/" + pod_key;
  pod.request = request;
  book_.Expect(pod_key, Predict(pod, now_s));
}

void LoadTracker::Placed(const std::string& pod_key, const std::string& workload, const core::PodRequest& request,
                         const core::Assignment& assignment, int64_t now_s) {
  PodLoad& pod = pods_[pod_key];
  if (!workload.empty()) pod.workload = workload;
  if (pod.workload.empty()) pod.workload = "Pod/" + pod_key;
  pod.request = request;
  pod.assignment = assignment;
  pod.placed = true;
  book_.Expect(pod_key, Predict(pod, now_s));
  book_.Place(request, assignment);
}

void LoadTracker::Released(const std::string& pod_key) {
  book_.Release(pod_key);
  pods_.erase(pod_key);
}

Result<bool> LoadTracker::Measured(const std::string& pod_key, const std::string& workload,
                                   const std::string& usage_text, const Result<core::PodUsage>& usage,
                                   int64_t now_s) {
  auto it = pods_.find(pod_key);
  if (it == pods_.end() || !options_.learn) return false;
  PodLoad& pod = it->second;
  if (!workload.empty()) pod.workload = workload;
  if (usage_text.empty() || usage_text == pod.usage_text) return false;
  pod.usage_text = usage_text;
  if (!usage.ok()) return usage.status();
  // Only GPU time the launch gate measured counts: it measures where it
  // gates, a share of 1-99 % under the interception library. Elsewhere
  // (memory-only or whole-GPU shares, MPS, no isolation) the report's 0 means
  // "not measured", not idle.
  double sum = 0;
  int shares = 0;
  for (const core::ContainerUsage& c : usage->containers) {
    if (!Measurable(pod.request, c.name)) continue;
    for (const core::GpuUse& g : c.gpus) {
      sum += g.utilization;
      ++shares;
    }
  }
  if (shares == 0) return false;
  const int64_t at_s = std::chrono::duration_cast<std::chrono::seconds>(usage->at.time_since_epoch()).count();
  history_.Observe(pod.workload, sum / shares, at_s);
  ++samples_;
  if (!pod.placed) return false;
  const std::vector<int64_t> next = Predict(pod, now_s);
  const std::vector<int64_t>* before = book_.Expected(pod_key);
  if (before != nullptr && *before == next) return false;
  book_.Expect(pod_key, next);
  book_.Place(pod.request, pod.assignment);
  return true;
}

}  // namespace tessera::scheduler
