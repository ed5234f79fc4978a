#include "core/load.h"

#include <algorithm>
#include <cmath>

namespace tessera::core {

std::string WorkloadKey(std::string_view ns, std::string_view label, std::string_view owner_kind,
                        std::string_view owner_name) {
  if (!label.empty()) return "label/" + std::string(ns) + "/" + std::string(label);
  if (!owner_kind.empty() && !owner_name.empty())
    return std::string(owner_kind) + "/" + std::string(ns) + "/" + std::string(owner_name);
  return "";
}

void WorkloadHistory::Observe(std::string_view key, double utilization, int64_t at_s) {
  if (key.empty() || std::isnan(utilization)) return;
  const double u = std::clamp(utilization, 0.0, 1.0);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= options_.max_keys && options_.max_keys > 0) {
      auto oldest = entries_.begin();
      for (auto e = entries_.begin(); e != entries_.end(); ++e)
        if (e->second.last_s < oldest->second.last_s) oldest = e;
      entries_.erase(oldest);
    }
    Entry e;
    e.mean = u;
    e.samples = 1;
    e.last_s = at_s;
    entries_.emplace(std::string(key), e);
    return;
  }
  Entry& e = it->second;
  const double a = std::clamp(options_.alpha, 0.0, 1.0);
  e.deviation = (1 - a) * e.deviation + a * std::abs(u - e.mean);
  e.mean = (1 - a) * e.mean + a * u;
  ++e.samples;
  e.last_s = std::max(e.last_s, at_s);
}

std::optional<double> WorkloadHistory::Predict(std::string_view key, int64_t now_s) const {
  if (key.empty()) return std::nullopt;
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (options_.max_age_s > 0 && now_s - it->second.last_s > options_.max_age_s) return std::nullopt;
  return std::clamp(it->second.mean + options_.spread_weight * it->second.deviation, 0.0, 1.0);
}

std::vector<int64_t> PredictBusy(const PodRequest& pod, std::optional<double> measured,
                                 double default_factor) {
  std::vector<int64_t> out;
  out.reserve(pod.containers.size());
  for (const auto& c : pod.containers) {
    if (c.gpu_count == 0) {
      out.push_back(0);
      continue;
    }
    const int64_t request = c.core_milli_per_gpu > 0 ? c.core_milli_per_gpu : kCoreMilliPerGpu;
    double busy = measured ? std::min(*measured * 1000.0, static_cast<double>(request))
                           : default_factor * static_cast<double>(request);
    out.push_back(std::clamp<int64_t>(std::llround(busy), 0, kCoreMilliPerGpu));
  }
  return out;
}

void GpuLoadBook::Expect(std::string_view pod_key, std::vector<int64_t> busy_per_container) {
  expected_[std::string(pod_key)] = std::move(busy_per_container);
}

const std::vector<int64_t>* GpuLoadBook::Expected(std::string_view pod_key) const {
  auto it = expected_.find(std::string(pod_key));
  return it == expected_.end() ? nullptr : &it->second;
}

void GpuLoadBook::Place(const PodRequest& pod, const Assignment& assignment) {
  Unbook(pod.key);
  const std::vector<int64_t>* expected = Expected(pod.key);
  const std::vector<int64_t> fallback = expected ? std::vector<int64_t>{} : PredictBusy(pod, std::nullopt, 1.0);
  const std::vector<int64_t>& busy = expected ? *expected : fallback;
  Booked b;
  b.node = assignment.node;
  std::vector<int64_t>& per_gpu = node_busy_[assignment.node];
  for (size_t c = 0; c < assignment.containers.size(); ++c) {
    const int64_t v = c < busy.size() ? busy[c] : 0;
    for (const GpuShare& s : assignment.containers[c].gpus) {
      if (s.index < 0) continue;
      if (static_cast<size_t>(s.index) >= per_gpu.size()) per_gpu.resize(s.index + 1, 0);
      per_gpu[s.index] += v;
      b.gpus.push_back({s.index, v});
    }
  }
  booked_[pod.key] = std::move(b);
}

void GpuLoadBook::Unbook(const std::string& key) {
  auto it = booked_.find(key);
  if (it == booked_.end()) return;
  std::vector<int64_t>& per_gpu = node_busy_[it->second.node];
  for (const auto& [index, v] : it->second.gpus) per_gpu[index] -= v;
  booked_.erase(it);
}

void GpuLoadBook::Release(std::string_view pod_key) {
  const std::string key(pod_key);
  Unbook(key);
  expected_.erase(key);
}

int64_t GpuLoadBook::GpuBusy(std::string_view node, int gpu) const {
  const std::vector<int64_t>* v = NodeBusy(node);
  return v && gpu >= 0 && static_cast<size_t>(gpu) < v->size() ? (*v)[gpu] : 0;
}

const std::vector<int64_t>* GpuLoadBook::NodeBusy(std::string_view node) const {
  auto it = node_busy_.find(std::string(node));
  return it == node_busy_.end() ? nullptr : &it->second;
}

}  // namespace tessera::core
