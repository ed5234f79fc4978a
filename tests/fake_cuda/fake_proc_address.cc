// Fake cuGetProcAddress / _v2: picks the exported variant the way the real
// driver documents it: per-thread-stream flag -> _ptsz / _ptds; _v2 where the
// caller's cudaVersion is new enough; else the base name. A cudaVersion newer
// than the driver is CUDA_ERROR_INVALID_VALUE; an unknown name, or one newer
// than the caller's cudaVersion, is success with a NULL pointer. Looks names
// up in its own table, never through dlsym.
//
// FAKE_CUDA_PROC_ADDRESS=internal: hands out, for every name, an internal
// entry point (a thunk into the same function) at an address no exported
// symbol has, as a real driver may; dlsym still finds the exported ones.
#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_cuda/fake_control.h"
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

// A function of its own (its own address) that calls F.
template <auto F>
struct Thunk;
template <typename R, typename... A, R (*F)(A...)>
struct Thunk<F> {
  static R Call(A... a) { return F(a...); }
};

struct Entry {
  const char* name;
  void* fn;        // the exported symbol
  void* internal;  // the internal entry point
};

#define E(f) {#f, reinterpret_cast<void*>(&f), reinterpret_cast<void*>(&Thunk<&f>::Call)}
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

const Entry* Find(const std::string& name) {
  for (const Entry& e : kTable) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

// The cudaVersion a base name first exists at (cudaTypedefs.h's oldest
// PFN_<name>_v<version>), for the hooked names newer than CUDA 3.0.
int Introduced(const char* base) {
  static const struct {
    const char* name;
    int since;
  } kIntroduced[] = {
      {"cuMipmappedArrayCreate", 5000}, {"cuMipmappedArrayDestroy", 5000},
      {"cuLaunchKernel", 4000}, {"cuMemAllocManaged", 6000}, {"cuLaunchCooperativeKernel", 9000},
      {"cuGraphLaunch", 10000}, {"cuMemCreate", 10020}, {"cuMemRelease", 10020},
      {"cuMemRetainAllocationHandle", 11000}, {"cuMemAllocAsync", 11020},
      {"cuMemAllocFromPoolAsync", 11020}, {"cuMemFreeAsync", 11020}, {"cuMemPoolCreate", 11020},
      {"cuMemPoolTrimTo", 11020}, {"cuMemPoolDestroy", 11020}, {"cuGetProcAddress", 11030},
      {"cuDeviceGraphMemTrim", 11040}, {"cuLaunchKernelEx", 11060},
      {"cuDevicePrimaryCtxRetain", 7000}, {"cuDevicePrimaryCtxRelease", 7000},
      {"cuMemMap", 10020}, {"cuMemUnmap", 10020},
  };
  for (const auto& i : kIntroduced) {
    if (std::strcmp(base, i.name) == 0) return i.since;
  }
  return 0;
}

bool Internal() {
  static const bool internal = [] {
    const char* v = getenv("FAKE_CUDA_PROC_ADDRESS");
    return v != nullptr && std::strcmp(v, "internal") == 0;
  }();
  return internal;
}

// The cudaVersion from which `base` resolves to its _v2 variant.
int V2Since(const char* base) {
  if (std::strcmp(base, "cuGetProcAddress") == 0) return 12000;
  if (std::strcmp(base, "cuDeviceGetUuid") == 0) return 11040;
  if (std::strcmp(base, "cuDevicePrimaryCtxRelease") == 0) return 11000;
  if (std::strcmp(base, "cuDevicePrimaryCtxReset") == 0) return 11000;
  if (std::strcmp(base, "cuCtxDestroy") == 0) return 4000;
  return 3020;
}

// Variants past _v2, newest first, as cudaTypedefs.h dates them.
struct Later {
  const char* base;
  const char* suffix;
  int since;
};
constexpr Later kLater[] = {{"cuCtxCreate", "_v4", 12050}, {"cuCtxCreate", "_v3", 11040}};

// The variant for the request in *found (nullptr when none); the driver's
// result and symbolStatus.
CUresult Pick(const char* symbol, int version, cuuint64_t flags, const Entry** found,
              CUdriverProcAddressQueryResult* status) {
  *found = nullptr;
  if (version > fake::S().driver_version) {
    *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::string base(symbol);
  const Entry* e = nullptr;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
    e = Find(base + "_ptsz");
    if (e == nullptr) e = Find(base + "_ptds");
  }
  for (const Later& l : kLater) {
    if (e == nullptr && base == l.base && version >= l.since) e = Find(base + l.suffix);
  }
  if (e == nullptr && version >= V2Since(symbol)) e = Find(base + "_v2");
  if (e == nullptr) e = Find(base);
  if (e != nullptr && version < Introduced(symbol)) {
    *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_SUCCESS;
  }
  *found = e;
  *status = e != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}

CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Entry* e = nullptr;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r = Pick(symbol, version, flags, &e, &st);
  if (status != nullptr) *status = st;
  if (r != CUDA_SUCCESS) return r;
  *pfn = e == nullptr ? nullptr : Internal() ? e->internal : e->fn;
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

CUresult tessera_fake_cuda_proc_address_abi(const char* symbol, int version, cuuint64_t flags,
                                            const char** abi) {
  const Entry* e = nullptr;
  CUdriverProcAddressQueryResult st;
  const CUresult r = Pick(symbol, version, flags, &e, &st);
  *abi = e != nullptr ? e->name : nullptr;
  return r;
}

}  // extern "C"
