// Fake VMM handles, arrays and graphs (memory nodes; a simulated duration).
// A VMM handle's physical memory is freed as CUDA frees it: when the handle
// is released (every reference, cuMemRetainAllocationHandle included) and
// its last mapping is unmapped, whichever comes last.
#include "fake_cuda/fake_state.h"

using namespace fake;

namespace {

uint64_t FormatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    default:
      return 4;
  }
}

uint64_t Dim(size_t v) { return v == 0 ? 1 : v; }

CUresult NewArray(uint64_t* key, uint64_t raw) {
  std::lock_guard<std::mutex> l(S().mu);
  const uint64_t bytes = RoundUp(raw, kArrayPage);
  if (CUresult r = Take(t_device, bytes); r != CUDA_SUCCESS) return r;
  *key = NewAddress(bytes);
  S().arrays[*key] = {t_device, bytes};
  return CUDA_SUCCESS;
}

CUresult DropArray(uint64_t key) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().arrays.find(key);
  if (it == S().arrays.end()) return CUDA_ERROR_INVALID_HANDLE;
  Give(it->second.dev, it->second.bytes);
  S().arrays.erase(it);
  return CUDA_SUCCESS;
}

// The physical memory of a handle goes when it is released and unmapped.
void FreeIfUnusedLocked(std::map<uint64_t, Handle>::iterator it) {
  if (it->second.refs > 0 || it->second.maps > 0) return;
  if (it->second.dev >= 0) Give(it->second.dev, it->second.bytes);
  S().handles.erase(it);
}

CUresult LaunchGraph(CUgraphExec exec, CUstream s, bool ptsz) {
  std::lock_guard<std::mutex> l(S().mu);
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* st = ResolveStreamLocked(s, ptsz);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const Graph* g = reinterpret_cast<Graph*>(exec);
  if (Capture* c = CaptureOfLocked(st); c != nullptr) {
    if (CUresult r = CaptureUsableLocked(c); r != CUDA_SUCCESS) return r;
    c->graph->kernel_ns += g->kernel_ns;  // a child graph node
    return CUDA_SUCCESS;
  }
  if (CUresult r = ImplicitLocked(st); r != CUDA_SUCCESS) return r;
  uint64_t& have = S().graph_reserved[t_device];
  if (g->bytes > have) {
    if (CUresult r = Take(t_device, g->bytes - have); r != CUDA_SUCCESS) return r;
    have = g->bytes;
  }
  EnqueueLocked(st, g->kernel_ns);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp*,
                                       CUmemAllocationGranularity_flags) {
  *g = kVmmGranularity;
  return CUDA_SUCCESS;
}
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long) {
  if (size == 0 || size % kVmmGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(S().mu);
  int dev = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
  if (dev >= 0) {
    if (CUresult r = Take(dev, size); r != CUDA_SUCCESS) return r;
  }
  *handle = S().next_handle++;
  S().handles[*handle] = {dev, size, 1, 0};
  return CUDA_SUCCESS;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().handles.find(handle);
  if (it == S().handles.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.refs;
  FreeIfUnusedLocked(it);
  return CUDA_SUCCESS;
}
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr,
                             unsigned long long) {
  std::lock_guard<std::mutex> l(S().mu);
  *ptr = NewAddress(size);
  return CUDA_SUCCESS;
}
CUresult cuMemAddressFree(CUdeviceptr, size_t) { return CUDA_SUCCESS; }
// Maps `size` bytes of a handle not yet released at `ptr` (offset 0 only).
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().handles.find(handle);
  if (it == S().handles.end() || it->second.refs == 0 || offset != 0 || size == 0 ||
      size > it->second.bytes || S().mappings.count(ptr) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  S().mappings[ptr] = {handle, size};
  ++it->second.maps;
  return CUDA_SUCCESS;
}
// Unmaps every mapping that begins in [ptr, ptr + size); a released handle
// whose last mapping this was is freed. A range holding no mapping fails.
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  std::lock_guard<std::mutex> l(S().mu);
  auto& maps = S().mappings;
  auto first = maps.lower_bound(ptr), last = maps.lower_bound(ptr + size);
  if (first == last) return CUDA_ERROR_INVALID_VALUE;
  for (auto m = first; m != last; ++m) {
    auto h = S().handles.find(m->second.handle);
    if (h == S().handles.end()) continue;
    --h->second.maps;
    FreeIfUnusedLocked(h);
  }
  maps.erase(first, last);
  return CUDA_SUCCESS;
}
// Any address inside a mapping gives its handle, one reference more.
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  std::lock_guard<std::mutex> l(S().mu);
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  auto it = S().mappings.upper_bound(a);
  if (it == S().mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (a >= it->first + it->second.bytes) return CUDA_ERROR_INVALID_VALUE;
  *handle = it->second.handle;
  S().handles[it->second.handle].refs++;
  return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray* a, const CUDA_ARRAY_DESCRIPTOR* d) {
  uint64_t key = 0;
  CUresult r = NewArray(&key, Dim(d->Width) * Dim(d->Height) * d->NumChannels * FormatBytes(d->Format));
  *a = reinterpret_cast<CUarray>(key);
  return r;
}
CUresult cuArrayCreate(CUarray* a, const CUDA_ARRAY_DESCRIPTOR_v1* d) {
  CUDA_ARRAY_DESCRIPTOR v2{d->Width, d->Height, d->Format, d->NumChannels};
  return cuArrayCreate_v2(a, &v2);
}
CUresult cuArray3DCreate_v2(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  uint64_t key = 0;
  CUresult r = NewArray(&key, Dim(d->Width) * Dim(d->Height) * Dim(d->Depth) * d->NumChannels *
                                  FormatBytes(d->Format));
  *a = reinterpret_cast<CUarray>(key);
  return r;
}
CUresult cuArray3DCreate(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR_v1* d) {
  CUDA_ARRAY3D_DESCRIPTOR v2{d->Width, d->Height, d->Depth, d->Format, d->NumChannels, d->Flags};
  return cuArray3DCreate_v2(a, &v2);
}
CUresult cuArrayDestroy(CUarray a) { return DropArray(reinterpret_cast<uint64_t>(a)); }
CUresult cuMipmappedArrayCreate(CUmipmappedArray* m, const CUDA_ARRAY3D_DESCRIPTOR* d,
                                unsigned int levels) {
  uint64_t raw = 0, w = Dim(d->Width), h = Dim(d->Height), z = Dim(d->Depth);
  for (unsigned l = 0; l < (levels == 0 ? 1 : levels); ++l) {
    raw += RoundUp(w * h * z * d->NumChannels * FormatBytes(d->Format), kArrayPage);
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : 1;
    z = z > 1 ? z / 2 : 1;
  }
  uint64_t key = 0;
  CUresult r = NewArray(&key, raw);
  *m = reinterpret_cast<CUmipmappedArray>(key);
  return r;
}
CUresult cuMipmappedArrayDestroy(CUmipmappedArray m) {
  return DropArray(reinterpret_cast<uint64_t>(m));
}
CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUarray a, CUdevice) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().arrays.find(reinterpret_cast<uint64_t>(a));
  if (it == S().arrays.end()) return CUDA_ERROR_INVALID_HANDLE;
  req->size = it->second.bytes;
  req->alignment = kArrayPage;
  return CUDA_SUCCESS;
}
CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req,
                                               CUmipmappedArray m, CUdevice dev) {
  return cuArrayGetMemoryRequirements(req, reinterpret_cast<CUarray>(m), dev);
}

// Graphs: built with memory-allocation nodes or by stream capture (kernels,
// memory nodes: fake_capture.cc). Launching runs the graph's kernels for
// their summed duration and reserves its bytes in the device's graph pool,
// which keeps them until trimmed.
CUresult cuGraphCreate(CUgraph* g, unsigned int) {
  *g = reinterpret_cast<CUgraph>(new Graph());
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g) {
  delete reinterpret_cast<Graph*>(g);
  return CUDA_SUCCESS;
}
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph g, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  reinterpret_cast<Graph*>(g)->bytes += params->bytesize;
  params->dptr = NewAddress(params->bytesize);
  *node = reinterpret_cast<CUgraphNode>(g);
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph g, unsigned long long) {
  *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(g)));
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<Graph*>(exec);
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) { return LaunchGraph(exec, s, false); }
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) { return LaunchGraph(exec, s, true); }
void tessera_fake_cuda_set_graph_us(CUgraph g, uint64_t us) {
  std::lock_guard<std::mutex> l(S().mu);
  reinterpret_cast<Graph*>(g)->kernel_ns = us * 1000;
}
CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  std::lock_guard<std::mutex> l(S().mu);
  Give(dev, S().graph_reserved[dev]);
  S().graph_reserved[dev] = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void* value) {
  if (attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> l(S().mu);
  *static_cast<cuuint64_t*>(value) = S().graph_reserved[dev];
  return CUDA_SUCCESS;
}

}  // extern "C"
