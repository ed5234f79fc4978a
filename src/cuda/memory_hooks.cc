// Hooks of linear, pitched and managed memory, VMM physical handles (and
// where they are mapped) and arrays: admit against the share, call the
// driver, track what it returned.
#include <cstdint>

#include "cuda/array_size.h"
#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

// Allocation whose size is known before the call. `alloc` performs it and
// returns the key; `undo` frees it if it cannot be tracked.
template <typename Alloc, typename Undo>
CUresult Sized(Space space, uint64_t bytes, const char* api, Alloc alloc, Undo undo) {
  Accountant* acct = CurrentAccountant();
  const Gpu gpu = acct != nullptr ? CurrentGpu() : Gpu{};
  uint64_t key = 0;
  if (!gpu.Shared() || bytes == 0) return alloc(&key);
  if (CUresult r = Admit(*acct, gpu, bytes, api); r != CUDA_SUCCESS) return r;
  if (CUresult r = alloc(&key); r != CUDA_SUCCESS) {
    acct->Unreserve(gpu.index, bytes);
    return r;
  }
  if (!acct->Track(space, key, gpu.index, bytes)) {
    undo(key);
    acct->Unreserve(gpu.index, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// Allocation whose true size is known only after the call (pitch padding,
// array layout): admits `estimate`, then settles on `actual(key, ordinal,
// estimate)`.
template <typename Alloc, typename Actual, typename Undo>
CUresult Settled(Space space, uint64_t estimate, const char* api, Alloc alloc, Actual actual,
                 Undo undo) {
  Accountant* acct = CurrentAccountant();
  const Gpu gpu = acct != nullptr ? CurrentGpu() : Gpu{};
  uint64_t key = 0;
  if (!gpu.Shared()) return alloc(&key);
  if (CUresult r = Admit(*acct, gpu, estimate, api); r != CUDA_SUCCESS) return r;
  if (CUresult r = alloc(&key); r != CUDA_SUCCESS) {
    acct->Unreserve(gpu.index, estimate);
    return r;
  }
  const uint64_t bytes = actual(key, gpu.ordinal, estimate);
  bool ok = true;
  if (bytes > estimate) {
    ok = Admit(*acct, gpu, bytes - estimate, api) == CUDA_SUCCESS;
    if (!ok) acct->Unreserve(gpu.index, estimate);
  } else if (bytes < estimate) {
    acct->Unreserve(gpu.index, estimate - bytes);
  }
  if (ok && !acct->Track(space, key, gpu.index, bytes)) {
    acct->Unreserve(gpu.index, bytes);
    ok = false;
  }
  if (!ok) {
    undo(key);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// Frees: the driver first; only what it freed is given back.
template <typename Free>
CUresult Freed(Space space, uint64_t key, Free free_fn) {
  CUresult r = free_fn();
  Accountant* acct = CurrentAccountant();
  if (r != CUDA_SUCCESS || acct == nullptr) return r;
  if (acct->Release(space, key)) return r;
  if (space == Space::kDevicePtr) {
    // cuMemFree of stream-ordered memory is allowed too.
    if (uint64_t pool = acct->PoolOf(key); pool != 0) {
      acct->Release(Space::kAsyncPtr, key);
      RefreshPool(*acct, pool);
    }
  }
  return r;
}

uint64_t ArrayActual(CUarray array, int ordinal, uint64_t estimate) {
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  if (TESSERA_REAL(cuArrayGetMemoryRequirements)(&req, array, ordinal) == CUDA_SUCCESS && req.size)
    return req.size;
  return estimate;
}

uint64_t MipmapActual(CUmipmappedArray mipmap, int ordinal, uint64_t estimate) {
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  if (TESSERA_REAL(cuMipmappedArrayGetMemoryRequirements)(&req, mipmap, ordinal) == CUDA_SUCCESS &&
      req.size)
    return req.size;
  return estimate;
}

template <typename Ptr, typename Size, typename Real>
[[gnu::cold, gnu::noinline]] CUresult AllocLinear(Ptr* dptr, Size bytes, Real real,
                                                  const char* api) {
  if (EnsureInit() != kEnforce || dptr == nullptr) return real(dptr, bytes);
  return Sized(
      Space::kDevicePtr, bytes, api,
      [&](uint64_t* key) {
        CUresult r = real(dptr, bytes);
        *key = *dptr;
        return r;
      },
      [](uint64_t key) { TESSERA_REAL(cuMemFree_v2)(key); });
}

template <typename Ptr, typename Size, typename Real>
[[gnu::cold, gnu::noinline]] CUresult AllocPitch(Ptr* dptr, Size* pitch, Size width, Size height,
                                                 unsigned elem, Real real) {
  if (EnsureInit() != kEnforce || dptr == nullptr || pitch == nullptr)
    return real(dptr, pitch, width, height, elem);
  return Settled(
      Space::kDevicePtr, static_cast<uint64_t>(width) * height, "cuMemAllocPitch",
      [&](uint64_t* key) {
        CUresult r = real(dptr, pitch, width, height, elem);
        *key = *dptr;
        return r;
      },
      [&](uint64_t, int, uint64_t) { return static_cast<uint64_t>(*pitch) * height; },
      [](uint64_t key) { TESSERA_REAL(cuMemFree_v2)(key); });
}

template <typename Desc, typename Real>
[[gnu::cold, gnu::noinline]] CUresult CreateArray(CUarray* array, const Desc* desc,
                                                  uint64_t depth, Real real) {
  if (EnsureInit() != kEnforce || array == nullptr || desc == nullptr) return real(array, desc);
  const uint64_t estimate =
      ArrayBytes(desc->Width, desc->Height, depth, desc->Format, desc->NumChannels);
  return Settled(
      Space::kArray, estimate, "cuArrayCreate",
      [&](uint64_t* key) {
        CUresult r = real(array, desc);
        *key = reinterpret_cast<uint64_t>(*array);
        return r;
      },
      [](uint64_t key, int ordinal, uint64_t est) {
        return ArrayActual(reinterpret_cast<CUarray>(key), ordinal, est);
      },
      [](uint64_t key) { TESSERA_REAL(cuArrayDestroy)(reinterpret_cast<CUarray>(key)); });
}

// The driver first; then where the handle is mapped (accountant.h: a
// released handle stays charged while mapped).
[[gnu::cold, gnu::noinline]] CUresult MapHandle(CUdeviceptr ptr, size_t size, size_t offset,
                                                CUmemGenericAllocationHandle handle,
                                                unsigned long long flags) {
  EnsureInit();
  const CUresult r = TESSERA_REAL(cuMemMap)(ptr, size, offset, handle, flags);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    acct->Map(ptr, size, handle);
  return r;
}

[[gnu::cold, gnu::noinline]] CUresult UnmapRange(CUdeviceptr ptr, size_t size) {
  EnsureInit();
  const CUresult r = TESSERA_REAL(cuMemUnmap)(ptr, size);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    acct->Unmap(ptr, size);
  return r;
}

}  // namespace

namespace hooks {

// Fast path in each hook below: one acquire load and one branch when no limit
// applies (see runtime.h); everything else is in the cold helpers.

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemAlloc)(dptr, bytesize);
  return AllocLinear(dptr, bytesize, TESSERA_LAZY(cuMemAlloc), "cuMemAlloc");
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemAlloc_v2)(dptr, bytesize);
  return AllocLinear(dptr, bytesize, TESSERA_LAZY(cuMemAlloc_v2), "cuMemAlloc_v2");
}

CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int elem) noexcept {
  if (PassThrough()) [[likely]]
    return TESSERA_REAL(cuMemAllocPitch)(dptr, pitch, width, height, elem);
  return AllocPitch(dptr, pitch, width, height, elem, TESSERA_LAZY(cuMemAllocPitch));
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int elem) noexcept {
  if (PassThrough()) [[likely]]
    return TESSERA_REAL(cuMemAllocPitch_v2)(dptr, pitch, width, height, elem);
  return AllocPitch(dptr, pitch, width, height, elem, TESSERA_LAZY(cuMemAllocPitch_v2));
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
  auto real = [flags](CUdeviceptr* p, size_t n) {
    return TESSERA_REAL(cuMemAllocManaged)(p, n, flags);
  };
  if (EnsureInit() == kEnforce && !CurrentConfig().count_managed) return real(dptr, bytesize);
  return AllocLinear(dptr, bytesize, real, "cuMemAllocManaged");
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemFree)(dptr);
  EnsureInit();
  return Freed(Space::kDevicePtr, dptr, [&] { return TESSERA_REAL(cuMemFree)(dptr); });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemFree_v2)(dptr);
  EnsureInit();
  return Freed(Space::kDevicePtr, dptr, [&] { return TESSERA_REAL(cuMemFree_v2)(dptr); });
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemCreate)(handle, size, prop, flags);
  auto real = [&](uint64_t* key) {
    CUresult r = TESSERA_REAL(cuMemCreate)(handle, size, prop, flags);
    *key = handle != nullptr ? *handle : 0;
    return r;
  };
  // Only device-located memory is the GPU's: host and host-NUMA locations
  // (NCCL host buffers) pass uncounted, and so does a device not in the share.
  // The location's id is a CUDA ordinal.
  Accountant* acct = EnsureInit() == kEnforce ? CurrentAccountant() : nullptr;
  const Gpu gpu = acct != nullptr && prop != nullptr && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE
                      ? GpuOfOrdinal(prop->location.id)
                      : Gpu{};
  if (!gpu.Shared() || handle == nullptr || size == 0) {
    uint64_t key;
    return real(&key);
  }
  if (CUresult r = Admit(*acct, gpu, size, "cuMemCreate"); r != CUDA_SUCCESS) return r;
  uint64_t key = 0;
  if (CUresult r = real(&key); r != CUDA_SUCCESS) {
    acct->Unreserve(gpu.index, size);
    return r;
  }
  if (!acct->Track(Space::kVmmHandle, key, gpu.index, size)) {
    TESSERA_REAL(cuMemRelease)(key);
    acct->Unreserve(gpu.index, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemRelease)(handle);
  EnsureInit();
  return Freed(Space::kVmmHandle, handle, [&] { return TESSERA_REAL(cuMemRelease)(handle); });
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemRetainAllocationHandle)(handle, addr);
  EnsureInit();
  CUresult r = TESSERA_REAL(cuMemRetainAllocationHandle)(handle, addr);
  // The driver hands back the same handle value, one reference more: the
  // memory is freed only when every reference is released.
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    acct->Retain(Space::kVmmHandle, *handle);
  return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemMap)(ptr, size, offset, handle, flags);
  return MapHandle(ptr, size, offset, handle, flags);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemUnmap)(ptr, size);
  return UnmapRange(ptr, size);
}

CUresult cuArrayCreate(CUarray* array, const CUDA_ARRAY_DESCRIPTOR_v1* desc) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuArrayCreate)(array, desc);
  return CreateArray(array, desc, 0, TESSERA_LAZY(cuArrayCreate));
}

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuArrayCreate_v2)(array, desc);
  return CreateArray(array, desc, 0, TESSERA_LAZY(cuArrayCreate_v2));
}

CUresult cuArray3DCreate(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuArray3DCreate)(array, desc);
  return CreateArray(array, desc, desc != nullptr ? desc->Depth : 0,
                     TESSERA_LAZY(cuArray3DCreate));
}

CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuArray3DCreate_v2)(array, desc);
  return CreateArray(array, desc, desc != nullptr ? desc->Depth : 0,
                     TESSERA_LAZY(cuArray3DCreate_v2));
}

CUresult cuArrayDestroy(CUarray array) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuArrayDestroy)(array);
  EnsureInit();
  return Freed(Space::kArray, reinterpret_cast<uint64_t>(array),
               [&] { return TESSERA_REAL(cuArrayDestroy)(array); });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* mipmap, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) noexcept {
  auto real = [&](uint64_t* key) {
    CUresult r = TESSERA_REAL(cuMipmappedArrayCreate)(mipmap, desc, levels);
    if (key != nullptr && mipmap != nullptr) *key = reinterpret_cast<uint64_t>(*mipmap);
    return r;
  };
  if (PassThrough()) [[likely]] return real(nullptr);
  if (EnsureInit() != kEnforce || mipmap == nullptr || desc == nullptr) return real(nullptr);
  const uint64_t estimate = MipmappedBytes(desc->Width, desc->Height, desc->Depth, desc->Format,
                                           desc->NumChannels, levels);
  return Settled(
      Space::kMipmap, estimate, "cuMipmappedArrayCreate", real,
      [](uint64_t key, int ordinal, uint64_t est) {
        return MipmapActual(reinterpret_cast<CUmipmappedArray>(key), ordinal, est);
      },
      [](uint64_t key) {
        TESSERA_REAL(cuMipmappedArrayDestroy)(reinterpret_cast<CUmipmappedArray>(key));
      });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray mipmap) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMipmappedArrayDestroy)(mipmap);
  EnsureInit();
  return Freed(Space::kMipmap, reinterpret_cast<uint64_t>(mipmap),
               [&] { return TESSERA_REAL(cuMipmappedArrayDestroy)(mipmap); });
}

}  // namespace hooks
}  // namespace tessera::cuda
