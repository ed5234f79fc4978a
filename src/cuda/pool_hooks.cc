// Hooks of stream-ordered allocation, memory pools and graph memory. Pools
// cache freed memory, so a pool is charged by its reserved bytes, not by the
// sizes asked of it; the graph pool likewise, read after each launch.
//
// On a capturing stream (StreamCapturing, runtime.h) a stream-ordered
// allocation or free is a node of the graph: nothing is allocated or freed
// until the graph runs. Such calls pass through, neither admitted nor
// charged nor released; the graph's memory is charged by the graph pool's
// reserve after cuGraphLaunch.
#include <cstdint>

#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/launch_gate.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

uint64_t PoolAttr(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t v = 0;
  if (TESSERA_REAL(cuMemPoolGetAttribute)(pool, attr, &v) != CUDA_SUCCESS) return 0;
  return v;
}

uint64_t Key(CUmemoryPool pool) { return reinterpret_cast<uint64_t>(pool); }

// One stream-ordered allocation from `pool` on `gpu` (Shared()). `alloc`
// calls the driver, `free_async` undoes it.
template <typename Alloc, typename FreeAsync>
CUresult FromPool(Accountant& acct, Gpu gpu, CUmemoryPool pool, CUdeviceptr* dptr, size_t bytes,
                  const char* api, Alloc alloc, FreeAsync free_async) {
  // Bring the pool's charge up to date, then admit the growth this request
  // needs at least (what does not fit in the pool's unused reserve).
  const uint64_t reserved0 = PoolAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  const uint64_t used0 = PoolAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  acct.SetPoolReserved(Key(pool), gpu.index, reserved0, /*force=*/true);
  const uint64_t headroom = reserved0 > used0 ? reserved0 - used0 : 0;
  const uint64_t prepaid = bytes > headroom ? bytes - headroom : 0;
  if (prepaid != 0) {
    if (CUresult r = Admit(acct, gpu, prepaid, api); r != CUDA_SUCCESS) return r;
  }
  if (CUresult r = alloc(); r != CUDA_SUCCESS) {
    acct.Unreserve(gpu.index, prepaid);
    return r;
  }
  // Settle on what the pool really reserved (its granularity rounds up).
  const uint64_t reserved1 = PoolAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  bool ok = acct.SetPoolReserved(Key(pool), gpu.index, reserved1, /*force=*/false, prepaid);
  if (ok) ok = acct.Track(Space::kAsyncPtr, *dptr, gpu.index, 0, Key(pool));
  if (!ok) {
    free_async(*dptr);
    TESSERA_REAL(cuMemPoolTrimTo)(pool, used0);
    RefreshPool(acct, Key(pool));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

template <typename Real, typename RealFree>
[[gnu::cold, gnu::noinline]] CUresult AllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream,
                                                 bool ptsz, Real real, RealFree real_free) {
  Accountant* acct = EnsureInit() == kEnforce ? CurrentAccountant() : nullptr;
  const Gpu gpu = acct != nullptr ? CurrentGpu() : Gpu{};
  CUmemoryPool pool = nullptr;
  if (!gpu.Shared() || dptr == nullptr || bytes == 0 || StreamCapturing(stream, ptsz) ||
      TESSERA_REAL(cuDeviceGetMemPool)(&pool, gpu.ordinal) != CUDA_SUCCESS) {
    return real(dptr, bytes, stream);
  }
  return FromPool(
      *acct, gpu, pool, dptr, bytes, "cuMemAllocAsync", [&] { return real(dptr, bytes, stream); },
      [&](CUdeviceptr p) { real_free(p, stream); });
}

template <typename Real, typename RealFree>
[[gnu::cold, gnu::noinline]] CUresult AllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes,
                                                         CUmemoryPool pool, CUstream stream,
                                                         bool ptsz, Real real, RealFree real_free) {
  Accountant* acct = EnsureInit() == kEnforce ? CurrentAccountant() : nullptr;
  if (acct == nullptr || dptr == nullptr || bytes == 0 || pool == nullptr ||
      StreamCapturing(stream, ptsz)) {
    return real(dptr, bytes, pool, stream);
  }
  // A pool we saw created on the host (or on a device not in the share) is
  // not counted; one we did not see created (a device's default pool) is on
  // the current device.
  if (acct->Contains(Space::kHostPool, Key(pool))) return real(dptr, bytes, pool, stream);
  const int index = acct->PoolGpu(Key(pool));
  const Gpu gpu = index >= 0 ? Gpu{OrdinalOfIndex(index), index} : CurrentGpu();
  if (!gpu.Shared()) return real(dptr, bytes, pool, stream);
  return FromPool(
      *acct, gpu, pool, dptr, bytes, "cuMemAllocFromPoolAsync",
      [&] { return real(dptr, bytes, pool, stream); },
      [&](CUdeviceptr p) { real_free(p, stream); });
}

template <typename RealFree>
[[gnu::cold, gnu::noinline]] CUresult FreeAsync(CUdeviceptr dptr, CUstream stream, bool ptsz,
                                                RealFree real_free) {
  EnsureInit();
  CUresult r = real_free(dptr, stream);
  Accountant* acct = CurrentAccountant();
  if (r != CUDA_SUCCESS || acct == nullptr || StreamCapturing(stream, ptsz)) return r;
  if (uint64_t pool = acct->PoolOf(dptr); pool != 0) {
    acct->Release(Space::kAsyncPtr, dptr);
    RefreshPool(*acct, pool);
  } else {
    acct->Release(Space::kDevicePtr, dptr);  // cuMemFreeAsync of cuMemAlloc memory
  }
  return r;
}

template <typename Real>
[[gnu::cold, gnu::noinline]] CUresult GraphLaunch(CUgraphExec exec, CUstream stream, bool ptsz,
                                                  Real real) {
  EnsureInit();
  // The whole graph is one launch at the gate, costed by its measured time
  // (launched into a capture, a child graph: passes, see LaunchGate).
  LaunchGate* gate = CurrentGate();
  LaunchGate::Ticket t;
  if (gate != nullptr) t = gate->Before(exec, stream, ptsz);
  CUresult r = real(exec, stream);
  if (gate != nullptr) gate->After(t, r);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS) {
    RefreshGraph(*acct, CurrentGpu());
  }
  return r;
}

}  // namespace

namespace hooks {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemAllocAsync)(dptr, bytesize, stream);
  return AllocAsync(dptr, bytesize, stream, false, TESSERA_LAZY(cuMemAllocAsync),
                    TESSERA_LAZY(cuMemFreeAsync));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemAllocAsync_ptsz)(dptr, bytesize, stream);
  return AllocAsync(dptr, bytesize, stream, true, TESSERA_LAZY(cuMemAllocAsync_ptsz),
                    TESSERA_LAZY(cuMemFreeAsync_ptsz));
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream stream) noexcept {
  if (PassThrough()) [[likely]]
    return TESSERA_REAL(cuMemAllocFromPoolAsync)(dptr, bytesize, pool, stream);
  return AllocFromPoolAsync(dptr, bytesize, pool, stream, false,
                            TESSERA_LAZY(cuMemAllocFromPoolAsync), TESSERA_LAZY(cuMemFreeAsync));
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream stream) noexcept {
  if (PassThrough()) [[likely]]
    return TESSERA_REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, bytesize, pool, stream);
  return AllocFromPoolAsync(dptr, bytesize, pool, stream, true,
                            TESSERA_LAZY(cuMemAllocFromPoolAsync_ptsz),
                            TESSERA_LAZY(cuMemFreeAsync_ptsz));
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemFreeAsync)(dptr, stream);
  return FreeAsync(dptr, stream, false, TESSERA_LAZY(cuMemFreeAsync));
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemFreeAsync_ptsz)(dptr, stream);
  return FreeAsync(dptr, stream, true, TESSERA_LAZY(cuMemFreeAsync_ptsz));
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemPoolCreate)(pool, props);
  EnsureInit();
  CUresult r = TESSERA_REAL(cuMemPoolCreate)(pool, props);
  Accountant* acct = CurrentAccountant();
  if (acct == nullptr || r != CUDA_SUCCESS || props == nullptr) return r;
  // The location's id is a CUDA ordinal. A pool on a device not in the share
  // is tracked as a host pool: never counted.
  const Gpu gpu = props->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? GpuOfOrdinal(props->location.id)
                                                                      : Gpu{};
  if (gpu.Shared()) {
    acct->SetPoolReserved(Key(*pool), gpu.index, 0, /*force=*/true);
  } else {
    acct->Track(Space::kHostPool, Key(*pool), 0, 0);
  }
  return r;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemPoolTrimTo)(pool, keep);
  EnsureInit();
  CUresult r = TESSERA_REAL(cuMemPoolTrimTo)(pool, keep);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    RefreshPool(*acct, Key(pool));
  return r;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuMemPoolDestroy)(pool);
  EnsureInit();
  CUresult r = TESSERA_REAL(cuMemPoolDestroy)(pool);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    acct->DropPool(Key(pool));
  return r;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuGraphLaunch)(exec, stream);
  return GraphLaunch(exec, stream, false, TESSERA_LAZY(cuGraphLaunch));
}

CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuGraphLaunch_ptsz)(exec, stream);
  return GraphLaunch(exec, stream, true, TESSERA_LAZY(cuGraphLaunch_ptsz));
}

CUresult cuDeviceGraphMemTrim(CUdevice device) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuDeviceGraphMemTrim)(device);
  EnsureInit();
  CUresult r = TESSERA_REAL(cuDeviceGraphMemTrim)(device);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    RefreshGraph(*acct, GpuOfOrdinal(device));
  return r;
}

}  // namespace hooks
}  // namespace tessera::cuda
