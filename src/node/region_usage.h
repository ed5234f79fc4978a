// What the containers on this node use of their GPU shares: their regions'
// counters (memory held, GPU time, time held at the launch gate, refused
// allocations) joined with the pods' assignments. The source of
// tessera-node's GPU and container series, of the tessera.io/usage pod
// annotation and of the OOM-refusal Events. Everything here is pure except
// ReadRegionCounters, which maps a region.
//
//   auto pods = ActiveAssignments(cached_pods, "node-1");
//   UsageSnapshot now = JoinUsage(pods, gpus, lookup, clock, &previous);
//   for (const OomRefusal& r : NewOomRefusals(&previous, now)) Report(r);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/pod_usage.h"
#include "node/claim_record.h"
#include "node/identify.h"
#include "node/inventory.h"
#include "node/pod_views.h"
#include "node/reconcile.h"

namespace tessera::node {

// One GPU of a container's region, summed over the container's processes.
struct RegionCounters {
  uint64_t used_bytes = 0;     // device memory held now
  uint64_t peak_bytes = 0;     // most ever held at once
  uint64_t oom_refusals = 0;   // allocations refused at the limit
  uint64_t gpu_us = 0;         // GPU time its kernels ran (measured by the launch gate)
  uint64_t throttled_us = 0;   // time its launches waited at the gate
  // The compute its gate refills at now: the arbiter's grant while the
  // arbiter's heartbeat is fresh, else the static share (parts per million;
  // 0: no compute share set).
  uint32_t granted_ppm = 0;
  bool held = false;           // held back now for a higher-priority container
  bool operator==(const RegionCounters&) const = default;
};

// The counters of GPU slots 0..gpus-1 of the region in `dir`. NOT_FOUND when
// no process of the container has created the region yet; the region's own
// error when it is not a region of this layout. Never creates anything.
Result<std::vector<RegionCounters>> ReadRegionCounters(const std::string& dir, int gpus);

// Where a container's region lives on the host: <root>/<pod uid>/<container>,
// as the Allocate answer mounts it.
std::string RegionHostDir(const std::string& root, const std::string& uid, const std::string& container);

// The pods among `pods` whose shares are live on `node`: bound to it, not
// finished, with a readable assignment for it; each keeps only the
// containers the node agent has allocated (tessera.io/allocated).
std::vector<PodAssignment> ActiveAssignments(const PodViews& pods, const std::string& node);

// One container's share of one GPU and its use of it; or, for a DRA claim,
// the claim's share (one region shared by every container using the claim).
struct ContainerGpu {
  PodRef pod;                // a claim's: the first pod it is reserved for (empty when none)
  std::string container;     // a claim's: kClaimRegionContainer
  std::string claim;         // DRA: the ResourceClaim's name (namespace: pod.ns); "" for a device-plugin container
  std::string claim_uid;     // DRA: the claim's uid
  int ordinal = 0;           // the GPU's CUDA ordinal inside the container: its slot in the region
  core::GpuInfo gpu;         // the node's GPU (index, uuid, model)
  uint64_t limit_bytes = 0;  // the share's memory
  double core_share = 0;     // the share's compute, as a fraction of the GPU's time
  bool measured = false;     // a region exists, so `counters` are real
  RegionCounters counters;
  double utilization = 0;    // GPU time per wall time since the previous snapshot, 0..1
};

// One GPU of the node. Memory in use and utilization are the device's own
// measurement when the GPU source gives one (NVML: every process on the
// GPU), else the sums over the containers' regions (simulated GPUs).
struct GpuTotals {
  core::GpuInfo gpu;
  uint64_t used_bytes = 0;       // memory in use
  uint64_t allocated_bytes = 0;  // memory the shares on it hold
  double core_allocated = 0;     // compute the shares hold, in GPUs
  double utilization = 0;        // fraction of its time kernels ran, capped at 1
  int containers = 0;            // device-plugin containers holding a share of it
  int claims = 0;                // DRA claims holding a share of it
  bool device_measured = false;  // used_bytes (and utilization, when the device gave it) are the device's
};

struct UsageSnapshot {
  core::WallTime at{};                            // wall clock when taken
  std::chrono::steady_clock::time_point taken{};  // the same instant, for rates
  std::vector<ContainerGpu> containers;           // device-plugin path: by namespace, pod, container, ordinal
  std::vector<ContainerGpu> claims;               // DRA path: by namespace, claim, ordinal
  std::vector<GpuTotals> gpus;                    // every GPU of the inventory, by index
};

// A container's region counters for `gpus` GPU slots, or nullopt when it has
// none (yet). ReadRegionCounters behind a root folder, in tessera-node.
using RegionLookup =
    std::function<std::optional<std::vector<RegionCounters>>(const std::string& uid, const std::string& container,
                                                             int gpus)>;

// Joins `pods` (ActiveAssignments) with `inventory` and the regions. A share
// on a GPU the inventory lacks is left out. Utilization is measured against
// `previous` (nullptr: 0 everywhere). `device_load` (nullptr when the source
// measures none) replaces the region sums of the GPUs it names.
UsageSnapshot JoinUsage(const std::vector<PodAssignment>& pods, const std::vector<core::GpuInfo>& inventory,
                        const RegionLookup& lookup, core::WallTime at, std::chrono::steady_clock::time_point taken,
                        const UsageSnapshot* previous, const std::vector<GpuLoad>* device_load = nullptr);

// Adds the shares of the claims the DRA driver prepared on this node
// (ReadClaimRecords) to `snapshot` (JoinUsage's, same `previous`): one row
// per claim and GPU in snapshot.claims, counted in its GPU's totals
// (allocated memory and compute; memory in use and utilization only where
// the device did not measure them). `lookup` is called with the claim's uid
// and kClaimRegionContainer. A share on a GPU the snapshot lacks is left out.
void AddClaimUsage(UsageSnapshot& snapshot, const std::vector<ClaimRecord>& claims, const RegionLookup& lookup,
                   const UsageSnapshot* previous);

// Allocations refused at a container's (or a claim's) limit since `previous`. With no
// previous snapshot (the agent just started) there are none: refusals from
// before it started were reported, if at all, by the agent that saw them.
struct OomRefusal {
  ContainerGpu share;     // as in the newer snapshot
  uint64_t refused = 0;   // refusals since the previous snapshot
};
std::vector<OomRefusal> NewOomRefusals(const UsageSnapshot* previous, const UsageSnapshot& now);
std::string OomRefusalMessage(const OomRefusal& refusal);

// The tessera.io/usage value each pod (by uid) should carry: its measured
// containers, then its measured claims, each claim as one entry named
// "claim/<claim name>" (a name no container can have); pods with none are
// absent.
std::map<std::string, core::PodUsage> PodUsages(const UsageSnapshot& snapshot);

// When a pod's usage annotation is written again.
struct UsagePublishPolicy {
  // Memory must move by at least the larger of these: a fixed floor, and a
  // fraction of the value published (so a 40 GiB job is not rewritten for
  // every 64 MiB it allocates).
  int64_t mem_delta_mib = 64;
  double mem_delta_fraction = 0.05;
  double utilization_delta = 0.05;   // utilization moved by at least this
  std::chrono::milliseconds min_interval{10000};  // never more often than this per pod
};

// Whether `now` differs from `published` enough to be written: a container
// or GPU appeared or went away, or memory or utilization moved past the
// policy's thresholds. Time alone never counts.
bool UsageChanged(const core::PodUsage& published, const core::PodUsage& now, const UsagePublishPolicy& policy);

}  // namespace tessera::node
