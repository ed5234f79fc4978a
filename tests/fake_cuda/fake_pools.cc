// Fake stream-ordered allocation and memory pools: a pool reserves device
// memory in 2 MiB steps and keeps it after frees until trimmed.
#include "fake_cuda/fake_state.h"

using namespace fake;

namespace {

Pool* DefaultPool(int dev) {
  Pool*& p = S().default_pool[dev];
  if (p == nullptr) p = new Pool{dev};
  return p;
}

CUresult FromPool(CUdeviceptr* dptr, size_t bytes, Pool* pool) {
  std::lock_guard<std::mutex> l(S().mu);
  if (bytes == 0 || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t need = RoundUp(pool->used + bytes, kPoolStep);
  if (need > pool->reserved) {
    if (pool->dev >= 0) {
      if (CUresult r = Take(pool->dev, need - pool->reserved); r != CUDA_SUCCESS) return r;
    }
    pool->reserved = need;
  }
  pool->used += bytes;
  *dptr = NewAddress(bytes);
  S().async[*dptr] = {pool, bytes};
  return CUDA_SUCCESS;
}

// A stream-ordered allocation (dptr != nullptr) or free on `s`: on a
// capturing stream a memory node of the graph, which reserves nothing until
// the graph is launched (a free node frees nothing now); false when `s` is
// not capturing (or names no stream the fake knows: as before capture
// existed, the stream is not checked). `*r`: the call's result.
bool Captured(CUresult* r, CUdeviceptr* dptr, size_t bytes, CUstream s, bool ptsz) {
  std::lock_guard<std::mutex> l(S().mu);
  void* st = ResolveStreamLocked(s, ptsz);
  Capture* c = st != nullptr ? CaptureOfLocked(st) : nullptr;
  if (c == nullptr) return false;
  *r = CaptureUsableLocked(c);
  if (*r != CUDA_SUCCESS || dptr == nullptr) return true;
  if (bytes == 0) {
    *r = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  c->graph->bytes += bytes;
  *dptr = NewAddress(bytes);
  return true;
}

}  // namespace

extern "C" {

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(S().mu);
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(dev));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  return cuDeviceGetMemPool(pool, dev);
}
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  int dev = props->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? props->location.id : -1;
  *pool = reinterpret_cast<CUmemoryPool>(new Pool{dev});
  return CUDA_SUCCESS;
}
CUresult cuMemPoolDestroy(CUmemoryPool handle) {
  std::lock_guard<std::mutex> l(S().mu);
  Pool* pool = reinterpret_cast<Pool*>(handle);
  if (pool->dev >= 0) Give(pool->dev, pool->reserved);
  for (auto it = S().async.begin(); it != S().async.end();) {
    it = it->second.pool == pool ? S().async.erase(it) : std::next(it);
  }
  delete pool;
  return CUDA_SUCCESS;
}
CUresult cuMemPoolGetAttribute(CUmemoryPool handle, CUmemPool_attribute attr, void* value) {
  std::lock_guard<std::mutex> l(S().mu);
  Pool* pool = reinterpret_cast<Pool*>(handle);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = pool->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = pool->used;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}
CUresult cuMemPoolTrimTo(CUmemoryPool handle, size_t keep) {
  std::lock_guard<std::mutex> l(S().mu);
  Pool* pool = reinterpret_cast<Pool*>(handle);
  uint64_t target = RoundUp(pool->used > keep ? pool->used : keep, kPoolStep);
  if (target < pool->reserved) {
    if (pool->dev >= 0) Give(pool->dev, pool->reserved - target);
    pool->reserved = target;
  }
  return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = CUDA_SUCCESS; Captured(&r, dptr, bytes, s, false)) return r;
  Pool* pool;
  {
    std::lock_guard<std::mutex> l(S().mu);
    pool = DefaultPool(t_device);
  }
  return FromPool(dptr, bytes, pool);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  if (CUresult r = CUDA_SUCCESS; Captured(&r, dptr, bytes, s, true)) return r;
  return cuMemAllocAsync(dptr, bytes, s);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  if (CUresult r = CUDA_SUCCESS; Captured(&r, dptr, bytes, s, false)) return r;
  return FromPool(dptr, bytes, reinterpret_cast<Pool*>(pool));
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream s) {
  if (CUresult r = CUDA_SUCCESS; Captured(&r, dptr, bytes, s, true)) return r;
  return cuMemAllocFromPoolAsync(dptr, bytes, pool, s);
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  if (CUresult r = CUDA_SUCCESS; Captured(&r, nullptr, 0, s, false)) return r;
  {
    std::lock_guard<std::mutex> l(S().mu);
    auto it = S().async.find(dptr);
    if (it != S().async.end()) {
      it->second.pool->used -= it->second.bytes;
      S().async.erase(it);
      return CUDA_SUCCESS;
    }
  }
  return cuMemFree_v2(dptr);  // stream-ordered free of cuMemAlloc memory
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
  if (CUresult r = CUDA_SUCCESS; Captured(&r, nullptr, 0, s, true)) return r;
  return cuMemFreeAsync(dptr, s);
}

}  // extern "C"
