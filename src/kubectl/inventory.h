// The allocation view kubectl-tessera prints: per node and GPU what is held
// and by which containers, built from Node and Pod objects with core::Ledger
// and the same pod rules as tessera-scheduler's ClusterState (a bound,
// non-terminal pod with a tessera.io/assignment holds its share until it is
// deleted), so the two agree by construction. Pure; thread-safe.
//
//   Inventory inv = BuildInventory(nodes["items"], pods["items"]);
//   for (const NodeView& n : inv.nodes) ...
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/ledger.h"
#include "core/model.h"
#include "core/podspec.h"

namespace tessera::kubectl {

// One container's share of one GPU.
struct ShareView {
  std::string ns, pod, container;
  int64_t mem_mib = 0;
  int64_t core_milli = 0;
  std::string Holder() const { return ns + "/" + pod + "[" + container + "]"; }
  bool operator==(const ShareView&) const = default;
};

struct GpuView {
  core::GpuInfo info;
  core::GpuUsage used;             // exactly what the ledger holds
  std::vector<ShareView> shares;   // sorted by namespace, pod, container
  int pods = 0;                    // distinct pods among the shares
};

// Sums over some GPUs (a node's, or the cluster's).
struct Totals {
  int gpus = 0;
  int64_t mem_total_mib = 0, mem_used_mib = 0;
  int64_t core_total_milli = 0, core_used_milli = 0;
  int pods = 0;                    // distinct pods holding a share
  void Add(const GpuView& gpu);
  bool operator==(const Totals&) const = default;
};

struct NodeView {
  std::string name;
  std::string model_label;         // the node's tessera.io/gpu-model label; "" when absent
  int64_t cpu_milli = 0, cpu_used_milli = 0;
  int64_t memory_mib = 0, memory_used_mib = 0;
  std::vector<GpuView> gpus;       // by index
  Totals totals;
  // The model to show for the node: its label, else its GPUs' models joined with ",".
  std::string Model() const;
};

// An object whose annotations could not be used; the rest is still shown.
struct Problem {
  std::string object;   // "node a100-0", "pod default/x"
  std::string message;
  bool operator==(const Problem&) const = default;
};

struct Inventory {
  std::vector<NodeView> nodes;     // GPU nodes by name
  Totals totals;                   // the cluster's
  int other_nodes = 0;             // nodes without a tessera.io/gpu-inventory annotation
  std::vector<Problem> problems;   // sorted by object
  std::vector<std::string> pending;  // "ns/name" of unbound GPU pods, sorted

  const NodeView* FindNode(std::string_view name) const;
};

// The node label naming a node's GPU model.
inline constexpr std::string_view kModelLabel = "tessera.io/gpu-model";

// `nodes` and `pods`: the "items" of a Node list and of a Pod list of every
// namespace. Pods are booked oldest first (tessera.io/assigned-at, then
// creation time, then name), so when two pods claim the same room the one
// the scheduler saw first keeps it and the other is reported as a Problem,
// as tessera-scheduler reports a conflict. Never fails: what cannot be read
// becomes a Problem.
Inventory BuildInventory(const nlohmann::json& nodes, const nlohmann::json& pods,
                         const core::ResourceNames& names = {});

}  // namespace tessera::kubectl
