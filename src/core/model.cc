#include "core/model.h"

#include <algorithm>

namespace tessera::core {

bool ModelSelector::Allows(std::string_view model) const {
  auto has = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), model) != v.end();
  };
  if (has(avoided)) return false;
  return allowed.empty() || has(allowed);
}

int64_t PodRequest::TotalCoreMilli() const {
  int64_t total = 0;
  for (const auto& c : containers) total += c.gpu_count * c.core_milli_per_gpu;
  return total;
}

int PodRequest::TotalGpuCount() const {
  int total = 0;
  for (const auto& c : containers) total += c.gpu_count;
  return total;
}

int64_t ShareMemMiB(const ContainerRequest& container, const GpuInfo& gpu) {
  if (container.mem_mib_per_gpu == 0 && container.core_milli_per_gpu == kCoreMilliPerGpu) return gpu.memory_mib;
  return container.mem_mib_per_gpu;
}

Status ValidateRequest(const PodRequest& pod) {
  if (pod.cpu_milli < 0) return InvalidArgument(pod.key + ": cpu request is negative");
  if (pod.memory_mib < 0) return InvalidArgument(pod.key + ": memory request is negative");
  for (const auto& c : pod.containers) {
    const std::string where = pod.key + " container \"" + c.name + "\"";
    if (c.gpu_count < 0) return InvalidArgument(where + ": GPU count is negative");
    if (c.gpu_count > 64)
      return InvalidArgument(where + ": GPU count " + std::to_string(c.gpu_count) +
                             " is more than any node has (max 64)");
    if (c.mem_mib_per_gpu < 0) return InvalidArgument(where + ": GPU memory is negative");
    if (c.core_milli_per_gpu < 0) return InvalidArgument(where + ": GPU core share is negative");
    if (c.core_milli_per_gpu > kCoreMilliPerGpu)
      return InvalidArgument(where + ": GPU core share " +
                             std::to_string(c.core_milli_per_gpu / 10) +
                             " percent is over 100 percent; ask for more GPUs instead");
    if (c.gpu_count == 0 && (c.mem_mib_per_gpu > 0 || c.core_milli_per_gpu > 0))
      return InvalidArgument(where + ": asks for GPU memory or core but for 0 GPUs");
    if (c.gpu_count > 0 && c.mem_mib_per_gpu == 0 && c.core_milli_per_gpu == 0)
      return InvalidArgument(where + ": asks for GPUs but for neither memory nor core");
    if (c.gpu_count > 1 && c.core_milli_per_gpu != 0 && c.core_milli_per_gpu < kCoreMilliPerGpu)
      return InvalidArgument(where + ": a container spanning several GPUs must take whole "
                             "GPUs (core 100 percent); a fraction is only allowed on one GPU");
    if (pod.isolation == Isolation::kMps && c.gpu_count > 1)
      return InvalidArgument(where + ": tessera.io/isolation: mps gives a container one GPU (one MPS daemon "
                             "per GPU); ask for 1 GPU per container or use the default isolation");
    for (const auto& m : c.models.allowed)
      for (const auto& a : c.models.avoided)
        if (m == a)
          return InvalidArgument(where + ": GPU model \"" + m + "\" is both allowed and avoided");
  }
  return Status();
}

std::string_view IsolationName(Isolation isolation) {
  switch (isolation) {
    case Isolation::kHook: return "hook";
    case Isolation::kMps: return "mps";
    case Isolation::kNone: return "none";
  }
  return "unknown";
}

}  // namespace tessera::core
