// The ResourceSlice (resource.k8s.io/v1) that tessera-node publishes as a
// DRA driver: one device per healthy GPU of the node, shareable by several
// claims (allowMultipleAllocations), with two consumable capacities whose
// request policies are Tessera's rules for a share:
//   memory   the card's MiB as a quantity ("40960Mi"); a claim takes whole
//            MiB, at least 1Mi (validRange min 1Mi, step 1Mi, max the card;
//            kube-scheduler rounds a request up to the next MiB); a claim
//            that names no memory takes the whole card (default);
//   compute  percent of the card ("100"); a claim takes 0-100 whole points
//            (validRange min 0, step 1, max 100); one that names none takes
//            0, as a device-plugin share asking memory only does.
// Attributes users select on: model, uuid, index, memoryMiB, mps.
//
// On a node that also serves device-plugin pods, each GPU offers claims only
// what those pods leave (SliceOptions::pod_held; docs/notes/dra.md, "Both
// paths on one node"): memory's value, default and max become the card
// minus the pods' MiB, compute's value and max 100 minus the pods' percent
// (rounded down to whole points). Claims are not subtracted: kube-scheduler
// counts them against the value itself. API validation refuses a value
// smaller than one step above the minimum (2Mi of memory, 1 point of
// compute), so a GPU the pods leave less than that of either gets the taint
// kFullTaintKey (effect NoSchedule) instead: claims that do not tolerate it
// are not allocated there; claims allocated already keep their shares. Its
// values are then those smallest valid ones.
// Pure; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(nlohmann::json slice, dra::ResourceSliceFor("node-1", gpus, {}));
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace tessera::dra {

// The driver name: a DNS subdomain of at most 63 characters in a domain the
// project owns (resource.k8s.io/v1's rule for drivers).
inline constexpr const char* kDriverName = "gpu.tessera.io";
// The device taint of a GPU that device-plugin pods fill (a label name).
inline constexpr const char* kFullTaintKey = "gpu.tessera.io/held-by-device-plugin-pods";

// API paths of the resource.k8s.io/v1 objects the driver reads and writes.
std::string ResourceSlicesPath();                                        // /apis/resource.k8s.io/v1/resourceslices
std::string ResourceSlicePath(std::string_view name);                    // .../resourceslices/{name}
std::string ResourceClaimPath(std::string_view ns, std::string_view name);  // .../namespaces/{ns}/resourceclaims/{name}

// "gpu-<index>": the device's name in the slice (a DNS label).
std::string DeviceName(int index);
// The node's slice: "<node>-<driver>".
std::string SliceName(std::string_view node, std::string_view driver);
// OK when `name` is a DNS subdomain (lower-case alphanumerics, '-' and '.',
// each label starting and ending alphanumeric) of at most `max_length`.
Status CheckDnsSubdomain(std::string_view name, size_t max_length, std::string_view what);

struct SliceOptions {
  std::string driver = kDriverName;
  int64_t generation = 1;  // the pool's generation: bump it on every change
  std::string node_uid;    // non-empty: the Node owns the slice (deleted with it)
  // By GPU index, what device-plugin pods hold of it (mem_mib: a whole GPU
  // asked without a size counted as its card; core_milli); a GPU not named
  // holds none. Default: none (a node serving claims only).
  std::map<int, core::GpuShare> pod_held;
};

// The ResourceSlice object for `node`'s `gpus` (the inventory's), pool =
// node name, one slice in the pool. Unhealthy GPUs are left out, so nothing
// new is allocated on them. INVALID_ARGUMENT, naming what is wrong, when the
// node or driver name is not a DNS subdomain, the slice name is too long, a
// GPU index repeats or is negative, or a GPU has no memory size (it could
// not offer memory). A `pod_held` larger than its card publishes the GPU as
// full (tainted), not an error.
Result<nlohmann::json> ResourceSliceFor(const std::string& node, const std::vector<core::GpuInfo>& gpus,
                                        const SliceOptions& options);

}  // namespace tessera::dra
