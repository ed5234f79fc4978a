// What a pod's containers use of their GPUs right now, as the node agent
// measures it: the content of the tessera.io/usage pod annotation (codec.h
// reads and writes it). Plain values; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/timestamp.h"

namespace tessera::core {

// One container's use of one GPU.
struct GpuUse {
  int index = 0;              // GPU index on the node, as in the assignment
  std::string uuid;           // "GPU-..."; may be empty
  int64_t mem_used_mib = 0;   // device memory the container holds
  double utilization = 0;     // share of the GPU's time its kernels ran, 0..1, over the last sample
  bool operator==(const GpuUse&) const = default;
};

struct ContainerUsage {
  std::string name;
  std::vector<GpuUse> gpus;
  bool operator==(const ContainerUsage&) const = default;
};

// A pod's measured use at one instant.
struct PodUsage {
  WallTime at;  // when it was measured; the annotation keeps whole seconds
  std::vector<ContainerUsage> containers;
  bool operator==(const PodUsage&) const = default;
};

}  // namespace tessera::core
