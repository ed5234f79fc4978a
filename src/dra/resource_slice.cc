#include "dra/resource_slice.h"

#include <algorithm>
#include <set>

#include "core/dra_names.h"

namespace tessera::dra {

namespace {
constexpr std::string_view kResourceApi = "/apis/resource.k8s.io/v1";
constexpr size_t kDriverNameMax = 63;
constexpr size_t kSubdomainMax = 253;

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// API validation's floor for a capacity's value: its validRange min + step.
constexpr int64_t kLeastMemoryMiB = 2;   // min 1Mi + step 1Mi
constexpr int64_t kLeastComputePercent = 1;  // min 0 + step 1

nlohmann::json Capacity(const std::string& value, const std::string& fallback, const std::string& min,
                        const std::string& max, const std::string& step) {
  return {{"value", value}, {"requestPolicy", {{"default", fallback}, {"validRange", {{"min", min}, {"max", max}, {"step", step}}}}}};
}

// One GPU as a shareable device offering what device-plugin pods leave of it.
nlohmann::json DeviceFor(const core::GpuInfo& gpu, const std::map<int, core::GpuShare>& pod_held) {
  int64_t left_mib = gpu.memory_mib, left_percent = 100;
  if (auto held = pod_held.find(gpu.index); held != pod_held.end()) {
    left_mib -= std::max<int64_t>(held->second.mem_mib, 0);
    // Rounded down: a claim may not take a tenth of a point the pods hold.
    left_percent = (core::kCoreMilliPerGpu - std::max<int64_t>(held->second.core_milli, 0)) / 10;
  }
  const bool full = left_mib < kLeastMemoryMiB || left_percent < kLeastComputePercent;
  left_mib = std::max(left_mib, kLeastMemoryMiB);
  left_percent = std::max(left_percent, kLeastComputePercent);
  const std::string memory = std::to_string(left_mib) + "Mi", compute = std::to_string(left_percent);
  nlohmann::json device = {
      {"name", DeviceName(gpu.index)},
      {"allowMultipleAllocations", true},
      {"attributes",
       {{"model", {{"string", gpu.model}}},
        {"uuid", {{"string", gpu.uuid}}},
        {"index", {{"int", gpu.index}}},
        {"memoryMiB", {{"int", gpu.memory_mib}}},
        {"mps", {{"bool", gpu.mps}}}}},
      {"capacity",
       {{core::kMemoryCapacity, Capacity(memory, memory, "1Mi", memory, "1Mi")},
        {core::kComputeCapacity, Capacity(compute, "0", "0", compute, "1")}}},
  };
  if (full) device["taints"] = nlohmann::json::array({{{"key", kFullTaintKey}, {"effect", "NoSchedule"}}});
  return device;
}
}  // namespace

std::string ResourceSlicesPath() { return std::string(kResourceApi) + "/resourceslices"; }
std::string ResourceSlicePath(std::string_view name) { return ResourceSlicesPath() + "/" + std::string(name); }
std::string ResourceClaimPath(std::string_view ns, std::string_view name) {
  return std::string(kResourceApi) + "/namespaces/" + std::string(ns) + "/resourceclaims/" + std::string(name);
}

std::string DeviceName(int index) { return "gpu-" + std::to_string(index); }
std::string SliceName(std::string_view node, std::string_view driver) {
  return std::string(node) + "-" + std::string(driver);
}

Status CheckDnsSubdomain(std::string_view name, size_t max_length, std::string_view what) {
  const std::string quoted = std::string(what) + " \"" + std::string(name) + "\"";
  if (name.empty()) return InvalidArgument(std::string(what) + " is empty");
  if (name.size() > max_length)
    return InvalidArgument(quoted + " is longer than " + std::to_string(max_length) + " characters");
  size_t start = 0;
  while (start <= name.size()) {
    const size_t dot = name.find('.', start);
    const std::string_view label = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
    if (label.empty() || !IsAlnum(label.front()) || !IsAlnum(label.back()))
      return InvalidArgument(quoted + " is not a DNS subdomain: each dot-separated part must start and end with a "
                             "lower-case letter or digit");
    for (char c : label) {
      if (!IsAlnum(c) && c != '-')
        return InvalidArgument(quoted + " is not a DNS subdomain: only lower-case letters, digits, '-' and '.'");
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return Status::Ok();
}

Result<nlohmann::json> ResourceSliceFor(const std::string& node, const std::vector<core::GpuInfo>& gpus,
                                        const SliceOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckDnsSubdomain(options.driver, kDriverNameMax, "driver name"));
  TESSERA_RETURN_IF_ERROR(CheckDnsSubdomain(node, kSubdomainMax, "node name"));
  const std::string name = SliceName(node, options.driver);
  if (name.size() > kSubdomainMax)
    return InvalidArgument("ResourceSlice name \"" + name + "\" is longer than 253 characters; node name too long");
  nlohmann::json devices = nlohmann::json::array();
  std::set<int> seen;
  for (const core::GpuInfo& gpu : gpus) {
    if (gpu.index < 0) return InvalidArgument("GPU " + gpu.uuid + " has a negative index");
    if (!seen.insert(gpu.index).second)
      return InvalidArgument("GPU index " + std::to_string(gpu.index) + " appears twice in the inventory");
    if (gpu.memory_mib <= 0)
      return InvalidArgument("GPU " + std::to_string(gpu.index) + " (" + gpu.uuid +
                             ") reports no memory size, so it cannot offer memory to claims");
    if (!gpu.healthy) continue;
    devices.push_back(DeviceFor(gpu, options.pod_held));
  }
  nlohmann::json metadata = {{"name", name}};
  if (!options.node_uid.empty()) {
    metadata["ownerReferences"] = nlohmann::json::array(
        {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", options.node_uid}, {"controller", true}}});
  }
  return nlohmann::json{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata", metadata},
      {"spec",
       {{"driver", options.driver},
        {"nodeName", node},
        {"pool", {{"name", node}, {"generation", options.generation}, {"resourceSliceCount", 1}}},
        {"devices", devices}}},
  };
}

}  // namespace tessera::dra
