// The versioned JSON annotations Tessera components exchange through the
// Kubernetes API: a node's GPU inventory, a pod's GPU assignment and a pod's
// measured GPU use.
// Pure functions; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(std::string text, EncodeAssignment(assignment));
//   TESSERA_ASSIGN_OR_RETURN(Assignment back, DecodeAssignment(text));
//
// Formats (version 1; keys are case-sensitive, unknown keys are ignored so a
// newer writer can add fields):
//   tessera.io/gpu-inventory
//     {"v":1,"gpus":[{"index":0,"uuid":"GPU-..","model":"A100",
//                     "memMiB":81920,"sms":108,"numa":0,"healthy":true,"slots":8}]}
//     "slots" (optional, >= 0): how many containers may share the GPU at
//     once, i.e. the node agent's device-plugin slots; absent or 0: no limit.
//   tessera.io/assignment
//     {"v":1,"node":"n1","containers":[{"name":"c","gpus":[
//         {"index":0,"uuid":"GPU-..","memMiB":8192,"coreMilli":300}]}]}
//   tessera.io/usage (written by the node agent, read by kubectl-tessera top)
//     {"v":1,"at":"2026-03-01T12:30:05Z","containers":[{"name":"c","gpus":[
//         {"index":0,"uuid":"GPU-..","memUsedMiB":123,"utilization":0.42}]}]}
//     "at": RFC 3339 (UTC written, whole seconds; any offset and fraction
//     read); "utilization": 0..1, the share of the GPU's time the
//     container's kernels ran over the last sample.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/pod_usage.h"

namespace tessera::core {

// Node annotation holding the GPUs the node agent found.
inline constexpr std::string_view kInventoryAnnotation = "tessera.io/gpu-inventory";
// Pod annotation holding where the scheduler placed the pod.
inline constexpr std::string_view kAssignmentAnnotation = "tessera.io/assignment";
// Pod annotation with the time (RFC 3339, UTC) the extender bound the pod;
// the node agent serves pending assignments oldest first by it.
inline constexpr std::string_view kAssignedAtAnnotation = "tessera.io/assigned-at";
// Pod annotation the node agent keeps: the containers it has allocated, comma-separated.
inline constexpr std::string_view kAllocatedAnnotation = "tessera.io/allocated";
// Node annotation tessera-node sets on its Node: an agent admits pods there
// (names its version). Nodes without it (simulated, no agent) admit nothing.
inline constexpr std::string_view kNodeAgentAnnotation = "tessera.io/node-agent";
// Pod annotation holding the pod's measured GPU use (PodUsage).
inline constexpr std::string_view kUsageAnnotation = "tessera.io/usage";
// Pod label naming the workload a pod's GPU-use history is kept under, for
// pods whose owner does not say it (the extender's LoadTracker).
inline constexpr std::string_view kWorkloadLabel = "tessera.io/workload";
// The one format version this build reads and writes.
inline constexpr int kCodecVersion = 1;
// GPU indexes in annotations lie in 0..kMaxGpuIndex.
inline constexpr int kMaxGpuIndex = 63;

// Checks what DecodeInventory checks: indexes in 0..63 and unique, memMiB and
// sms not negative, numa -1 (unknown) or more. OK or INVALID_ARGUMENT naming
// the field, e.g. "tessera.io/gpu-inventory: gpus[1].index: 3 appears twice".
Status ValidateInventory(const std::vector<GpuInfo>& gpus);

// Checks what DecodeAssignment checks: a non-empty node, non-empty unique
// container names, per container unique GPU indexes in 0..63, memMiB not
// negative, coreMilli in 0..1000. OK or INVALID_ARGUMENT naming the field.
Status ValidateAssignment(const Assignment& assignment);

// Compact JSON for the inventory annotation. Fails with INVALID_ARGUMENT when
// ValidateInventory does, so what is written can always be read back.
Result<std::string> EncodeInventory(const std::vector<GpuInfo>& gpus);

// Parses an inventory annotation. Fails with INVALID_ARGUMENT, naming the
// field, on text that is not JSON, a version other than 1, a missing or
// mistyped field, or a value ValidateInventory rejects.
Result<std::vector<GpuInfo>> DecodeInventory(std::string_view json);

// Compact JSON for the assignment annotation. Fails as ValidateAssignment.
Result<std::string> EncodeAssignment(const Assignment& assignment);

// Parses an assignment annotation. Fails as DecodeInventory does.
Result<Assignment> DecodeAssignment(std::string_view json);

// Checks what DecodeUsage checks: "at" in the years 1700..2199, non-empty
// unique container names, per container unique GPU indexes in 0..63,
// memUsedMiB not negative, utilization a number in 0..1. OK or
// INVALID_ARGUMENT naming the field.
Status ValidateUsage(const PodUsage& usage);

// Compact JSON for the usage annotation ("at" to whole seconds). Fails as
// ValidateUsage.
Result<std::string> EncodeUsage(const PodUsage& usage);

// Parses a usage annotation. Fails as DecodeInventory does, and on an "at"
// that is not an RFC 3339 time.
Result<PodUsage> DecodeUsage(std::string_view json);

}  // namespace tessera::core
