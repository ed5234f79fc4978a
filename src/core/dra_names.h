// Names of Tessera's DRA driver that more than one module uses: the driver
// (and the DeviceClass the chart creates under the same name). Constants only.
#pragma once

namespace tessera::core {

// The DRA driver tessera-node runs (tessera-node --dra), named in its
// ResourceSlices and in claims' allocation results.
inline constexpr const char* kDraDriver = "gpu.tessera.io";

}  // namespace tessera::core
