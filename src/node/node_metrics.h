// tessera-node's metric families on the Registry the agent owns (served on
// /metrics by MetricsServer). Series for GPUs and containers belong here too:
// add a family in Register and a member for the code that updates it.
//
// Thread-safety: the series are lock-free counters; see metrics/series.h.
//
//   metrics::Registry registry;
//   TESSERA_ASSIGN_OR_RETURN(NodeMetrics m, NodeMetrics::Register(registry));
//   m.allocations->Increment();
#pragma once

#include <string>

#include "core/status.h"
#include "metrics/registry.h"

namespace tessera::node {

struct NodeMetrics {
  // Each points into the registry and lives as long as it does.
  metrics::Counter* allocations = nullptr;        // tessera_node_allocations_total
  metrics::Counter* allocate_failures = nullptr;  // tessera_node_allocate_failures_total
  // Of those, the ones whose assignment was not handed out (handout.h).
  metrics::Counter* assignments_refused = nullptr;  // tessera_node_assignments_refused_total
  metrics::Counter* mismatches = nullptr;         // tessera_node_allocation_mismatches_total
  metrics::Counter* reconcile_runs = nullptr;     // tessera_node_reconcile_runs_total
  metrics::Counter* region_folders_removed = nullptr;  // tessera_node_region_folders_removed_total

  // Adds the families to `registry`, each with one series labelled
  // node=`node`, so node and GPU series join on the same label.
  // ALREADY_EXISTS when they are there.
  static Result<NodeMetrics> Register(metrics::Registry& registry, const std::string& node);
};

}  // namespace tessera::node
