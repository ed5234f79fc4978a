// Reads a ResourceClaim (resource.k8s.io/v1) that kube-scheduler allocated
// on this node into the Tessera shares it grants: per GPU of this driver's
// results, the memory (MiB) and compute (core milli, 10 per percent) taken
// from status.allocation.devices.results[].consumedCapacity. Pure;
// thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(auto shares, dra::SharesFromClaim(claim, core::kDraDriver, "node-1", gpus));
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "node/identify.h"

namespace tessera::dra {

// Names a claim as the kubelet does.
struct ClaimRef {
  std::string ns, name, uid;
  std::string Key() const { return ns + "/" + name; }
};

// One GPU of a claim: what Tessera enforces on it.
struct ClaimShare {
  std::vector<std::string> requests;  // the claim's request names served by this GPU
  std::string pool, device;           // as allocated ("node-1", "gpu-0")
  std::string share_id;               // the allocation's shareID ("" when none)
  core::GpuShare gpu;                 // index, uuid, mem_mib, core_milli
  bool operator==(const ClaimShare&) const = default;
};

// The shares `claim` (a ResourceClaim object) holds on `gpus` (this node's
// inventory) through `driver`. Results of other drivers are ignored. A
// result without consumedCapacity is an exclusive allocation (the cluster
// does not run consumable capacity): the whole card and 100 % compute. One
// with consumedCapacity reads its `memory` (rounded up to a MiB; absent: the
// whole card, the slice's default) and `compute` (percent; absent: 0).
// Results on the same GPU (two requests of one claim) are summed. Shares
// are in the order of their GPUs' first result.
// Errors name the claim and the reason:
//   FAILED_PRECONDITION: the claim is not allocated (no status.allocation),
//     it holds no device of `driver`, or a device is in another pool than
//     `pool` (allocated for another node);
//   NOT_FOUND: a device this node does not have (or one unhealthy);
//   INVALID_ARGUMENT: a capacity that is not a quantity, or out of range
//     (memory 0 or over the card, compute over 100, a sum over either).
Result<std::vector<ClaimShare>> SharesFromClaim(const nlohmann::json& claim, const std::string& driver,
                                                const std::string& pool, const std::vector<core::GpuInfo>& gpus);

// The pods `claim` (a ResourceClaim object) is reserved for
// (status.reservedFor entries of resource "pods"), in the claim's namespace;
// none when it is reserved for nothing or for other kinds.
std::vector<node::PodRef> ReservedPods(const nlohmann::json& claim);

}  // namespace tessera::dra
