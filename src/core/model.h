// The GPU, node and pod-request model every Tessera component shares.
//
// Units are fixed here once: CPU in millicores, host and GPU memory in MiB,
// GPU compute in "core milli" (1/1000 of one GPU's time; users write percent,
// 30 % == 300 milli). All types are plain values; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::core {

// One GPU's whole compute time, in core milli.
inline constexpr int64_t kCoreMilliPerGpu = 1000;

// A physical GPU as the node agent reports it.
struct GpuInfo {
  int index = 0;            // 0-based index on its node
  std::string uuid;         // "GPU-..." from NVML; may be empty in the simulator
  std::string model;        // e.g. "A100", "T4", "G2"
  int64_t memory_mib = 0;   // device memory; 0 when unknown (trace replays)
  int sm_count = 0;         // streaming multiprocessors; 0 when unknown
  int numa_node = -1;       // -1 when unknown
  bool healthy = true;
  int max_sharers = 0;      // containers that may hold it at once (the node's device-plugin slots); 0: no limit
  bool mps = false;         // its node agent runs an MPS control daemon for it (tessera.io/isolation: mps)

  bool operator==(const GpuInfo&) const = default;
};

// A node's allocatable capacity.
struct NodeInfo {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<GpuInfo> gpus;

  bool operator==(const NodeInfo&) const = default;
};

// Which GPU models a container may run on. Empty `allowed` means any model.
struct ModelSelector {
  std::vector<std::string> allowed;
  std::vector<std::string> avoided;

  bool Allows(std::string_view model) const;
  bool Unconstrained() const { return allowed.empty() && avoided.empty(); }
  bool operator==(const ModelSelector&) const = default;
};

// What one container asks for. A container with gpu_count == 0 uses no GPU.
// When gpu_count > 1 every GPU gets the same memory and core share.
struct ContainerRequest {
  std::string name;
  int gpu_count = 0;
  int64_t mem_mib_per_gpu = 0;      // 0: no memory limit asked (trace replays)
  int64_t core_milli_per_gpu = 0;   // 1..1000; 1000 is the whole GPU's time
  ModelSelector models;

  bool operator==(const ContainerRequest&) const = default;
};

enum class Priority { kLow = 0, kNormal = 1, kHigh = 2 };

// How a pod's GPU share is enforced (tessera.io/isolation): the interception
// library (default), NVIDIA MPS with the share as its thread percentage and
// pinned memory limit (only on GPUs whose node agent runs MPS), or not at all.
enum class Isolation { kHook = 0, kMps = 1, kNone = 2 };
std::string_view IsolationName(Isolation isolation);

// A pod as the placement code sees it.
struct PodRequest {
  std::string key;            // "namespace/name" (or the trace's task name)
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<ContainerRequest> containers;
  Priority priority = Priority::kNormal;
  Isolation isolation = Isolation::kHook;
  // Burst ceiling (tessera.io/gpu-core-limit) in core milli per GPU, for
  // every GPU container: the node's arbiter may lend it idle time up to this,
  // above its gpu-core request, which stays what is scheduled and guaranteed.
  // 0: no ceiling beyond the policy (work-conserving `share`, or `hard`).
  int64_t core_limit_milli = 0;
  bool core_hard = false;  // tessera.io/gpu-core-policy: hard

  // Sum over containers of gpu_count * core_milli_per_gpu.
  int64_t TotalCoreMilli() const;
  int TotalGpuCount() const;
  bool UsesGpu() const { return TotalGpuCount() > 0; }
  bool operator==(const PodRequest&) const = default;
};

// One GPU share granted to a container.
struct GpuShare {
  int index = 0;            // GPU index on the node
  std::string uuid;         // copied from GpuInfo for the node agent
  int64_t mem_mib = 0;
  int64_t core_milli = 0;
  bool operator==(const GpuShare&) const = default;
};

struct ContainerAssignment {
  std::string name;
  std::vector<GpuShare> gpus;
  bool operator==(const ContainerAssignment&) const = default;
};

// Where a pod was placed: its node and, per container, its GPU shares.
struct Assignment {
  std::string node;
  std::vector<ContainerAssignment> containers;
  bool operator==(const Assignment&) const = default;
};

// The device memory a container's share holds on `gpu`: what it asked for,
// or, for a whole GPU (100 % core) asked without a memory size, all of the
// GPU's memory, so the node agent's limit and the books show the truth.
int64_t ShareMemMiB(const ContainerRequest& container, const GpuInfo& gpu);

// Checks a request for mistakes a user can make (negative sizes, core over
// 100 %, a multi-GPU container asking for a fraction, ...). OK or
// INVALID_ARGUMENT with a message that says what to fix.
Status ValidateRequest(const PodRequest& pod);

}  // namespace tessera::core
