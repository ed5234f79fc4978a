// The allocation view kubectl-tessera prints: per node and GPU what is held
// and by which containers and DRA claims, built from Node and Pod objects
// (and ResourceClaims, claims.h) with core::Ledger
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

// One container's share of one GPU (device-plugin path), or one DRA
// claim's (`claim` set; `pod` the first pod it is reserved for, or "").
struct ShareView {
  std::string ns, pod, container;
  int64_t mem_mib = 0;
  int64_t core_milli = 0;
  std::string claim;  // DRA: the ResourceClaim's name; "" for a container's share
  // The pod's tessera.io/isolation as written when it is not the default
  // (hook): "mps", or "none" for a share nothing enforces. "" for claims.
  std::string isolation;
  // "ns/pod[container]"; a claim's "ns/pod[claim:name]", or "ns/claim:name" when reserved for no pod.
  std::string Holder() const;
  // Holder(), then " (MPS)" or " (not enforced)" when the isolation says so.
  std::string HolderAndIsolation() const;
  bool operator==(const ShareView&) const = default;
};

struct GpuView {
  core::GpuInfo info;
  core::GpuUsage used;             // what the ledger holds, plus the claims' memory and compute
  std::vector<ShareView> shares;   // containers' then claims', each sorted by namespace, pod, container/claim
  int pods = 0;                    // distinct pods among the shares (a claim reserved for none counts as one)
  int claims = 0;                  // of the shares, DRA claims'
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
// The same, with the DRA shares of `claims` (the "items" of a ResourceClaim
// list; claims.h reads them) on their nodes' GPUs beside the pods'. A claim
// on a node or GPU this view lacks, or one that takes a GPU past its memory
// or compute beside the shares counted before it, is a Problem (the latter
// still shown: the node agent refuses whichever reached the node second).
Inventory BuildInventory(const nlohmann::json& nodes, const nlohmann::json& pods, const nlohmann::json& claims,
                         const core::ResourceNames& names = {});

}  // namespace tessera::kubectl
