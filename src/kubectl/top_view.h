// `kubectl tessera top`: what each container (and each DRA claim) uses of its
// GPUs now, from the tessera.io/usage pod annotation (written by
// tessera-node), beside the share its tessera.io/assignment (or the claim's
// allocation) grants. Pure; thread-safe.
//
//   TopView top = BuildTop(pods["items"]);
//   std::cout << RenderTop(top, options, std::chrono::system_clock::now(), "namespace default");
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/timestamp.h"
#include "kubectl/format.h"
#include "kubectl/inventory.h"

namespace tessera::kubectl {

struct TopRow {
  std::string ns, pod, container, node;  // a DRA claim's row: container "claim:<name>"
  std::string claim;                     // DRA: the claim's name; "" for a container
  int gpu = 0;
  std::string uuid;
  int64_t mem_used_mib = 0;
  int64_t mem_limit_mib = -1;      // the assignment's share; -1 when not assigned on that GPU
  int64_t core_limit_milli = -1;   // likewise
  double utilization = 0;          // 0..1
  core::WallTime at;
};

struct TopView {
  std::vector<TopRow> rows;        // by namespace, pod, container, GPU
  int pods_with_usage = 0;
  std::vector<Problem> problems;   // unusable usage annotations
};

// `pods`: items of a Pod list. Succeeded and Failed pods are skipped.
// `claims`: items of a ResourceClaim list; a usage entry "claim/<name>"
// (a claim the pod was reserved for, as tessera-node writes it) becomes a
// row with container "claim:<name>" and the claim's share on that GPU as its
// limits (a claim without a memory size holds the whole card: shown as "?").
TopView BuildTop(const nlohmann::json& pods, const nlohmann::json& claims);
TopView BuildTop(const nlohmann::json& pods);  // no claims read

// The table, or, when no pod reports usage, one short line saying so; `scope`
// ("namespace default", "all namespaces") names where it looked.
std::string RenderTop(const TopView& top, const ViewOptions& options, core::WallTime now, const std::string& scope);
nlohmann::ordered_json TopToJson(const TopView& top);

}  // namespace tessera::kubectl
