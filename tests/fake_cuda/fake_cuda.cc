// A fake libcuda.so.1 for CI: host memory stands in for device memory, so
// libtessera-cuda.so runs end to end without a GPU. Exports the versioned
// names a real driver does (cuMemAlloc and cuMemAlloc_v2, _ptsz variants,
// cuGetProcAddress and _v2) and enough of the API for the library and its
// tests. Per process: each process sees its own devices.
//   FAKE_CUDA_DEVICES (default 2), FAKE_CUDA_MEM_MIB (default 1024 per
//   device), FAKE_CUDA_DRIVER_VERSION (default 12090), FAKE_CUDA_CONTEXT_MIB
//   (device memory each context takes while it exists, default 0 so suites
//   that do not ask for it see every byte of the card).
// Device order, as the real driver's (read once):
//   FAKE_CUDA_DEVICE_ORDER  comma list of physical (PCI-order) indexes: the
//                           order the driver enumerates devices in by default
//                           (CUDA's "fastest first"); default PCI order.
//   CUDA_DEVICE_ORDER       PCI_BUS_ID: PCI order, whatever the above says.
//   CUDA_VISIBLE_DEVICES    comma list of indexes into that order, or of GPU
//                           UUIDs (or unique prefixes of them), selecting and
//                           ordering the devices CUDA shows; the list ends at
//                           the first entry that names no device or one
//                           already listed; set and empty: no device.
// CUDA ordinals index everything per device below (and the test controls);
// cuDeviceGetUuid(_v2) gives the physical device's UUID (fake_uuid.h).
// Pools reserve in 2 MiB steps; arrays take whole 64 KiB pages; VMM handles
// need 2 MiB multiples; pitch is the width rounded up to 512 bytes. Kernels,
// graphs, streams and events run on a simulated clock (fake_launch.cc);
// streams can be captured into graphs (fake_capture.cc).
#include "fake_cuda/fake_state.h"

#include <pthread.h>
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fake_cuda/fake_uuid.h"

namespace fake {

State& S() {
  static State* s = new State();  // leaked: outlives every caller
  return *s;
}

uint64_t EnvU(const char* name, uint64_t def) {
  const char* v = getenv(name);
  return v != nullptr ? strtoull(v, nullptr, 10) : def;
}

namespace {

std::vector<std::string> SplitCommas(const char* v) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = v;; ++c) {
    if (*c == ',' || *c == '\0') {
      out.push_back(cur);
      cur.clear();
      if (*c == '\0') break;
    } else if (*c != ' ') {
      cur += *c;
    }
  }
  return out;
}

bool IsIndex(const std::string& s) {
  return !s.empty() && s.size() < 4 && s.find_first_not_of("0123456789") == std::string::npos;
}

// The physical device whose UUID `entry` is or uniquely begins, else -1.
int PhysicalByUuid(const std::string& entry, int physical_devices) {
  int found = -1;
  for (int p = 0; p < physical_devices; ++p) {
    char u[kUuidChars + 1];
    UuidString(static_cast<unsigned>(p), u);
    if (strncasecmp(u, entry.c_str(), entry.size()) != 0) continue;
    if (found >= 0) return -1;  // ambiguous
    found = p;
  }
  return found;
}

}  // namespace

State::State() {
  const int listed = VisibleUuidCount();  // a container's GPUs (fake_uuid.h)
  physical_devices = std::min(static_cast<int>(EnvU("FAKE_CUDA_DEVICES", listed > 0 ? listed : 2)), kMaxDevices);
  // The default enumeration: FAKE_CUDA_DEVICE_ORDER, unless PCI order is asked.
  std::vector<int> order;
  const char* fastest = getenv("FAKE_CUDA_DEVICE_ORDER");
  const char* asked = getenv("CUDA_DEVICE_ORDER");
  if (fastest != nullptr && (asked == nullptr || std::strcmp(asked, "PCI_BUS_ID") != 0)) {
    for (const std::string& e : SplitCommas(fastest)) {
      const int p = IsIndex(e) ? std::stoi(e) : -1;
      if (p < physical_devices && std::find(order.begin(), order.end(), p) == order.end() && p >= 0)
        order.push_back(p);
    }
  }
  for (int p = 0; p < physical_devices; ++p) {
    if (std::find(order.begin(), order.end(), p) == order.end()) order.push_back(p);
  }
  std::vector<int> visible = order;
  if (const char* v = getenv("CUDA_VISIBLE_DEVICES")) {
    visible.clear();
    for (const std::string& e : SplitCommas(v)) {
      int p = -1;
      if (IsIndex(e)) {
        const int i = std::stoi(e);
        p = i < static_cast<int>(order.size()) ? order[i] : -1;
      } else if (e.size() > 4) {
        p = PhysicalByUuid(e, physical_devices);
      }
      if (p < 0 || std::find(visible.begin(), visible.end(), p) != visible.end()) break;
      visible.push_back(p);
    }
  }
  devices = static_cast<int>(visible.size());
  for (int d = 0; d < devices; ++d) physical[d] = visible[d];
  mem_bytes = EnvU("FAKE_CUDA_MEM_MIB", 1024) << 20;
  driver_version = static_cast<int>(EnvU("FAKE_CUDA_DRIVER_VERSION", 12090));
  context_bytes = EnvU("FAKE_CUDA_CONTEXT_MIB", 0) << 20;
  // A fork while another thread is inside the fake must not leave the
  // child's copy of the lock held (the suites fork busy processes).
  pthread_atfork([] { S().mu.lock(); }, [] { S().mu.unlock(); }, [] { S().mu.unlock(); });
}

thread_local int t_device = 0;
thread_local CUcontext t_ctx = nullptr;

CUresult Take(int dev, uint64_t bytes) {
  State& s = S();
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (s.used[dev] + bytes > s.mem_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  s.used[dev] += bytes;
  return CUDA_SUCCESS;
}

void Give(int dev, uint64_t bytes) { S().used[dev] -= bytes; }

}  // namespace fake

extern "C" uint64_t tessera_fake_cuda_used_bytes(int dev) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  return dev >= 0 && dev < fake::kMaxDevices ? fake::S().used[dev] : 0;
}

namespace fake {

uint64_t NewAddress(uint64_t bytes) {
  State& s = S();
  uint64_t a = s.next_address;
  s.next_address += (bytes + 0xFFFF) & ~0xFFFFull;
  if (bytes == 0) s.next_address += 0x10000;
  return a;
}

}  // namespace fake

using namespace fake;

extern "C" {

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* v) {
  *v = S().driver_version;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* n) {
  *n = S().devices;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
// Contexts. The primary context of device d is the handle d + 1; created
// ones come from next_context. Each context costs context_bytes of its
// device while it exists (its first retain to its last release, or creation
// to destruction); a reset frees the primary context's memory, and the next
// retain takes it again (the real driver re-creates it at its next use).
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!S().primary_live[dev]) {
    if (CUresult r = Take(dev, S().context_bytes); r != CUDA_SUCCESS) return r;
    S().primary_live[dev] = true;
  }
  ++S().primary_refs[dev];
  *ctx = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(dev + 1));
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  if (S().primary_refs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--S().primary_refs[dev] == 0 && S().primary_live[dev]) {
    Give(dev, S().context_bytes);
    S().primary_live[dev] = false;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  if (S().primary_live[dev]) {
    Give(dev, S().context_bytes);
    S().primary_live[dev] = false;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int, CUdevice dev) {
  std::lock_guard<std::mutex> l(S().mu);
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = Take(dev, S().context_bytes); r != CUDA_SUCCESS) return r;
  *ctx = reinterpret_cast<CUcontext>(S().next_context++);
  S().contexts[reinterpret_cast<uint64_t>(*ctx)] = dev;
  t_device = dev;  // a created context is made current
  t_ctx = *ctx;
  return CUDA_SUCCESS;
}
CUresult cuCtxCreate(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v2(ctx, flags, dev);
}
CUresult cuCtxCreate_v3(CUcontext* ctx, CUexecAffinityParam*, int, unsigned int flags,
                        CUdevice dev) {
  return cuCtxCreate_v2(ctx, flags, dev);
}
CUresult cuCtxCreate_v4(CUcontext* ctx, CUctxCreateParams*, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v2(ctx, flags, dev);
}
CUresult cuCtxDestroy_v2(CUcontext ctx) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().contexts.find(reinterpret_cast<uint64_t>(ctx));
  if (it == S().contexts.end()) return CUDA_ERROR_INVALID_CONTEXT;
  Give(it->second, S().context_bytes);
  S().contexts.erase(it);
  if (t_ctx == ctx) {
    t_ctx = nullptr;
    t_device = -1;
  }
  return CUDA_SUCCESS;
}
CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }
CUresult cuCtxSetCurrent(CUcontext ctx) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().contexts.find(reinterpret_cast<uint64_t>(ctx));
  if (it != S().contexts.end()) {
    t_device = it->second;
    t_ctx = ctx;
  } else {
    t_device = static_cast<int>(reinterpret_cast<uintptr_t>(ctx)) - 1;
    t_ctx = nullptr;
  }
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice* d) {
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *d = t_device;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  UuidBytes(static_cast<unsigned>(S().physical[dev]), reinterpret_cast<unsigned char*>(uuid->bytes));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (dev < 0 || dev >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = S().mem_bytes;
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  size_t b = 0;
  CUresult r = cuDeviceTotalMem_v2(&b, dev);
  *bytes = b > 0xFFFFFFFFu ? 0xFFFFFFFFu : static_cast<unsigned>(b);
  return r;
}
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  std::lock_guard<std::mutex> l(S().mu);
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *total = S().mem_bytes;
  *free_bytes = S().mem_bytes - S().used[t_device];
  return CUDA_SUCCESS;
}
CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total) {
  size_t f, t;
  CUresult r = cuMemGetInfo_v2(&f, &t);
  *free_bytes = static_cast<unsigned>(f > 0xFFFFFFFFu ? 0xFFFFFFFFu : f);
  *total = static_cast<unsigned>(t > 0xFFFFFFFFu ? 0xFFFFFFFFu : t);
  return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  std::lock_guard<std::mutex> l(S().mu);
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = UnsafeCallLocked(); r != CUDA_SUCCESS) return r;  // not stream-ordered
  if (CUresult r = Take(t_device, bytes); r != CUDA_SUCCESS) return r;
  *p = NewAddress(bytes);
  S().linear[*p] = {t_device, bytes};
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr_v1* p, unsigned int bytes) {
  CUdeviceptr big = 0;
  CUresult r = cuMemAlloc_v2(&big, bytes);
  *p = static_cast<CUdeviceptr_v1>(big);  // the fake's addresses fit 32 bits
  return r;
}
CUresult cuMemAllocManaged(CUdeviceptr* p, size_t bytes, unsigned int) {
  return cuMemAlloc_v2(p, bytes);
}
CUresult cuMemAllocPitch_v2(CUdeviceptr* p, size_t* pitch, size_t width, size_t height,
                            unsigned int) {
  *pitch = (width + 511) & ~size_t{511};
  return cuMemAlloc_v2(p, *pitch * height);
}
CUresult cuMemAllocPitch(CUdeviceptr_v1* p, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int elem) {
  CUdeviceptr big = 0;
  size_t pt = 0;
  CUresult r = cuMemAllocPitch_v2(&big, &pt, width, height, elem);
  *p = static_cast<CUdeviceptr_v1>(big);
  *pitch = static_cast<unsigned>(pt);
  return r;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  std::lock_guard<std::mutex> l(S().mu);
  auto it = S().linear.find(p);
  if (it == S().linear.end()) return CUDA_ERROR_INVALID_VALUE;
  Give(it->second.dev, it->second.bytes);
  S().linear.erase(it);
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr_v1 p) { return cuMemFree_v2(p); }

// For the RTLD_NEXT test: the same symbol is defined in fake NVML, loaded
// after this library. Asked from here, RTLD_NEXT must find NVML's.
int tessera_fake_next_marker = 1;
// Not a tail call: dlsym must see this library as its caller.
void* fakecuda_LookupNextMarker() {
  void* p = dlsym(RTLD_NEXT, "tessera_fake_next_marker");
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

}  // extern "C"
