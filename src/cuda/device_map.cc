#include "cuda/device_map.h"

#include <atomic>
#include <cstring>

#include "cuda/driver_table.h"
#include "cuda/gpu_uuid.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

// Per CUDA ordinal and per NVML index: 0 not resolved yet, 1 not part of the
// share, 2 + i the container's GPU i. Written once (compare-and-swap from 0).
constexpr int kCached = 64;
constinit std::atomic<int> g_cuda_index[kCached] = {};
constinit std::atomic<int> g_nvml_index[kCached] = {};

// Caches `index` for `key`; true when this call stored it (the first
// resolution, which logs), also for keys beyond the cache.
bool Publish(std::atomic<int>* table, int key, int index) {
  if (key < 0 || key >= kCached) return true;
  int unresolved = 0;
  return table[key].compare_exchange_strong(unresolved, index + 2, std::memory_order_acq_rel);
}

void LogUnshared(const char* what, int key, const GpuUuid* uuid) {
  char text[kGpuUuidChars + 1] = "unknown UUID";
  if (uuid != nullptr) FormatGpuUuid(*uuid, text);
  TESSERA_LOG(kLogError,
              "%s %d (%s) is none of the container's GPUs (TESSERA_GPU_UUID_<i>): not limited",
              what, key, text);
}

// Cold: the first lookup of `ordinal`.
[[gnu::cold, gnu::noinline]] int ResolveOrdinal(int ordinal) {
  const Config& cfg = CurrentConfig();
  if (!cfg.AnyUuid()) {
    const int index = cfg.ShareIndexOf(ordinal, nullptr);
    Publish(g_cuda_index, ordinal, index);
    return index;
  }
  CUuuid raw{};
  CUresult r = TESSERA_REAL(cuDeviceGetUuid_v2)(&raw, ordinal);
  if (r == CUDA_ERROR_NOT_FOUND) r = TESSERA_REAL(cuDeviceGetUuid)(&raw, ordinal);
  if (r == CUDA_ERROR_INVALID_DEVICE || r == CUDA_ERROR_NOT_INITIALIZED ||
      r == CUDA_ERROR_DEINITIALIZED) {
    return -1;  // no such device (yet): not cached, the caller's call fails alike
  }
  const GpuUuid uuid = GpuUuidFromBytes(raw.bytes);
  const GpuUuid* known = r == CUDA_SUCCESS ? &uuid : nullptr;
  const int index = cfg.ShareIndexOf(ordinal, known);
  if (Publish(g_cuda_index, ordinal, index) && index < 0) LogUnshared("CUDA device", ordinal, known);
  return index;
}

[[gnu::cold, gnu::noinline]] int ResolveNvml(nvmlDevice_t device, unsigned nvml_index) {
  const Config& cfg = CurrentConfig();
  const int key = static_cast<int>(nvml_index);
  if (!cfg.AnyUuid()) {
    const int index = cfg.ShareIndexOf(key, nullptr);
    Publish(g_nvml_index, key, index);
    return index;
  }
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  GpuUuid uuid;
  const bool known = TESSERA_REAL(nvmlDeviceGetUUID)(device, text, sizeof(text)) == NVML_SUCCESS &&
                     ParseGpuUuid(text, &uuid);
  const int index = cfg.ShareIndexOf(key, known ? &uuid : nullptr);
  if (Publish(g_nvml_index, key, index) && index < 0) LogUnshared("NVML device", key, known ? &uuid : nullptr);
  return index;
}

}  // namespace

Gpu GpuOfOrdinal(int ordinal) {
  if (ordinal < 0) return Gpu{};
  if (ordinal < kCached) {
    const int v = g_cuda_index[ordinal].load(std::memory_order_acquire);
    if (v != 0) [[likely]] return Gpu{ordinal, v - 2};
  }
  return Gpu{ordinal, ResolveOrdinal(ordinal)};
}

Gpu CurrentGpu() { return GpuOfOrdinal(CurrentDevice()); }

int OrdinalOfIndex(int index) {
  if (index < 0) return -1;
  if (!CurrentConfig().AnyUuid()) return index;
  for (int d = 0; d < kCached; ++d) {
    if (g_cuda_index[d].load(std::memory_order_acquire) == index + 2) return d;
  }
  return -1;
}

int NvmlShareIndex(nvmlDevice_t device) {
  unsigned nvml_index = 0;
  if (TESSERA_REAL(nvmlDeviceGetIndex)(device, &nvml_index) != NVML_SUCCESS) return -1;
  if (nvml_index < static_cast<unsigned>(kCached)) {
    const int v = g_nvml_index[nvml_index].load(std::memory_order_acquire);
    if (v != 0) [[likely]] return v - 2;
  }
  return ResolveNvml(device, nvml_index);
}

}  // namespace tessera::cuda
