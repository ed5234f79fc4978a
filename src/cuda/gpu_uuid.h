// GPU UUIDs as the node agent writes them (TESSERA_GPU_UUID_<i>) and NVML
// gives them (nvmlDeviceGetUUID): "GPU-" and 36 characters, hex digits in
// 8-4-4-4-12 groups; and as CUDA gives them (cuDeviceGetUuid): the same 16
// bytes. Pure functions, no driver.
//
//   GpuUuid u;
//   if (ParseGpuUuid("GPU-5c3c1e2a-...", &u) && u == GpuUuidFromBytes(cu_uuid.bytes)) ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera::cuda {

struct GpuUuid {
  uint8_t bytes[16] = {};
  friend bool operator==(const GpuUuid&, const GpuUuid&) = default;
};

// Length of the text form, "GPU-" + 36.
inline constexpr size_t kGpuUuidChars = 40;

// Parses the text form (hex digits of either case). Returns false, leaving
// *out alone, for anything else: other prefixes (a MIG device's "MIG-..."),
// missing or misplaced dashes, wrong length, non-hex digits.
bool ParseGpuUuid(std::string_view text, GpuUuid* out);

// The UUID of CUDA's CUuuid::bytes.
GpuUuid GpuUuidFromBytes(const char (&bytes)[16]);

// The text form, lowercase, NUL-terminated, into `out`.
void FormatGpuUuid(const GpuUuid& uuid, char (&out)[kGpuUuidChars + 1]);

}  // namespace tessera::cuda
