#include "tests/support/sim_nodes.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/codec.h"
#include "core/quantity.h"
#include "tests/support/node_leases.h"

namespace tessera::testing {
namespace {

uint64_t Fnv1a(const std::string& text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Result<SimNode> ParseEntry(const YAML::Node& entry, int slots, const std::string& where) {
  SimNode node;
  node.slots_per_gpu = slots;
  try {
    if (!entry.IsMap()) return InvalidArgument(where + ": expected a mapping");
    node.info.name = entry["name"].as<std::string>("");
    if (node.info.name.empty()) return InvalidArgument(where + ": name is required");
    auto cpu = core::ParseCpuMilli(entry["cpu"].as<std::string>("32"));
    if (!cpu.ok()) return cpu.status().WithContext(where + ": cpu");
    node.info.cpu_milli = cpu.value();
    auto memory = core::ParseMemoryMiB(entry["memory"].as<std::string>("256Gi"));
    if (!memory.ok()) return memory.status().WithContext(where + ": memory");
    node.info.memory_mib = memory.value();
    const YAML::Node gpus = entry["gpus"];
    if (!gpus || !gpus.IsMap()) return InvalidArgument(where + ": gpus: expected {model, memMiB, count}");
    const std::string model = gpus["model"].as<std::string>("");
    const int64_t mem = gpus["memMiB"].as<int64_t>(0);
    const int count = gpus["count"].as<int>(0);
    const int sms = gpus["sms"].as<int>(0);
    if (model.empty() || mem <= 0 || count <= 0 || count > core::kMaxGpuIndex + 1) {
      return InvalidArgument(where + ": gpus needs a model, memMiB > 0 and count in 1..64");
    }
    for (int i = 0; i < count; ++i) {
      node.info.gpus.push_back(core::GpuInfo{.index = i, .uuid = "", .model = model, .memory_mib = mem,
                                             .sm_count = sms, .numa_node = i * 2 / count, .healthy = true,
                                             .max_sharers = slots});
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(where + ": " + e.what());
  }
  return node;
}

}  // namespace

std::string SimGpuUuid(const std::string& node, int index) {
  const std::string key = node + "#" + std::to_string(index);
  const uint64_t a = Fnv1a(key, 0), b = Fnv1a(key, 0x9e3779b97f4a7c15ull);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

Result<std::vector<SimNode>> ParseSimNodes(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap() || !root["nodes"] || !root["nodes"].IsSequence()) {
    return InvalidArgument(source + ": expected a mapping with a 'nodes' list");
  }
  int slots = 8;
  try {
    slots = root["slotsPerGpu"].as<int>(8);
  } catch (const YAML::Exception&) {
    return InvalidArgument(source + ": slotsPerGpu: not an integer");
  }
  if (slots < 1 || slots > 64) return InvalidArgument(source + ": slotsPerGpu must be in 1..64");
  std::vector<SimNode> out;
  int i = 0;
  for (const auto& entry : root["nodes"]) {
    const std::string where = source + ": nodes[" + std::to_string(i++) + "]";
    TESSERA_ASSIGN_OR_RETURN(SimNode node, ParseEntry(entry, slots, where));
    int copies = 1;
    try {
      copies = entry["count"].as<int>(1);
    } catch (const YAML::Exception&) {
      return InvalidArgument(where + ": count: not an integer");
    }
    if (copies < 1) return InvalidArgument(where + ": count must be at least 1");
    for (int c = 0; c < copies; ++c) {
      SimNode copy = node;
      if (copies > 1) copy.info.name += "-" + std::to_string(c);
      for (auto& gpu : copy.info.gpus) gpu.uuid = SimGpuUuid(copy.info.name, gpu.index);
      out.push_back(std::move(copy));
    }
  }
  return out;
}

Result<std::vector<SimNode>> LoadSimNodesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read nodes file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseSimNodes(text.str(), path);
}

std::vector<SimNode> UniformSimNodes(const std::string& prefix, int count, int gpus_per_node,
                                     const std::string& model, int64_t gpu_mem_mib, int slots_per_gpu) {
  std::vector<SimNode> out;
  for (int n = 0; n < count; ++n) {
    SimNode node;
    node.slots_per_gpu = slots_per_gpu;
    node.info.name = prefix + "-" + std::to_string(n);
    node.info.cpu_milli = 96000;
    node.info.memory_mib = 768 * 1024;
    for (int i = 0; i < gpus_per_node; ++i) {
      node.info.gpus.push_back(core::GpuInfo{.index = i, .uuid = SimGpuUuid(node.info.name, i), .model = model,
                                             .memory_mib = gpu_mem_mib, .sm_count = 0,
                                             .numa_node = i * 2 / gpus_per_node, .healthy = true,
                                             .max_sharers = slots_per_gpu});
    }
    out.push_back(std::move(node));
  }
  return out;
}

nlohmann::json NodeObject(const SimNode& node, const std::string& gpu_resource) {
  const auto inventory = core::EncodeInventory(node.info.gpus);
  std::string model = node.info.gpus.empty() ? "" : node.info.gpus.front().model;
  const int64_t gpu_mem = node.info.gpus.empty() ? 0 : node.info.gpus.front().memory_mib;
  const std::string slots = std::to_string(node.info.gpus.size() * node.slots_per_gpu);
  nlohmann::json resources = {{"cpu", std::to_string(node.info.cpu_milli) + "m"},
                              {"memory", std::to_string(node.info.memory_mib) + "Mi"},
                              {"pods", std::to_string(node.max_pods)},
                              {gpu_resource, slots}};
  nlohmann::json allocatable = resources;
  if (node.slots_allocatable >= 0) allocatable[gpu_resource] = std::to_string(node.slots_allocatable);
  nlohmann::json object = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", node.info.name},
        {"labels",
         {{"kubernetes.io/hostname", node.info.name},
          {"tessera.io/gpu-model", model},
          {"tessera.io/gpu-memory-mib", std::to_string(gpu_mem)},
          {"tessera.io/simulated", "true"}}},
        {"annotations",
         {{std::string(core::kInventoryAnnotation), inventory.ok() ? inventory.value() : ""},
          {"node.alpha.kubernetes.io/ttl", "0"}}}}},
      {"spec", {{"unschedulable", false}}},
      {"status",
       {{"capacity", resources},
        {"allocatable", allocatable},
        {"conditions",
         {{{"type", "Ready"}, {"status", "True"}, {"reason", "SimulatedNodeReady"},
           {"message", "simulated GPU node (no kubelet)"}}}},
        {"nodeInfo", {{"kubeletVersion", "simulated"}, {"architecture", "amd64"}, {"operatingSystem", "linux"}}}}},
  };
  for (const auto& [key, value] : node.labels) object["metadata"]["labels"][key] = value;
  return object;
}

Status CreateSimNodes(kube::Client& client, const std::vector<SimNode>& nodes) {
  for (const auto& node : nodes) {
    const std::string path = "/api/v1/nodes/" + node.info.name;
    if (client.Get(path).ok()) TESSERA_RETURN_IF_ERROR(client.Delete(path, 0));
    TESSERA_RETURN_IF_ERROR(client.Create("/api/v1/nodes", NodeObject(node)).status());
    // The TaintNodesByCondition admission plugin marks every new node
    // not-ready; kube-controller-manager's node lifecycle controller lifts it
    // once it sees the node Ready, up to --node-monitor-period (5 s) later.
    // Lift it now, so the node takes pods at once (and where no
    // controller-manager runs).
    TESSERA_RETURN_IF_ERROR(client.Patch(path, kube::PatchType::kMerge, {{"spec", {{"taints", nullptr}}}}).status());
    TESSERA_RETURN_IF_ERROR(KeepNodeAlive(client, node.info.name));
  }
  return Status::Ok();
}

Status DeleteSimNodes(kube::Client& client, const std::vector<SimNode>& nodes) {
  for (const auto& node : nodes) {
    ForgetNode(node.info.name);
    Status s = client.Delete("/api/v1/nodes/" + node.info.name);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  }
  return Status::Ok();
}

}  // namespace tessera::testing
