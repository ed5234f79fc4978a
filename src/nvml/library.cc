#include "nvml/library.h"

#include <dlfcn.h>

#include <algorithm>
#include <utility>

namespace tessera::nvml {

// Function pointers resolved once in Open; optional ones may be null.
struct Library::Api {
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetCount_v2) get_count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) get_handle = nullptr;
  decltype(&nvmlDeviceGetName) get_name = nullptr;
  decltype(&nvmlDeviceGetUUID) get_uuid = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) get_memory = nullptr;
  // Optional.
  decltype(&nvmlDeviceGetMemoryInfo_v2) get_memory_v2 = nullptr;
  decltype(&nvmlDeviceGetAttributes_v2) get_attributes = nullptr;
  decltype(&nvmlDeviceGetMemoryAffinity) get_memory_affinity = nullptr;
  decltype(&nvmlDeviceGetUtilizationRates) get_utilization = nullptr;
  decltype(&nvmlEventSetCreate) event_set_create = nullptr;
  decltype(&nvmlEventSetFree) event_set_free = nullptr;
  decltype(&nvmlDeviceGetSupportedEventTypes) get_supported_events = nullptr;
  decltype(&nvmlDeviceRegisterEvents) register_events = nullptr;
  decltype(&nvmlEventSetWait_v2) event_set_wait = nullptr;
};

namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn*& out) {
  out = reinterpret_cast<Fn*>(dlsym(handle, name));
}

Status Unsupported(const char* call) {
  return Status(StatusCode::kUnimplemented, std::string(call) + ": not in this NVIDIA driver's NVML");
}

}  // namespace

Result<std::unique_ptr<Library>> Library::Open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* detail = dlerror();
    return LibraryMissing(path, detail != nullptr ? detail : "");
  }
  auto api = std::make_unique<Api>();
  struct Required {
    const char* name;
    bool present;
  };
  Resolve(handle, "nvmlInit_v2", api->init);
  Resolve(handle, "nvmlShutdown", api->shutdown);
  Resolve(handle, "nvmlErrorString", api->error_string);
  Resolve(handle, "nvmlDeviceGetCount_v2", api->get_count);
  Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api->get_handle);
  Resolve(handle, "nvmlDeviceGetName", api->get_name);
  Resolve(handle, "nvmlDeviceGetUUID", api->get_uuid);
  Resolve(handle, "nvmlDeviceGetMemoryInfo", api->get_memory);
  const Required required[] = {
      {"nvmlInit_v2", api->init != nullptr},
      {"nvmlShutdown", api->shutdown != nullptr},
      {"nvmlErrorString", api->error_string != nullptr},
      {"nvmlDeviceGetCount_v2", api->get_count != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", api->get_handle != nullptr},
      {"nvmlDeviceGetName", api->get_name != nullptr},
      {"nvmlDeviceGetUUID", api->get_uuid != nullptr},
      {"nvmlDeviceGetMemoryInfo", api->get_memory != nullptr},
  };
  for (const Required& r : required) {
    if (!r.present) {
      dlclose(handle);
      return SymbolMissing(path, r.name);
    }
  }
  Resolve(handle, "nvmlDeviceGetMemoryInfo_v2", api->get_memory_v2);
  Resolve(handle, "nvmlDeviceGetAttributes_v2", api->get_attributes);
  Resolve(handle, "nvmlDeviceGetMemoryAffinity", api->get_memory_affinity);
  Resolve(handle, "nvmlDeviceGetUtilizationRates", api->get_utilization);
  Resolve(handle, "nvmlEventSetCreate", api->event_set_create);
  Resolve(handle, "nvmlEventSetFree", api->event_set_free);
  Resolve(handle, "nvmlDeviceGetSupportedEventTypes", api->get_supported_events);
  Resolve(handle, "nvmlDeviceRegisterEvents", api->register_events);
  Resolve(handle, "nvmlEventSetWait_v2", api->event_set_wait);

  if (nvmlReturn_t ret = api->init(); ret != NVML_SUCCESS) {
    Status st = NvmlStatus("nvmlInit_v2", ret, api->error_string(ret));
    dlclose(handle);
    return st;
  }
  return std::unique_ptr<Library>(new Library(path, handle, std::move(api)));
}

Library::Library(std::string path, void* handle, std::unique_ptr<Api> api)
    : path_(std::move(path)), handle_(handle), api_(std::move(api)) {}

Library::~Library() {
  api_->shutdown();
  dlclose(handle_);
}

Status Library::Check(const char* call, nvmlReturn_t ret) const {
  if (ret == NVML_SUCCESS) return Status::Ok();
  const char* text = api_->error_string(ret);
  return NvmlStatus(call, ret, text != nullptr ? text : "");
}

Result<unsigned> Library::DeviceCount() const {
  unsigned n = 0;
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetCount_v2", api_->get_count(&n)));
  return n;
}

Result<nvmlDevice_t> Library::DeviceByIndex(unsigned index) const {
  nvmlDevice_t device = nullptr;
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetHandleByIndex_v2", api_->get_handle(index, &device)));
  return device;
}

Result<std::string> Library::Name(nvmlDevice_t device) const {
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetName", api_->get_name(device, buf, sizeof buf)));
  return std::string(buf);
}

Result<std::string> Library::Uuid(nvmlDevice_t device) const {
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetUUID", api_->get_uuid(device, buf, sizeof buf)));
  return std::string(buf);
}

Result<uint64_t> Library::MemoryTotalBytes(nvmlDevice_t device) const {
  nvmlMemory_t memory{};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetMemoryInfo", api_->get_memory(device, &memory)));
  return static_cast<uint64_t>(memory.total);
}

Result<uint64_t> Library::MemoryUsedBytes(nvmlDevice_t device) const {
  if (api_->get_memory_v2 != nullptr) {
    nvmlMemory_v2_t memory{};
    memory.version = nvmlMemory_v2;
    if (api_->get_memory_v2(device, &memory) == NVML_SUCCESS) return static_cast<uint64_t>(memory.used);
  }
  nvmlMemory_t memory{};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetMemoryInfo", api_->get_memory(device, &memory)));
  return static_cast<uint64_t>(memory.used);
}

Result<double> Library::Utilization(nvmlDevice_t device) const {
  if (api_->get_utilization == nullptr) return Unsupported("nvmlDeviceGetUtilizationRates");
  nvmlUtilization_t rates{};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetUtilizationRates", api_->get_utilization(device, &rates)));
  return static_cast<double>(std::min(rates.gpu, 100u)) / 100.0;
}

Result<int> Library::SmCount(nvmlDevice_t device) const {
  if (api_->get_attributes == nullptr) return Unsupported("nvmlDeviceGetAttributes_v2");
  nvmlDeviceAttributes_t attributes{};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetAttributes_v2", api_->get_attributes(device, &attributes)));
  return static_cast<int>(attributes.multiprocessorCount);
}

Result<int> Library::NumaNode(nvmlDevice_t device) const {
  if (api_->get_memory_affinity == nullptr) return Unsupported("nvmlDeviceGetMemoryAffinity");
  constexpr unsigned kWords = 4;  // 256 nodes
  constexpr int kBits = 8 * sizeof(unsigned long);
  unsigned long mask[kWords] = {};
  TESSERA_RETURN_IF_ERROR(Check("nvmlDeviceGetMemoryAffinity",
                                api_->get_memory_affinity(device, kWords, mask, NVML_AFFINITY_SCOPE_NODE)));
  int node = -1;
  for (unsigned w = 0; w < kWords; ++w) {
    for (int b = 0; b < kBits; ++b) {
      if ((mask[w] >> b) & 1UL) {
        if (node >= 0) return NotFound("nvmlDeviceGetMemoryAffinity: the GPU is near several NUMA nodes");
        node = static_cast<int>(w) * kBits + b;
      }
    }
  }
  if (node < 0) return NotFound("nvmlDeviceGetMemoryAffinity: no NUMA node");
  return node;
}

Result<EventSet> Library::CreateEventSet() const {
  if (api_->event_set_create == nullptr || api_->event_set_free == nullptr) {
    return Unsupported("nvmlEventSetCreate");
  }
  nvmlEventSet_t set = nullptr;
  TESSERA_RETURN_IF_ERROR(Check("nvmlEventSetCreate", api_->event_set_create(&set)));
  return EventSet(this, set);
}

Result<unsigned long long> Library::SupportedEventTypes(nvmlDevice_t device) const {
  if (api_->get_supported_events == nullptr) return Unsupported("nvmlDeviceGetSupportedEventTypes");
  unsigned long long types = 0;
  TESSERA_RETURN_IF_ERROR(
      Check("nvmlDeviceGetSupportedEventTypes", api_->get_supported_events(device, &types)));
  return types;
}

Status Library::RegisterEvents(nvmlDevice_t device, unsigned long long types, const EventSet& set) const {
  if (api_->register_events == nullptr) return Unsupported("nvmlDeviceRegisterEvents");
  return Check("nvmlDeviceRegisterEvents", api_->register_events(device, types, set.get()));
}

Result<std::optional<nvmlEventData_t>> Library::WaitEvent(const EventSet& set, unsigned timeout_ms) const {
  if (api_->event_set_wait == nullptr) return Unsupported("nvmlEventSetWait_v2");
  nvmlEventData_t data{};
  const nvmlReturn_t ret = api_->event_set_wait(set.get(), &data, timeout_ms);
  if (ret == NVML_ERROR_TIMEOUT) return std::optional<nvmlEventData_t>();
  TESSERA_RETURN_IF_ERROR(Check("nvmlEventSetWait_v2", ret));
  return std::optional<nvmlEventData_t>(data);
}

EventSet::EventSet(EventSet&& other) noexcept
    : lib_(std::exchange(other.lib_, nullptr)), set_(std::exchange(other.set_, nullptr)) {}

EventSet::~EventSet() {
  if (lib_ != nullptr && set_ != nullptr) lib_->api_->event_set_free(set_);
}

}  // namespace tessera::nvml
