// The replay engine: places a sequence of arriving pods on a cluster with one
// policy, through the same Ledger and Placer the scheduler uses, and records
// the cluster's GPU allocation and fragmentation after every arrival.
// Arrival-only (FGD's protocol): pods never leave.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/fragmentation.h"
#include "core/model.h"
#include "core/placer.h"
#include "core/policy.h"
#include "core/status.h"
#include "sim/report.h"

namespace tessera::sim {

struct ReplayOptions {
  std::string policy = "tessera";
  uint64_t seed = 42;
  // The workload FGD targets and the fragmentation report measures against
  // (the typical pods of the original trace).
  core::TargetWorkload typical;
  // tessera-interference's knobs (every share predicted at its request here).
  core::InterferenceOptions interference = {};
};

struct ReplayStats {
  int64_t arrived = 0;
  int64_t placed = 0;
  int64_t failed = 0;
  double seconds = 0;
};

// Every policy the simulator replays: core::PolicyNames() (what the extender
// runs too), then the DRA placement variants (core/dra_policy.h).
std::vector<std::string> ReplayPolicyNames();
// Makes one of ReplayPolicyNames(); INVALID_ARGUMENT naming them otherwise.
Result<std::unique_ptr<core::PlacementPolicy>> MakeReplayPolicy(std::string_view name,
                                                                const core::PolicyConfig& config);

// A placer for one run with `seed`: ties go to the node first in a random
// order fixed for the run (as the FGD artifact's randomly prefixed node
// names do). Both replay modes use it, so a seed means the same order.
core::Placer SeededPlacer(core::PlacementPolicy& policy, size_t node_count, uint64_t seed);

// Replays `arrivals` on `nodes`. Fails only on bad input (unknown policy,
// duplicate node) or a broken invariant (a placement the ledger refuses).
Result<RunResult> Replay(const std::vector<core::NodeInfo>& nodes,
                         const std::vector<core::PodRequest>& arrivals, const ReplayOptions& options,
                         ReplayStats* stats);

}  // namespace tessera::sim
