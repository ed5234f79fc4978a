// A fake libnvidia-ml.so.1: the few NVML calls libtessera-cuda.so and its
// tests make. Devices and memory as in fake_cuda.cc's variables; NVML sees
// the whole card free (it cannot see the fake driver's per-process usage).
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <cstdint>
#include <cstdlib>

namespace {
uint64_t EnvU(const char* name, uint64_t def) {
  const char* v = getenv(name);
  return v != nullptr ? strtoull(v, nullptr, 10) : def;
}
unsigned Devices() { return static_cast<unsigned>(EnvU("FAKE_CUDA_DEVICES", 2)); }
uint64_t Total() { return EnvU("FAKE_CUDA_MEM_MIB", 1024) << 20; }
// Device handles are index + 1.
unsigned IndexOf(nvmlDevice_t d) { return static_cast<unsigned>(reinterpret_cast<uintptr_t>(d)) - 1; }
}  // namespace

extern "C" {

// See fake_cuda.cc: defined there too, to test RTLD_NEXT from that library.
int tessera_fake_next_marker = 2;

nvmlReturn_t nvmlInit_v2() { return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown() { return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = Devices();
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (i >= Devices()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(i + 1));
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int* i) {
  *i = IndexOf(d);
  return *i < Devices() ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t* m) {
  m->total = Total();
  m->free = Total();
  m->used = 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t* m) {
  if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  m->total = Total();
  m->reserved = 0;
  m->free = Total();
  m->used = 0;
  return NVML_SUCCESS;
}

}  // extern "C"
