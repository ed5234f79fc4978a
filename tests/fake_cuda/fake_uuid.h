// The UUIDs of the fake's devices, shared by the fake libcuda.so.1, the fake
// libnvidia-ml.so.1 and the tests. Physical device p (its place in PCI order,
// which is NVML's index) is "GPU-fa4e0000-0000-4000-8000-<p in 12 decimal
// digits>": the string nvmlDeviceGetUUID gives and, read as hex, the 16 bytes
// cuDeviceGetUuid gives. As in a container, where the NVIDIA runtime exposes
// exactly the GPUs NVIDIA_VISIBLE_DEVICES lists: when it is a list of UUIDs
// (what tessera-node's Allocate hands a container), the fake has those
// devices, physical device p being the p-th listed.
//
//   char s[fake::kUuidChars + 1];
//   fake::UuidString(1, s);   // "GPU-fa4e0000-0000-4000-8000-000000000001"
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fake {

inline constexpr int kUuidChars = 40;  // "GPU-" + 36

// The UUIDs NVIDIA_VISIBLE_DEVICES lists, or nullptr when it lists none.
inline const char* VisibleUuids() {
  const char* v = std::getenv("NVIDIA_VISIBLE_DEVICES");
  return v != nullptr && std::strncmp(v, "GPU-", 4) == 0 ? v : nullptr;
}

// How many devices NVIDIA_VISIBLE_DEVICES lists (0: none).
inline int VisibleUuidCount() {
  const char* v = VisibleUuids();
  if (v == nullptr) return 0;
  int n = 1;
  for (const char* c = v; *c != '\0'; ++c) n += *c == ',';
  return n;
}

inline void UuidString(unsigned physical, char out[kUuidChars + 1]) {
  if (const char* v = VisibleUuids(); v != nullptr && static_cast<int>(physical) < VisibleUuidCount()) {
    for (unsigned i = 0; i < physical; ++i) v = std::strchr(v, ',') + 1;
    const size_t len = std::strcspn(v, ",");
    std::snprintf(out, kUuidChars + 1, "%.*s", static_cast<int>(len), v);
    return;
  }
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
