#include "kubectl/test_objects.h"

#include "core/codec.h"

namespace tessera::kubectl::testing {

nlohmann::json GpuNode(const std::string& name, int gpus, const std::string& model, int64_t mem_mib) {
  std::vector<core::GpuInfo> inv;
  for (int i = 0; i < gpus; ++i) {
    inv.push_back({.index = i, .uuid = "GPU-" + name + "-" + std::to_string(i), .model = model, .memory_mib = mem_mib,
                   .sm_count = 108, .numa_node = i % 2, .healthy = true, .max_sharers = 8});
  }
  return {{"metadata",
           {{"name", name},
            {"labels", {{"tessera.io/gpu-model", model}}},
            {"annotations", {{"tessera.io/gpu-inventory", core::EncodeInventory(inv).value()}}}}},
          // The slots a registered node agent gives the kubelet: all it lists.
          {"status",
           {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}, {"tessera.io/gpu", std::to_string(gpus * 8)}}}}}};
}

nlohmann::json AssignedPod(const std::string& ns, const std::string& name, const core::Assignment& assignment,
                           const std::string& phase, const std::string& assigned_at) {
  nlohmann::json containers = nlohmann::json::array();
  for (const auto& c : assignment.containers) {
    nlohmann::json limits = {{"tessera.io/gpu", std::to_string(c.gpus.size())}};
    if (!c.gpus.empty()) {
      limits["tessera.io/gpu-mem"] = std::to_string(c.gpus[0].mem_mib);
      limits["tessera.io/gpu-core"] = std::to_string(c.gpus[0].core_milli / 10);
    }
    containers.push_back({{"name", c.name},
                          {"image", "x"},
                          {"resources", {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}, {"limits", limits}}}});
  }
  nlohmann::json pod = {{"metadata", {{"namespace", ns}, {"name", name}, {"annotations", nlohmann::json::object()}}},
                        {"spec", {{"containers", containers}}},
                        {"status", {{"phase", phase}}}};
  if (!assignment.node.empty()) {
    pod["spec"]["nodeName"] = assignment.node;
    pod["metadata"]["annotations"]["tessera.io/assignment"] = core::EncodeAssignment(assignment).value();
  }
  if (!assigned_at.empty()) pod["metadata"]["annotations"]["tessera.io/assigned-at"] = assigned_at;
  return pod;
}

core::Assignment OnNode(const std::string& node, const std::string& container,
                        const std::vector<core::GpuShare>& shares) {
  core::Assignment a{.node = node, .containers = {{.name = container, .gpus = shares}}};
  for (auto& g : a.containers[0].gpus) g.uuid = "GPU-" + node + "-" + std::to_string(g.index);
  return a;
}

nlohmann::json AllocatedClaim(const std::string& ns, const std::string& name, const std::vector<ClaimResult>& results,
                              const std::string& pod) {
  nlohmann::json list = nlohmann::json::array();
  for (const ClaimResult& r : results) {
    nlohmann::json consumed = nlohmann::json::object();
    if (!r.memory.empty()) consumed["memory"] = r.memory;
    if (!r.compute.empty()) consumed["compute"] = r.compute;
    list.push_back({{"request", "gpu"},
                    {"driver", "gpu.tessera.io"},
                    {"pool", r.node},
                    {"device", "gpu-" + std::to_string(r.index)},
                    {"consumedCapacity", consumed}});
  }
  nlohmann::json claim = {{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceClaim"},
                          {"metadata", {{"namespace", ns}, {"name", name}, {"uid", name + "-uid"}}},
                          {"status", {{"allocation", {{"devices", {{"results", list}}}}}}}};
  if (!pod.empty()) claim["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", pod}, {"uid", pod + "-uid"}}};
  return claim;
}

}  // namespace tessera::kubectl::testing
