// Names of Tessera's DRA driver that more than one module uses: the driver
// (and the DeviceClass the chart creates under the same name) and its
// devices' consumable capacities. Constants only.
#pragma once

namespace tessera::core {

// The DRA driver tessera-node runs (tessera-node --dra), named in its
// ResourceSlices and in claims' allocation results.
inline constexpr const char* kDraDriver = "gpu.tessera.io";

// The consumable capacities of each device the driver publishes (a GPU):
// its memory (a quantity in bytes, "40960Mi") and its compute (percent of
// the card's time, "100"). Claims request them in capacity.requests and
// allocation results hold them in consumedCapacity under these names.
inline constexpr const char* kMemoryCapacity = "memory";
inline constexpr const char* kComputeCapacity = "compute";

}  // namespace tessera::core
