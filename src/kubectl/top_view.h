// `kubectl tessera top`: what each container uses of its GPUs now, from the
// tessera.io/usage pod annotation (written by tessera-node), beside the share
// its tessera.io/assignment grants. Pure; thread-safe.
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
  std::string ns, pod, container, node;
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
TopView BuildTop(const nlohmann::json& pods);

// The table, or, when no pod reports usage, one short line saying so; `scope`
// ("namespace default", "all namespaces") names where it looked.
std::string RenderTop(const TopView& top, const ViewOptions& options, core::WallTime now, const std::string& scope);
nlohmann::ordered_json TopToJson(const TopView& top);

}  // namespace tessera::kubectl
