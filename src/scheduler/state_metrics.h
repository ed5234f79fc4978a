// The extender's state as Prometheus gauges, read from a ClusterState at
// each scrape: per GPU model the GPUs, their memory and compute (total and
// allocated) and predicted busy time, pods holding shares (assumed or
// confirmed) or waiting, nodes, the usage reports learned from, and whether
// this replica leads. docs/metrics.md lists every series.
//
// Thread-safety: the callbacks run on the scraping thread and take the
// state's mutex briefly (one pass over the ledger's GPUs per family).
//
//   metrics::Registry registry;
//   TESSERA_RETURN_IF_ERROR(RegisterStateMetrics(registry, state, [&] { return elector.IsLeader(); }));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/status.h"
#include "metrics/registry.h"
#include "scheduler/cluster_state.h"

namespace tessera::scheduler {

// One GPU model's totals in the ledger.
struct ModelTotals {
  int64_t gpus = 0;
  int64_t mem_total_mib = 0;
  int64_t mem_allocated_mib = 0;
  int64_t core_allocated_milli = 0;  // 1000 = one whole GPU's time
  int64_t predicted_busy_milli = 0;  // predicted busy time of the shares (load_tracker.h)
  bool operator==(const ModelTotals&) const = default;
};
// By model name, over every GPU in the ledger (healthy or not).
std::map<std::string, ModelTotals> TotalsByModel(const ClusterState& state);

// Adds the families to `registry`; `state` must outlive it. `is_leader`
// (nullptr: always 1) gives tessera_scheduler_leader. ALREADY_EXISTS when
// they are there already.
Status RegisterStateMetrics(metrics::Registry& registry, const ClusterState& state,
                            std::function<bool()> is_leader);

}  // namespace tessera::scheduler
