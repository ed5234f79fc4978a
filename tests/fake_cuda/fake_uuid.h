// The UUIDs of the fake's devices, shared by the fake libcuda.so.1, the fake
// libnvidia-ml.so.1 and the tests. Physical device p (its place in PCI order,
// which is NVML's index) is "GPU-fa4e0000-0000-4000-8000-<p in 12 decimal
// digits>": the string nvmlDeviceGetUUID gives and, read as hex, the 16 bytes
// cuDeviceGetUuid gives.
//
//   char s[fake::kUuidChars + 1];
//   fake::UuidString(1, s);   // "GPU-fa4e0000-0000-4000-8000-000000000001"
#pragma once

#include <cstdio>

namespace fake {

inline constexpr int kUuidChars = 40;  // "GPU-" + 36

inline void UuidString(unsigned physical, char out[kUuidChars + 1]) {
  std::snprintf(out, kUuidChars + 1, "GPU-fa4e0000-0000-4000-8000-%012u", physical % 1000000000u);
}

inline void UuidBytes(unsigned physical, unsigned char out[16]) {
  char s[kUuidChars + 1];
  UuidString(physical, s);
  int n = 0;
  for (const char* c = s + 4; *c != '\0' && n < 32; ++c) {
    if (*c == '-') continue;
    const int v = *c <= '9' ? *c - '0' : (*c | 0x20) - 'a' + 10;
    out[n / 2] = static_cast<unsigned char>(n % 2 == 0 ? v << 4 : out[n / 2] | v);
    ++n;
  }
}

}  // namespace fake
