// Fake cuGetProcAddress / _v2: picks the exported variant the way the real
// driver documents it: per-thread-stream flag -> _ptsz / _ptds; _v2 where the
// caller's cudaVersion is new enough; else the base name. A cudaVersion newer
// than the driver is CUDA_ERROR_INVALID_VALUE; an unknown name is success with
// a NULL pointer. Looks names up in its own table, never through dlsym.
#include <cstring>
#include <string>

#include "fake_cuda/fake_state.h"

extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void**);
CUresult cuEventRecord_ptsz(CUevent, CUstream);
CUresult cuStreamSynchronize_ptsz(CUstream);
CUresult cuStreamQuery_ptsz(CUstream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
}

namespace {

struct Entry {
  const char* name;
  void* fn;
};

#define E(f) {#f, reinterpret_cast<void*>(&f)}
const Entry kTable[] = {
    E(cuInit), E(cuDriverGetVersion), E(cuDeviceGetCount), E(cuDeviceGet),
    E(cuDevicePrimaryCtxRetain), E(cuCtxSetCurrent), E(cuCtxGetDevice), E(cuDeviceTotalMem),
    E(cuDeviceTotalMem_v2), E(cuMemGetInfo), E(cuMemGetInfo_v2), E(cuMemAlloc), E(cuMemAlloc_v2),
    E(cuMemAllocManaged), E(cuMemAllocPitch), E(cuMemAllocPitch_v2), E(cuMemFree),
    E(cuMemFree_v2), E(cuLaunchKernel), E(cuLaunchKernel_ptsz), E(cuDeviceGetMemPool),
    E(cuDeviceGetDefaultMemPool), E(cuMemPoolCreate), E(cuMemPoolDestroy),
    E(cuMemPoolGetAttribute), E(cuMemPoolTrimTo), E(cuMemAllocAsync), E(cuMemAllocAsync_ptsz),
    E(cuMemAllocFromPoolAsync), E(cuMemAllocFromPoolAsync_ptsz), E(cuMemFreeAsync),
    E(cuMemFreeAsync_ptsz), E(cuMemGetAllocationGranularity), E(cuMemCreate), E(cuMemRelease),
    E(cuMemAddressReserve), E(cuMemAddressFree), E(cuMemMap), E(cuMemUnmap),
    E(cuMemRetainAllocationHandle), E(cuArrayCreate), E(cuArrayCreate_v2), E(cuArray3DCreate),
    E(cuArray3DCreate_v2), E(cuArrayDestroy), E(cuMipmappedArrayCreate),
    E(cuMipmappedArrayDestroy), E(cuArrayGetMemoryRequirements),
    E(cuMipmappedArrayGetMemoryRequirements), E(cuGraphCreate), E(cuGraphDestroy),
    E(cuGraphAddMemAllocNode), E(cuGraphInstantiateWithFlags), E(cuGraphExecDestroy),
    E(cuGraphLaunch), E(cuGraphLaunch_ptsz), E(cuDeviceGraphMemTrim),
    E(cuDeviceGetGraphMemAttribute), E(cuGetProcAddress), E(cuGetProcAddress_v2),
    E(cuLaunchKernelEx), E(cuLaunchKernelEx_ptsz), E(cuLaunchCooperativeKernel),
    E(cuLaunchCooperativeKernel_ptsz), E(cuLaunch), E(cuLaunchGrid), E(cuLaunchGridAsync),
    E(cuCtxGetCurrent), E(cuCtxSynchronize), E(cuStreamCreate), E(cuStreamCreateWithPriority),
    E(cuStreamDestroy_v2), E(cuStreamSynchronize), E(cuStreamSynchronize_ptsz), E(cuStreamQuery),
    E(cuStreamQuery_ptsz), E(cuEventCreate), E(cuEventDestroy), E(cuEventDestroy_v2),
    E(cuEventRecord), E(cuEventRecord_ptsz), E(cuEventQuery), E(cuEventSynchronize),
    E(cuEventElapsedTime), E(cuEventElapsedTime_v2), E(cuStreamBeginCapture),
    E(cuStreamBeginCapture_ptsz), E(cuStreamBeginCapture_v2), E(cuStreamBeginCapture_v2_ptsz),
    E(cuStreamEndCapture), E(cuStreamIsCapturing), E(cuStreamGetCaptureInfo),
    E(cuStreamGetCaptureInfo_ptsz), E(cuStreamGetCaptureInfo_v2), E(cuStreamGetCaptureInfo_v3),
    E(cuThreadExchangeStreamCaptureMode), E(cuDeviceGetUuid), E(cuDeviceGetUuid_v2),
    E(cuDevicePrimaryCtxRelease), E(cuDevicePrimaryCtxRelease_v2), E(cuDevicePrimaryCtxReset),
    E(cuDevicePrimaryCtxReset_v2), E(cuCtxCreate), E(cuCtxCreate_v2), E(cuCtxCreate_v3),
    E(cuCtxCreate_v4), E(cuCtxDestroy), E(cuCtxDestroy_v2),
};
#undef E

void* Find(const std::string& name) {
  for (const Entry& e : kTable) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

// The cudaVersion from which `base` resolves to its _v2 variant.
int V2Since(const char* base) {
  if (std::strcmp(base, "cuGetProcAddress") == 0) return 12000;
  if (std::strcmp(base, "cuDeviceGetUuid") == 0) return 11040;
  return 3020;
}

CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (version > fake::S().driver_version) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::string base(symbol);
  void* fn = nullptr;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
    fn = Find(base + "_ptsz");
    if (fn == nullptr) fn = Find(base + "_ptds");
  }
  if (fn == nullptr && version >= V2Since(symbol)) fn = Find(base + "_v2");
  if (fn == nullptr) fn = Find(base);
  *pfn = fn;
  if (status != nullptr) {
    *status = fn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  return Lookup(symbol, pfn, version, flags, status);
}
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return Lookup(symbol, pfn, version, flags, nullptr);
}

}  // extern "C"
