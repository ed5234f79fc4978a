// The node's GPU inventory: where it comes from (GpuSource; a file in
// simulated mode; NVML in node/nvml_gpu_source.h) and how it is published on the Node object
// (the tessera.io/gpu-inventory annotation plus model and memory labels).
// Thread-compatible: one caller at a time per object (Read and ReadLoad
// included).
//
//   FileGpuSource source("gpus.yaml");
//   TESSERA_ASSIGN_OR_RETURN(auto gpus, source.Read());
//   TESSERA_ASSIGN_OR_RETURN(bool patched, PublishInventory(api, "node-1", gpus));
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/api.h"

namespace tessera::node {

// The value of the core::kNodeAgentAnnotation the agent puts on its Node.
inline constexpr const char* kNodeAgentVersion = "tessera-node/v1";

// Node labels the agent keeps in step with its GPUs.
inline constexpr const char* kModelLabel = "tessera.io/gpu-model";
inline constexpr const char* kMemoryLabel = "tessera.io/gpu-memory-mib";

// How busy one GPU is now, as the device reports it: every process on it,
// inside Tessera's containers or not.
struct GpuLoad {
  int index = 0;
  uint64_t memory_used_bytes = 0;
  std::optional<double> utilization;  // 0..1; nullopt when the device cannot say
  bool operator==(const GpuLoad&) const = default;
};

// Where the node's GPUs are read from: FileGpuSource here, NvmlGpuSource
// (node/nvml_gpu_source.h) on real GPU nodes.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // The GPUs now, index ascending. Errors name the source and what is wrong.
  virtual Result<std::vector<core::GpuInfo>> Read() = 0;
  // For logs: "file gpus.yaml", "NVML".
  virtual std::string Describe() const = 0;
  // How busy each GPU is now, measured by the device (all its processes).
  // UNIMPLEMENTED where the source cannot measure (a simulated-GPU file):
  // the usage pass then sums the containers' regions instead.
  virtual Result<std::vector<GpuLoad>> ReadLoad() {
    return Status(StatusCode::kUnimplemented, Describe() + " measures no load");
  }
};

// Parses a simulated-GPU file (YAML, so JSON works too):
//   gpus:
//   - {uuid: GPU-aaaa, model: A100, memMiB: 81920, sms: 108, numa: 0, healthy: true}
// index is the position; sms, numa (-1) and healthy (true) are optional.
// INVALID_ARGUMENT naming `source` and the entry; the result also passes
// core::ValidateInventory, and uuids must be non-empty and unique.
Result<std::vector<core::GpuInfo>> ParseGpuFile(const std::string& text, const std::string& source);

// The file ParseGpuFile reads back as `gpus` (simulated nodes are written with it).
std::string FormatGpuFile(const std::vector<core::GpuInfo>& gpus);

// Re-reads the file on every Read(), so editing it (e.g. healthy: false)
// changes what the agent reports.
class FileGpuSource final : public GpuSource {
 public:
  explicit FileGpuSource(std::string path) : path_(std::move(path)) {}
  Result<std::vector<core::GpuInfo>> Read() override;
  std::string Describe() const override { return "file " + path_; }

 private:
  std::string path_;
};

// A label value Kubernetes accepts: [A-Za-z0-9._-], at most 63 characters,
// starting and ending alphanumeric; other characters become '-'.
std::string LabelValue(std::string_view text);

// The merge patch that puts `gpus` on a Node: the inventory annotation, the
// node-agent marker, and labels for the model (GPU 0's) and memory (the
// smallest GPU's MiB).
Result<nlohmann::json> InventoryPatch(const std::vector<core::GpuInfo>& gpus);

// Reads Node `node` and merge-PATCHes it with InventoryPatch(gpus) only when
// its annotation or labels differ. True when a patch was sent.
Result<bool> PublishInventory(kube::Api& api, const std::string& node, const std::vector<core::GpuInfo>& gpus);

}  // namespace tessera::node
