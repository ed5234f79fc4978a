#include "core/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera::core {

TaskClass ClassOf(const PodRequest& pod) {
  TaskClass c;
  c.cpu_milli = pod.cpu_milli;
  for (const auto& ct : pod.containers) {
    if (ct.gpu_count > 0) {
      c.gpu_milli = ct.core_milli_per_gpu;
      c.num_gpu = ct.gpu_count;
      c.models = ct.models;
      break;
    }
  }
  return c;
}

TargetWorkload TypicalWorkload(const std::vector<PodRequest>& pods, double coverage) {
  using Key = std::tuple<int64_t, int64_t, int, std::vector<std::string>>;
  std::map<Key, std::pair<int64_t, TaskClass>> counts;
  for (const auto& p : pods) {
    TaskClass c = ClassOf(p);
    Key k{c.cpu_milli, c.gpu_milli, c.num_gpu, c.models.allowed};
    auto& slot = counts[k];
    if (slot.first++ == 0) slot.second = c;
  }
  std::vector<std::pair<Key, std::pair<int64_t, TaskClass>>> order(counts.begin(), counts.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    return a.first > b.first;  // equal popularity: larger key first
  });
  TargetWorkload w;
  const double need = coverage * static_cast<double>(pods.size());
  int64_t covered = 0;
  for (auto& [key, entry] : order) {
    if (static_cast<double>(covered) >= need) break;
    covered += entry.first;
    entry.second.weight = static_cast<double>(entry.first);
    w.classes.push_back(entry.second);
  }
  for (auto& c : w.classes) c.weight /= static_cast<double>(covered);
  return w;
}

FragBreakdown NodeFragBreakdown(const TargetWorkload& workload, const std::string& model,
                                int64_t cpu_left, std::span<const int64_t> gpu_left) {
  int64_t idle = 0;
  for (int64_t l : gpu_left) idle += l;
  FragBreakdown out;
  if (idle == 0) return out;
  for (const TaskClass& c : workload.classes) {
    // The model test compares strings: ask it only when the cheap tests pass.
    const bool allowed = c.num_gpu > 0 && c.gpu_milli > 0 && cpu_left >= c.cpu_milli && c.models.Allows(model);
    const ClassFit f = FitClass(c, allowed, cpu_left, gpu_left);
    if (f.fits) {
      out.fragmented += c.weight * static_cast<double>(f.small);
      out.satisfied += c.weight * static_cast<double>(idle - f.small);
    } else {
      out.fragmented += c.weight * static_cast<double>(idle);
    }
  }
  return out;
}

double NodeFragAmount(const TargetWorkload& workload, const std::string& model, int64_t cpu_left,
                      std::span<const int64_t> gpu_left) {
  return NodeFragBreakdown(workload, model, cpu_left, gpu_left).fragmented;
}

}  // namespace tessera::core
