// DRA shares as kubectl-tessera shows them: the GPUs that allocated
// ResourceClaims (resource.k8s.io/v1) hold through Tessera's DRA driver
// (gpu.tessera.io), read from status.allocation.devices.results with
// consumedCapacity, and the pod each is reserved for (status.reservedFor).
// The same reading as the node agent's (src/dra/claim.h; both read the
// capacities with core/dra_capacity.h), without its checks against the
// node's GPUs. Pure; thread-safe.
//
//   ClaimShares dra = ClaimSharesFrom(claims["items"]);
//   for (const ClaimShare& s : dra.shares) ...   // node, GPU index, MiB, core milli
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kubectl/inventory.h"

namespace tessera::kubectl {

// One GPU of one allocated claim.
struct ClaimShare {
  std::string ns, claim;
  std::string pod;            // the first pod it is reserved for; "" when none
  std::string node;           // the result's pool: tessera-node names its pool after its node
  int index = 0;              // from the device name gpu-<index>
  int64_t mem_mib = 0;        // 0: the whole card (no memory in consumedCapacity, or no consumedCapacity)
  int64_t core_milli = 0;     // 10 per percent; an exclusive allocation (no consumedCapacity) holds 1000
  bool operator==(const ClaimShare&) const = default;
};

struct ClaimShares {
  std::vector<ClaimShare> shares;  // by namespace, claim, node, index
  std::vector<Problem> problems;   // results that cannot be read ("claim ns/name")
};

// `claims`: the "items" of a ResourceClaim list (anything else: none).
// Claims not allocated, and results of other drivers, are skipped; two
// results of one claim on one GPU are summed.
ClaimShares ClaimSharesFrom(const nlohmann::json& claims);

// "claim:<name>": how a claim stands where a container name would.
std::string ClaimLabel(const std::string& claim);

}  // namespace tessera::kubectl
