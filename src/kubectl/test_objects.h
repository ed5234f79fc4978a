// Node, Pod and ResourceClaim objects as the API server returns them, for kubectl-tessera's
// unit tests. Test-only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"

namespace tessera::kubectl::testing {

// A node with `gpus` GPUs of `model` and `mem_mib` each (uuid GPU-<node>-<i>,
// NUMA i % 2, 8 slots), 64 CPUs and 512 GiB.
nlohmann::json GpuNode(const std::string& name, int gpus, const std::string& model, int64_t mem_mib);

// A pod in `ns`, bound to assignment.node when `bound`, with the assignment
// annotation (when it has a node), asking 1 CPU and 1 GiB, in `phase`.
nlohmann::json AssignedPod(const std::string& ns, const std::string& name, const core::Assignment& assignment,
                           const std::string& phase = "Running", const std::string& assigned_at = "");

// One container `container` holding (index, mem, core milli) shares.
core::Assignment OnNode(const std::string& node, const std::string& container,
                        const std::vector<core::GpuShare>& shares);

// One allocation result of a claim: GPU gpu-<index> of `node`, with the
// consumed memory and compute quantities ("" leaves one out).
struct ClaimResult {
  std::string node;
  int index = 0;
  std::string memory, compute;
};

// A ResourceClaim ns/name allocated through driver gpu.tessera.io with
// `results` (each with consumedCapacity), reserved for pod `pod` ("": none).
nlohmann::json AllocatedClaim(const std::string& ns, const std::string& name, const std::vector<ClaimResult>& results,
                              const std::string& pod = "");

}  // namespace tessera::kubectl::testing
