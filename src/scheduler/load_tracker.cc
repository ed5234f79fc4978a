#include "scheduler/load_tracker.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/codec.h"

namespace tessera::scheduler {
namespace {

using Json = nlohmann::json;

std::string StringIn(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Whether the launch gate measures the GPU time of container `name`.
bool Measurable(const core::PodRequest& request, const std::string& name) {
  if (request.isolation != core::Isolation::kHook) return false;
  for (const core::ContainerRequest& c : request.containers)
    if (c.name == name) return c.core_milli_per_gpu > 0 && c.core_milli_per_gpu < core::kCoreMilliPerGpu;
  return false;
}

}  // namespace

std::string WorkloadOf(const Json& pod) {
  const auto meta_it = pod.is_object() ? pod.find("metadata") : pod.end();
  if (!pod.is_object() || meta_it == pod.end() || !meta_it->is_object()) return {};
  const Json& meta = *meta_it;
  const std::string name = StringIn(meta, "name");
  if (name.empty()) return {};
  std::string ns = StringIn(meta, "namespace");
  if (ns.empty()) ns = "default";
  std::string label, pod_template_hash;
  if (auto labels = meta.find("labels"); labels != meta.end()) {
    label = StringIn(*labels, core::kWorkloadLabel);
    pod_template_hash = StringIn(*labels, "pod-template-hash");
  }
  // The controlling owner (the first owner when none is marked controller).
  std::string kind, owner;
  if (auto refs = meta.find("ownerReferences"); refs != meta.end() && refs->is_array()) {
    for (const Json& ref : *refs) {
      const bool controller = ref.is_object() && ref.value("controller", false);
      if (kind.empty() || controller) {
        kind = StringIn(ref, "kind");
        owner = StringIn(ref, "name");
      }
      if (controller) break;
    }
  }
  // A Deployment's ReplicaSet is named DEPLOYMENT-HASH, the hash also in the
  // pod's pod-template-hash label; every rollout makes a new ReplicaSet, but
  // the workload is the same.
  if (kind == "ReplicaSet" && !pod_template_hash.empty() && owner.size() > pod_template_hash.size() + 1 &&
      owner.ends_with("-" + pod_template_hash)) {
    kind = "Deployment";
    owner.resize(owner.size() - pod_template_hash.size() - 1);
  }
  std::string key = core::WorkloadKey(ns, label, kind, owner);
  return key.empty() ? "Pod/" + ns + "/" + name : key;
}

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
