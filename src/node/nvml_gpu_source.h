// NvmlGpuSource: the GpuSource of a real GPU node, reading the GPUs through
// the driver's NVML (nvml::GpuReader: dlopen()ed, never linked) and logging
// what it sees through the agent's logger.
// Thread-compatible: one Read() at a time (its health thread is internal).
//
//   TESSERA_ASSIGN_OR_RETURN(auto source, NvmlGpuSource::Open(log));
//   TESSERA_ASSIGN_OR_RETURN(auto gpus, source->Read());
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>
#include <vector>

#include "node/inventory.h"
#include "nvml/gpu_reader.h"

namespace tessera::node {

class NvmlGpuSource final : public GpuSource {
 public:
  // Loads `library` and starts the XID health thread. FAILED_PRECONDITION
  // with "libnvidia-ml.so.1 not found: is the NVIDIA driver installed? ..."
  // on a node without a driver; NVML's own error when it refuses to start.
  static Result<std::unique_ptr<NvmlGpuSource>> Open(std::shared_ptr<spdlog::logger> log,
                                                     std::string library = nvml::kDefaultLibrary);

  // The GPUs now (nvml::GpuReader::Read), checked by core::ValidateInventory.
  Result<std::vector<core::GpuInfo>> Read() override;
  std::string Describe() const override { return "NVML"; }
  // nvml::GpuReader::ReadLoad.
  Result<std::vector<GpuLoad>> ReadLoad() override;

 private:
  explicit NvmlGpuSource(std::unique_ptr<nvml::GpuReader> reader) : reader_(std::move(reader)) {}
  std::unique_ptr<nvml::GpuReader> reader_;
};

}  // namespace tessera::node
