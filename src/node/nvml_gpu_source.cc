#include "node/nvml_gpu_source.h"

#include "core/codec.h"

namespace tessera::node {
namespace {

spdlog::level::level_enum Level(nvml::LogLevel level) {
  switch (level) {
    case nvml::LogLevel::kDebug: return spdlog::level::debug;
    case nvml::LogLevel::kInfo: return spdlog::level::info;
    case nvml::LogLevel::kWarn: return spdlog::level::warn;
    case nvml::LogLevel::kError: return spdlog::level::err;
  }
  return spdlog::level::err;
}

}  // namespace

Result<std::unique_ptr<NvmlGpuSource>> NvmlGpuSource::Open(std::shared_ptr<spdlog::logger> log,
                                                           std::string library) {
  nvml::GpuReaderOptions options;
  options.library = std::move(library);
  options.log = [log](nvml::LogLevel level, const std::string& message) {
    if (log) log->log(Level(level), "NVML: {}", message);
  };
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<nvml::GpuReader> reader, nvml::GpuReader::Open(std::move(options)));
  return std::unique_ptr<NvmlGpuSource>(new NvmlGpuSource(std::move(reader)));
}

Result<std::vector<core::GpuInfo>> NvmlGpuSource::Read() {
  TESSERA_ASSIGN_OR_RETURN(std::vector<core::GpuInfo> gpus, reader_->Read());
  TESSERA_RETURN_IF_ERROR(core::ValidateInventory(gpus).WithContext("NVML"));
  return gpus;
}

Result<std::vector<GpuLoad>> NvmlGpuSource::ReadLoad() {
  TESSERA_ASSIGN_OR_RETURN(std::vector<nvml::GpuLoad> loads, reader_->ReadLoad());
  std::vector<GpuLoad> out;
  for (const nvml::GpuLoad& l : loads) {
    GpuLoad load;
    load.index = l.index;
    load.memory_used_bytes = l.memory_used_bytes;
    load.utilization = l.utilization;
    out.push_back(load);
  }
  return out;
}

}  // namespace tessera::node
