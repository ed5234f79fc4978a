// Simulated GPU nodes for tests, benchmarks and the demo: Node objects created
// directly in the API server (the KWOK way) with Tessera's inventory
// annotation, model labels and tessera.io/gpu slot capacity. Alone
// (tessera-dev create-nodes) nothing plays the node; NodeFarm
// (tests/kubelet_sim) puts a real tessera-node and a kubelet stand-in behind each.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/client.h"

namespace tessera::testing {

struct SimNode {
  core::NodeInfo info;   // name, CPU, memory, GPUs (uuid derived from name + index; max_sharers = slots_per_gpu)
  int slots_per_gpu = 8;
  int max_pods = 110;                         // allocatable pods (a kubelet's default)
  int64_t slots_allocatable = -1;             // allocatable slots; -1: all of them (as a registered agent's)
  std::map<std::string, std::string> labels;  // extra node labels
};

// Reads a nodes file:
//   slotsPerGpu: 8
//   nodes:
//   - {name: a100-0, cpu: "64", memory: 512Gi, count: 2, gpus: {model: A100, memMiB: 81920, sms: 108, count: 4}}
// `count` > 1 expands to name-0, name-1, ... INVALID_ARGUMENT naming the entry.
Result<std::vector<SimNode>> ParseSimNodes(const std::string& yaml_text, const std::string& source);
Result<std::vector<SimNode>> LoadSimNodesFile(const std::string& path);

// `count` identical nodes named prefix-0 .. prefix-(count-1).
std::vector<SimNode> UniformSimNodes(const std::string& prefix, int count, int gpus_per_node,
                                     const std::string& model, int64_t gpu_mem_mib, int slots_per_gpu = 8);

// A stable GPU uuid for a simulated GPU ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx").
std::string SimGpuUuid(const std::string& node, int index);

// The v1 Node object for `node`: labels tessera.io/gpu-model, tessera.io/gpu-memory-mib,
// tessera.io/simulated, the inventory annotation, and status with capacity,
// allocatable (cpu, memory, pods, tessera.io/gpu: slots_allocatable when set)
// and a Ready condition.
nlohmann::json NodeObject(const SimNode& node, const std::string& gpu_resource = "tessera.io/gpu");

// Creates the nodes (replacing ones of the same name) / deletes them. While
// this process runs it renews the created nodes' Leases, as their kubelet
// would (node_leases.h), so kube-controller-manager keeps them Ready.
Status CreateSimNodes(kube::Client& client, const std::vector<SimNode>& nodes);
Status DeleteSimNodes(kube::Client& client, const std::vector<SimNode>& nodes);

}  // namespace tessera::testing
