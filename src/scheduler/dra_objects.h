// What the extender reads of DRA objects (resource.k8s.io/v1), decoded once
// at the informers' edge: a ResourceSlice of Tessera's driver (which GPU
// each device is, in the order the slice lists them: the order kube-
// scheduler's allocator tries them in), and a ResourceClaim (the shares its
// allocation holds on the driver's devices, and what it asks for while it is
// not allocated). The rules follow what tessera-node publishes and reads
// (src/dra/resource_slice.h, src/dra/claim.h; docs/notes/dra.md), and the
// capacities are read by the same functions as there (core/dra_capacity.h):
//
//  - a device's GPU index is its `index` attribute (an int);
//  - an allocation result with `consumedCapacity` holds its `memory` (the
//    whole card's when absent) and `compute` (percent; 0 when absent); one
//    without it holds the whole GPU (exclusive allocation);
//  - a request (`exactly`) of one of the driver's DeviceClasses asks
//    `count` GPUs (default 1) of `capacity.requests.memory` each (the whole
//    card when absent: the slice's request policy default) and
//    `capacity.requests.compute` percent (0 when absent).
// Pure functions; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(DraSlice slice, DecodeDraSlice(slice_json, core::kDraDriver));
//   TESSERA_ASSIGN_OR_RETURN(DraClaim claim, DecodeDraClaim(claim_json, core::kDraDriver, {"gpu.tessera.io"}));
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/ledger.h"
#include "core/model.h"
#include "core/pod_view.h"
#include "core/status.h"

namespace tessera::scheduler {

// A share's memory when it is the whole card's (known per GPU only).
inline constexpr int64_t kWholeCardMemory = -1;

// One ResourceSlice of the driver.
struct DraSlice {
  std::string name;  // metadata.name
  std::string node;  // spec.nodeName
  std::string pool;  // spec.pool.name
  struct Device {
    std::string name;  // "gpu-0"
    int index = 0;     // the GPU index on the node (attribute `index`)
    bool operator==(const Device&) const = default;
  };
  std::vector<Device> devices;  // in the order the slice lists them
  // Devices left out because they have no int `index` attribute.
  std::vector<std::string> unusable;
};

// INVALID_ARGUMENT naming what is missing when `slice` has no name, node
// (a slice of the driver without spec.nodeName is not one tessera-node
// publishes) or pool; NOT_FOUND when it is another driver's.
Result<DraSlice> DecodeDraSlice(const nlohmann::json& slice, std::string_view driver);

// What an allocated claim holds on one device of the driver (its results
// on that device added up).
struct DraDeviceShare {
  std::string pool;
  std::string device;
  int64_t mem_mib = 0;     // kWholeCardMemory: the whole card's
  int64_t core_milli = 0;  // 1000: the whole GPU's time
  bool operator==(const DraDeviceShare&) const = default;
};

// One request of a claim for the driver's GPUs, as the extender models it.
struct DraRequest {
  std::string name;
  int count = 1;
  int64_t mem_mib = kWholeCardMemory;  // per GPU
  int64_t core_milli = 0;              // per GPU
  bool operator==(const DraRequest&) const = default;
};

struct DraClaim {
  std::string key;  // "namespace/name"
  std::string uid;
  bool allocated = false;              // status.allocation is set
  std::vector<DraDeviceShare> shares;  // allocated: the driver's devices it holds
  std::vector<DraRequest> requests;    // the requests of the driver's classes
  // Why the extender cannot model the claim's requests ("" when it can): a
  // firstAvailable request, allocationMode All, or a request it cannot read.
  // Such a claim is still booked once allocated.
  std::string unmodelled;
};

// INVALID_ARGUMENT when `claim` has no name or an allocation result of the
// driver cannot be read (a capacity that is not a quantity). `classes` are
// the DeviceClass names whose requests are the driver's.
Result<DraClaim> DecodeDraClaim(const nlohmann::json& claim, std::string_view driver,
                                const std::set<std::string, std::less<>>& classes);

// What a pod asks of the driver's GPUs through its claims that are not
// allocated yet, as the placement code models it: one container per
// request, named "<claim name>/<request name>", with the pod's CPU and
// memory. Claims already allocated (shared with another pod) are not asked
// for again.
struct DraPodRequest {
  core::PodRequest request;
  std::vector<bool> whole_card;  // parallel to request.containers: asks the whole card's memory
  // The request on `node`, a whole card's memory as its largest GPU's.
  core::PodRequest On(const core::NodeState& node) const;
};
// `find` returns the claim "namespace/name" as last seen, nullptr when
// unknown. NOT_FOUND when the pod has no unallocated claim with requests of
// the driver (nothing to steer); UNAVAILABLE when a claim of the pod is not
// known yet (made a moment later); UNIMPLEMENTED with DraClaim::unmodelled.
Result<DraPodRequest> DraPodRequestOf(const core::PodView& pod,
                                      const std::function<const DraClaim*(const std::string& key)>& find);

}  // namespace tessera::scheduler
