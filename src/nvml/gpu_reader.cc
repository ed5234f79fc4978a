#include "nvml/gpu_reader.h"

#include <utility>

#include "nvml/model_name.h"

namespace tessera::nvml {
namespace {

void Log(const LogFn& log, LogLevel level, const std::string& message) {
  if (log) log(level, message);
}

}  // namespace

GpuReader::GpuReader(GpuReaderOptions options, std::unique_ptr<Library> lib)
    : options_(std::move(options)), lib_(std::move(lib)) {}

GpuReader::~GpuReader() { watch_.reset(); }  // the thread stops before NVML shuts down

Result<std::unique_ptr<GpuReader>> GpuReader::Open(GpuReaderOptions options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Library> lib, Library::Open(options.library));
  TESSERA_ASSIGN_OR_RETURN(unsigned count, lib->DeviceCount());
  std::unique_ptr<GpuReader> reader(new GpuReader(std::move(options), std::move(lib)));
  const LogFn& log = reader->options_.log;
  std::vector<HealthWatch::Device> devices;
  for (unsigned i = 0; i < count; ++i) {
    auto device = reader->lib_->DeviceByIndex(i);
    auto uuid = device.ok() ? reader->lib_->Uuid(*device) : Result<std::string>(device.status());
    if (!uuid.ok()) {
      Log(log, LogLevel::kWarn, "GPU " + std::to_string(i) + " left out: " + uuid.status().message());
      continue;
    }
    devices.push_back({*device, static_cast<int>(i), *uuid});
    // Once, at start: why an optional field is unknown.
    if (auto sms = reader->lib_->SmCount(*device); !sms.ok()) {
      Log(log, LogLevel::kInfo, "GPU " + std::to_string(i) + ": SM count unknown (0): " + sms.status().message());
    }
    if (auto numa = reader->lib_->NumaNode(*device); !numa.ok()) {
      Log(log, LogLevel::kInfo, "GPU " + std::to_string(i) + ": NUMA node unknown (-1): " + numa.status().message());
    }
  }
  if (count == 0) Log(log, LogLevel::kWarn, "NVML reports no GPUs on this node");
  if (reader->options_.watch_events) {
    reader->watch_ = HealthWatch::Start(*reader->lib_, std::move(devices), reader->options_.event_wait, log);
  }
  return reader;
}

Result<core::GpuInfo> GpuReader::ReadOne(unsigned index) const {
  core::GpuInfo gpu;
  gpu.index = static_cast<int>(index);
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->DeviceByIndex(index));
  TESSERA_ASSIGN_OR_RETURN(gpu.uuid, lib_->Uuid(device));
  TESSERA_ASSIGN_OR_RETURN(std::string name, lib_->Name(device));
  gpu.model = ShortModelName(name);
  TESSERA_ASSIGN_OR_RETURN(uint64_t bytes, lib_->MemoryTotalBytes(device));
  gpu.memory_mib = static_cast<int64_t>(bytes >> 20);
  if (auto sms = lib_->SmCount(device); sms.ok()) gpu.sm_count = *sms;
  if (auto numa = lib_->NumaNode(device); numa.ok()) gpu.numa_node = *numa;
  return gpu;
}

void GpuReader::NoteFailure(int index, const Status& status) {
  if (!failing_.insert(index).second) return;
  const bool known = last_good_.count(index) > 0;
  Log(options_.log, LogLevel::kError,
      "GPU " + std::to_string(index) + (known ? " reported unhealthy: " : " left out: ") + status.message());
}

void GpuReader::NoteSuccess(int index) {
  if (failing_.erase(index) > 0) {
    Log(options_.log, LogLevel::kInfo, "GPU " + std::to_string(index) + " answers NVML queries again");
  }
}

Result<std::vector<core::GpuInfo>> GpuReader::Read() {
  TESSERA_ASSIGN_OR_RETURN(unsigned count, lib_->DeviceCount());
  const std::set<std::string> lost = watch_ ? watch_->LostUuids() : std::set<std::string>();
  std::vector<core::GpuInfo> gpus;
  for (unsigned i = 0; i < count; ++i) {
    const int index = static_cast<int>(i);
    auto gpu = ReadOne(i);
    if (gpu.ok()) {
      NoteSuccess(index);
      last_good_[index] = *gpu;
      gpus.push_back(*gpu);
    } else {
      NoteFailure(index, gpu.status());
      if (auto it = last_good_.find(index); it != last_good_.end()) {
        gpus.push_back(it->second);
        gpus.back().healthy = false;
      }
    }
  }
  // GPUs NVML no longer counts: keep them, unhealthy, so their slots say so.
  for (auto it = last_good_.lower_bound(static_cast<int>(count)); it != last_good_.end(); ++it) {
    NoteFailure(it->first, NotFound("no longer counted by nvmlDeviceGetCount_v2"));
    gpus.push_back(it->second);
    gpus.back().healthy = false;
  }
  for (core::GpuInfo& gpu : gpus) {
    if (lost.count(gpu.uuid) > 0) gpu.healthy = false;
  }
  return gpus;
}

Result<std::vector<GpuLoad>> GpuReader::ReadLoad() const {
  TESSERA_ASSIGN_OR_RETURN(unsigned count, lib_->DeviceCount());
  std::vector<GpuLoad> out;
  for (unsigned i = 0; i < count; ++i) {
    auto device = lib_->DeviceByIndex(i);
    if (!device.ok()) continue;
    auto used = lib_->MemoryUsedBytes(*device);
    if (!used.ok()) continue;
    GpuLoad load;
    load.index = static_cast<int>(i);
    load.memory_used_bytes = *used;
    if (auto utilization = lib_->Utilization(*device); utilization.ok()) load.utilization = *utilization;
    out.push_back(load);
  }
  return out;
}

}  // namespace tessera::nvml
