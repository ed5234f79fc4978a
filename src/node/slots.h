// Device-plugin slots: each physical GPU is offered to the kubelet as
// `slots_per_gpu` device IDs named "<uuid>-<k>", so the node's capacity of
// tessera.io/gpu bounds how many containers may share. Pure; thread-safe.
//
//   SlotId("GPU-1234", 3) == "GPU-1234-3";  *SlotGpu("GPU-1234-3") == "GPU-1234"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace tessera::node {

// One device ID offered to the kubelet.
struct Slot {
  std::string id;    // "<uuid>-<k>"
  std::string uuid;  // the GPU it belongs to
  int k = 0;         // 0 .. slots_per_gpu-1
  int numa_node = -1;
  bool healthy = true;
  bool operator==(const Slot&) const = default;
};

// The kubelet's limit on a device ID's length.
inline constexpr size_t kMaxDeviceIdLength = 63;

std::string SlotId(std::string_view uuid, int k);

// The GPU uuid of a slot ID: everything before the last "-<digits>".
// INVALID_ARGUMENT when `id` has no such suffix or an empty uuid.
Result<std::string> SlotGpu(std::string_view id);

// The slots of `gpus`, GPU by GPU in inventory order, k ascending; each slot
// carries its GPU's health and NUMA node. INVALID_ARGUMENT when slots_per_gpu
// is not in 1..1000, a GPU has no uuid, or an ID would pass 63 characters.
Result<std::vector<Slot>> SlotsFor(const std::vector<core::GpuInfo>& gpus, int slots_per_gpu);

}  // namespace tessera::node
