// A model of how kube-scheduler's DRA allocator picks the GPUs of a claim on
// one node, and of the order in which a node agent may list its GPUs in its
// ResourceSlice to steer that pick. Used by the DRA placement variants
// (dra_policy.h) and meant for the extender, which must predict the device
// the allocator will take on each node it scores.
//
// The facts it rests on (k8s.io/dynamic-resource-allocation v0.36.3,
// structured/internal/incubating, the allocator kube-scheduler 1.36 runs with
// its default features; docs/notes/dra.md, "Placement under DRA"): the
// allocator has no device scoring; it is a first-fit search with
// backtracking over the node's pools sorted by driver and pool name, each
// pool's slices sorted by name, and each slice's devices in the order they
// are listed. A device with allowMultipleAllocations is taken when its
// remaining capacity covers the request; the devices of one request are
// distinct. The first complete solution is kept.
//
// Pure functions; thread-safe.
//
//   std::vector<int> order = SliceDeviceOrder(node, SliceOrder::kLeastFreeFirst);
//   GpuPick pick;
//   if (AllocatorPick(pod, node, order, &pick)) { /* the GPUs the claim gets */ }
#pragma once

#include <string_view>
#include <vector>

#include "core/ledger.h"
#include "core/policy.h"

namespace tessera::core {

// How a node's GPUs are listed in its ResourceSlice (one slice per node, so
// this is the order the allocator tries them in).
enum class SliceOrder {
  // gpu-0, gpu-1, ...: tessera-node's slice today (src/dra). First fit is
  // then the lowest-index GPU with room.
  kGpuIndex,
  // By free compute ascending, then free memory ascending, then index, as
  // the node agent would republish it after every allocation change. First
  // fit is then best fit for any single-GPU request: the GPU with the least
  // room that still fits, as PickGpus(kBestFit) picks.
  kLeastFreeFirst,
};
std::string_view SliceOrderName(SliceOrder order);

// The indexes of the node's healthy GPUs in the order `order` lists them
// (unhealthy GPUs are not published).
std::vector<int> SliceDeviceOrder(const NodeState& node, SliceOrder order);

// The GPUs the allocator gives `pod` on `node` when its slice lists the GPUs
// in `order` (a permutation of some of the node's GPU indexes, e.g. from
// SliceDeviceOrder): each GPU container is one request of gpu_count devices,
// each the first in `order` not yet taken by that container whose free
// compute and memory cover the share (a whole GPU needs all of both), whose
// model the container allows and, for tessera.io/isolation: mps, that runs
// MPS. Containers are allocated one after another, each seeing the shares of
// those before; when a later one cannot fit, the earlier ones move on to
// their next choice, as the allocator backtracks (so a fit is found whenever
// one exists). Fills `out` (container order, as GpuPick) and returns true,
// or returns false when no choice fits. CPU and host memory are not checked
// (FitsNode does).
bool AllocatorPick(const PodRequest& pod, const NodeState& node, const std::vector<int>& order, GpuPick* out);

}  // namespace tessera::core
