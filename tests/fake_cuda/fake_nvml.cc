// A fake libnvidia-ml.so.1: the NVML calls libtessera-cuda.so, the node
// agent's NVML reader (src/nvml) and their tests make. Devices and memory as
// in fake_cuda.cc's variables (FAKE_CUDA_DEVICES, default 2; FAKE_CUDA_MEM_MIB,
// default 1024); NVML sees the whole card free (it cannot see the fake
// driver's per-process usage) unless a test sets a load
// (tessera_fake_nvml_set_load). Also, read at each call:
//   FAKE_NVML_NAME  marketing name of every device (default "NVIDIA H100 80GB HBM3")
//   FAKE_NVML_SMS   multiprocessor count (default 132)
//   FAKE_NVML_RESERVED_MIB  the driver's reserve nvmlDeviceGetMemoryInfo_v2
//                   reports (default 0)
// NVML enumerates every device in PCI order (CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER are CUDA's, not NVML's): device i is the fake driver's
// physical device i, with the same UUID (fake_uuid.h), on NUMA node i % 2. Tests steer it through the exported tessera_fake_nvml_*
// functions below (find them with dlsym).
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <algorithm>
#include <nvml.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>

#include "fake_cuda/fake_uuid.h"

namespace {
constexpr unsigned kMaxDevices = 16;

uint64_t EnvU(const char* name, uint64_t def) {
  const char* v = getenv(name);
  return v != nullptr ? strtoull(v, nullptr, 10) : def;
}
unsigned Devices() {
  const int listed = fake::VisibleUuidCount();  // a container's GPUs (fake_uuid.h)
  return static_cast<unsigned>(EnvU("FAKE_CUDA_DEVICES", listed > 0 ? listed : 2));
}
uint64_t Total() { return EnvU("FAKE_CUDA_MEM_MIB", 1024) << 20; }
// Device handles are index + 1.
unsigned IndexOf(nvmlDevice_t d) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(d)) - 1; }
nvmlDevice_t HandleOf(unsigned i) { return reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(i + 1)); }

// One event set: what each device registered for, and the queued events.
struct EventSet {
  unsigned long long types[kMaxDevices] = {};
  std::deque<nvmlEventData_t> queue;
};

// Events and injected faults; everything under mu.
struct Control {
  std::mutex mu;
  std::condition_variable cv;
  std::set<EventSet*> sets;
  bool lost[kMaxDevices] = {};
  uint64_t used[kMaxDevices] = {};  // bytes nvmlDeviceGetMemoryInfo reports in use
  int util[kMaxDevices] = {};       // percent; < 0: nvmlDeviceGetUtilizationRates is not supported
};
Control& C() {
  static Control c;
  return c;
}

// NVML_ERROR_GPU_IS_LOST for a device a test marked lost; INVALID_ARGUMENT
// for a handle that names no device.
nvmlReturn_t Check(nvmlDevice_t d) {
  const unsigned i = IndexOf(d);
  if (i >= Devices() || i >= kMaxDevices) return NVML_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(C().mu);
  return C().lost[i] ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

nvmlReturn_t CopyOut(const char* text, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return NVML_SUCCESS;
}
}  // namespace

extern "C" {

// See fake_cuda.cc: defined there too, to test RTLD_NEXT from that library.
int tessera_fake_next_marker = 2;

// Test controls. Queue a critical-XID event for device `index` on every set
// registered for XID events on it.
void tessera_fake_nvml_inject_xid(unsigned index, unsigned long long xid) {
  std::lock_guard<std::mutex> lock(C().mu);
  for (EventSet* set : C().sets) {
    if (index < kMaxDevices && (set->types[index] & nvmlEventTypeXidCriticalError)) {
      nvmlEventData_t e{};
      e.device = HandleOf(index);
      e.eventType = nvmlEventTypeXidCriticalError;
      e.eventData = xid;
      e.gpuInstanceId = 0xFFFFFFFF;
      e.computeInstanceId = 0xFFFFFFFF;
      set->queue.push_back(e);
    }
  }
  C().cv.notify_all();
}
// Device `index`'s queries fail with NVML_ERROR_GPU_IS_LOST while `lost`.
void tessera_fake_nvml_set_lost(unsigned index, int lost) {
  std::lock_guard<std::mutex> lock(C().mu);
  if (index < kMaxDevices) C().lost[index] = lost != 0;
}
// What device `index` reports in use: memory (nvmlDeviceGetMemoryInfo) and
// utilization (nvmlDeviceGetUtilizationRates; percent < 0: NOT_SUPPORTED).
void tessera_fake_nvml_set_load(unsigned index, unsigned long long used_mib, int util_percent) {
  std::lock_guard<std::mutex> lock(C().mu);
  if (index >= kMaxDevices) return;
  C().used[index] = used_mib << 20;
  C().util[index] = util_percent;
}
// Events queued and not yet taken by nvmlEventSetWait_v2.
unsigned tessera_fake_nvml_pending_events() {
  std::lock_guard<std::mutex> lock(C().mu);
  size_t n = 0;
  for (EventSet* set : C().sets) n += set->queue.size();
  return static_cast<unsigned>(n);
}
// Event sets not yet freed.
unsigned tessera_fake_nvml_open_event_sets() {
  std::lock_guard<std::mutex> lock(C().mu);
  return static_cast<unsigned>(C().sets.size());
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlInit_v2() { return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = Devices();
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (i >= Devices()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = HandleOf(i);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int* i) {
  *i = IndexOf(d);
  return *i < Devices() ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}
// As the real one: v1's used counts the driver's reserve
// (FAKE_NVML_RESERVED_MIB) with what processes hold; v2 tells them apart.
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(C().mu);
  m->total = Total();
  m->used = std::min<uint64_t>(C().used[IndexOf(d)] + (EnvU("FAKE_NVML_RESERVED_MIB", 0) << 20), Total());
  m->free = Total() - m->used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(C().mu);
  const int percent = C().util[IndexOf(d)];
  if (percent < 0) return NVML_ERROR_NOT_SUPPORTED;
  u->gpu = static_cast<unsigned>(percent);
  u->memory = 0;
  return NVML_SUCCESS;
}
// As the real one: total = reserved + used + free, the driver's reserve
// (FAKE_NVML_RESERVED_MIB, default 0) apart from used.
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(C().mu);
  m->total = Total();
  m->reserved = std::min<uint64_t>(EnvU("FAKE_NVML_RESERVED_MIB", 0) << 20, Total());
  m->used = std::min<uint64_t>(C().used[IndexOf(d)], Total() - m->reserved);
  m->free = Total() - m->reserved - m->used;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  const char* v = getenv("FAKE_NVML_NAME");
  return CopyOut(v != nullptr ? v : "NVIDIA H100 80GB HBM3", name, length);
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  char buf[fake::kUuidChars + 1];
  fake::UuidString(IndexOf(d), buf);
  return CopyOut(buf, uuid, length);
}
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t* a) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  *a = nvmlDeviceAttributes_t{};
  a->multiprocessorCount = static_cast<unsigned>(EnvU("FAKE_NVML_SMS", 132));
  a->memorySizeMB = Total() >> 20;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t d, unsigned int size, unsigned long* set,
                                         nvmlAffinityScope_t scope) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  if (size == 0 || set == nullptr || scope != NVML_AFFINITY_SCOPE_NODE) return NVML_ERROR_INVALID_ARGUMENT;
  memset(set, 0, size * sizeof(unsigned long));
  set[0] = 1UL << (IndexOf(d) % 2);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  auto* s = new EventSet;
  std::lock_guard<std::mutex> lock(C().mu);
  C().sets.insert(s);
  *set = reinterpret_cast<nvmlEventSet_t>(s);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  auto* s = reinterpret_cast<EventSet*>(set);
  std::lock_guard<std::mutex> lock(C().mu);
  if (C().sets.erase(s) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  delete s;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long* types) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  *types = nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeSingleBitEccError;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
  if (nvmlReturn_t r = Check(d); r != NVML_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(C().mu);
  auto* s = reinterpret_cast<EventSet*>(set);
  if (C().sets.count(s) == 0) return NVML_ERROR_INVALID_ARGUMENT;
  s->types[IndexOf(d)] |= types;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  auto* s = reinterpret_cast<EventSet*>(set);
  std::unique_lock<std::mutex> lock(C().mu);
  if (C().sets.count(s) == 0 || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!C().cv.wait_for(lock, std::chrono::milliseconds(timeoutms), [&] { return !s->queue.empty(); })) {
    return NVML_ERROR_TIMEOUT;
  }
  *data = s->queue.front();
  s->queue.pop_front();
  return NVML_SUCCESS;
}

}  // extern "C"
