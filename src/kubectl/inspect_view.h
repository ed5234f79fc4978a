// The text and structured forms of `kubectl tessera inspect`: one row per
// GPU with node and cluster totals, the per-node detail of `inspect -d`
// (every container share on every GPU), and the JSON document behind
// -o json|yaml. Pure; thread-safe.
//
//   std::cout << RenderInventoryTable(inv, options);
//   std::cout << RenderNodeDetail(*inv.FindNode("a100-0"), options);
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kubectl/format.h"
#include "kubectl/inventory.h"

namespace tessera::kubectl {

// NODE GPU MODEL MEMORY MEM CORE PODS, one row per GPU (memory and compute
// held by device-plugin containers and DRA claims together); a total row after
// each node with more than one GPU and one for the cluster; with
// options.wide also UUID, NUMA, SLOTS (containers sharing the GPU / its
// limit; containers only) and HELD BY (claims as pod[claim:name]). Then one line each for
// pods waiting to be placed and nodes left out.
std::string RenderInventoryTable(const Inventory& inv, const ViewOptions& options);

// A node's summary, then a table of its GPUs, each followed by the
// container shares on it (namespace/pod[container], memory, core) and the
// DRA claims' (namespace/pod[claim:name]).
std::string RenderNodeDetail(const NodeView& node, const ViewOptions& options);

// The -o json|yaml document (schema in docs/kubectl-tessera.md). With
// `only_node`, just that node, and totals are that node's.
nlohmann::ordered_json InventoryToJson(const Inventory& inv, const NodeView* only_node = nullptr);

}  // namespace tessera::kubectl
