// The share as the container sees it: cuMemGetInfo, cuDeviceTotalMem and
// NVML memory info all answer from VirtualMemInfo, so every surface agrees.
// They never add an error of their own; a driver error passes through.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/memory_view.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

unsigned int Clamp32(uint64_t v) { return v > UINT_MAX ? UINT_MAX : static_cast<unsigned>(v); }

TotalView TotalViewOf() { return CurrentConfig().device_total ? TotalView::kDevice : TotalView::kShare; }

// The view of the current device given the driver's physical numbers;
// physical when the library is not enforcing or the device is not part of
// the share.
MemView CurrentView(uint64_t phys_free, uint64_t phys_total) {
  Accountant* acct = CurrentAccountant();
  const Gpu gpu = acct != nullptr ? CurrentGpu() : Gpu{};
  if (!gpu.Shared()) {
    return MemView{phys_free, phys_total, phys_total - (phys_free < phys_total ? phys_free : phys_total)};
  }
  RefreshReserves(*acct, gpu);
  return VirtualMemInfo(acct->Limit(gpu.index), acct->Used(gpu.index), phys_free, phys_total,
                        TotalViewOf());
}

[[gnu::cold, gnu::noinline]] CUresult MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  EnsureInit();
  size_t f = 0, t = 0;
  CUresult r = TESSERA_REAL(cuMemGetInfo_v2)(&f, &t);
  if (r != CUDA_SUCCESS) return r;
  MemView v = CurrentView(f, t);
  if (free_bytes != nullptr) *free_bytes = v.free;
  if (total_bytes != nullptr) *total_bytes = v.total;
  return r;
}

[[gnu::cold, gnu::noinline]] CUresult DeviceTotalMem(size_t* bytes, CUdevice dev) {
  EnsureInit();
  size_t t = 0;
  CUresult r = TESSERA_REAL(cuDeviceTotalMem_v2)(&t, dev);
  if (r != CUDA_SUCCESS) return r;
  // `dev` is a CUDA ordinal; its limit is that of its index.
  Accountant* acct = CurrentAccountant();
  if (const Gpu gpu = acct != nullptr ? GpuOfOrdinal(dev) : Gpu{}; gpu.Shared()) {
    t = VirtualMemInfo(acct->Limit(gpu.index), 0, t, t, TotalViewOf()).total;
  }
  if (bytes != nullptr) *bytes = t;
  return r;
}

// NVML devices are matched to the container's GPUs by UUID (device_map.h):
// NVML's index is PCI order, unrelated to CUDA's ordinals.
// nvmlMemory_v2_t also has `reserved`, the driver's own reserve on the card
// (total = reserved + used + free). No share is charged for it, so the share
// view shows none of it (used is then the share's charged usage, as in
// nvmlMemory_t); the card's total (TESSERA_GPU_MEM_VIEW=device) keeps it,
// apart from used.
template <typename Mem>
[[gnu::cold, gnu::noinline]] nvmlReturn_t NvmlMemory(nvmlDevice_t device, Mem* memory,
                                                     nvmlReturn_t r) {
  Accountant* acct = CurrentAccountant();
  if (r != NVML_SUCCESS || memory == nullptr || acct == nullptr) return r;
  const int gpu = NvmlShareIndex(device);
  if (!ValidGpu(gpu) || acct->Limit(gpu) == 0) return r;
  const TotalView view = TotalViewOf();
  MemView v = VirtualMemInfo(acct->Limit(gpu), acct->Used(gpu), memory->free, memory->total, view);
  memory->total = v.total;
  memory->free = v.free;
  memory->used = v.used;
  if constexpr (requires { memory->reserved; }) {
    if (view == TotalView::kShare) {
      memory->reserved = 0;
    } else {
      // free <= the card's free, so used (everything else) covers the reserve.
      memory->used -= std::min<unsigned long long>(memory->used, memory->reserved);
    }
  }
  return r;
}

}  // namespace

namespace hooks {

CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemGetInfo)(free_bytes, total_bytes);
  size_t f = 0, t = 0;
  CUresult r = MemGetInfo(&f, &t);
  if (r == CUDA_SUCCESS && free_bytes != nullptr) *free_bytes = Clamp32(f);
  if (r == CUDA_SUCCESS && total_bytes != nullptr) *total_bytes = Clamp32(t);
  return r;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
  return MemGetInfo(free_bytes, total_bytes);
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuDeviceTotalMem)(bytes, dev);
  size_t t = 0;
  CUresult r = DeviceTotalMem(&t, dev);
  if (r == CUDA_SUCCESS && bytes != nullptr) *bytes = Clamp32(t);
  return r;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuDeviceTotalMem_v2)(bytes, dev);
  return DeviceTotalMem(bytes, dev);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) noexcept {
  if (!EnsureNvml()) return NVML_ERROR_LIBRARY_NOT_FOUND;
  return NvmlMemory(device, memory, TESSERA_REAL(nvmlDeviceGetMemoryInfo)(device, memory));
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) noexcept {
  if (!EnsureNvml()) return NVML_ERROR_LIBRARY_NOT_FOUND;
  return NvmlMemory(device, memory, TESSERA_REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory));
}

}  // namespace hooks
}  // namespace tessera::cuda
