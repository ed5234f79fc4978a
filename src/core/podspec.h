// Kubernetes Pod and Node objects, as JSON from the API server, turned into
// the core model: what a pod asks for (PodRequest) and what a node offers
// (NodeInfo). Every mistake a user can make in a pod is reported as
// INVALID_ARGUMENT with a message that names the container and says what to
// fix. Pure functions; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(PodRequest req, PodRequestFromJson(pod, ResourceNames{}));
//   TESSERA_ASSIGN_OR_RETURN(NodeInfo node, NodeInfoFromJson(node_json));
//
// A container asks for GPU shares with three extended resources, read from
// its limits (requests when there are no limits):
//   tessera.io/gpu       how many GPUs it spans (default 1 when mem or core is set;
//                        alone, it asks for whole GPUs)
//   tessera.io/gpu-mem   MiB of device memory per GPU (a whole number)
//   tessera.io/gpu-core  percent of one GPU's compute per GPU, 1..100
// and pod annotations refine it: tessera.io/gpu-model ("A100|H100", allowed
// models), tessera.io/gpu-model-avoid ("T4"), tessera.io/priority
// (high|normal|low).
// With a compatibility front end enabled (ResourceNames below), a container
// may instead use gpushare's or HAMi's names; each maps onto the same model:
//   aliyun.com/gpu-mem: 3             -> 1 GPU, 3072 MiB, no core share
//   nvidia.com/gpu: 1 (+ gpumem: 3000, gpucores: 30) -> 1 GPU, 3000 MiB, 30 %
// A container uses one vocabulary: mixing them (tessera.io/gpu-mem beside
// aliyun.com/gpu-mem) is an error naming the container and both resources.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model.h"
#include "core/status.h"

namespace tessera::core {

// Compatibility front end for Alibaba gpushare manifests: `mem` is GPU
// memory in GiB (a whole number), and a container asking for it gets one GPU
// (gpushare never spans GPUs). Off by default: enabling it needs the node
// agent to serve `mem` as a device-plugin resource (docs/migration.md).
struct GpushareNames {
  bool enabled = false;
  std::string mem = "aliyun.com/gpu-mem";
  bool operator==(const GpushareNames&) const = default;
};

// Compatibility front end for HAMi manifests, all per GPU: `gpu` the number
// of GPUs (HAMi's vGPUs), `mem` MiB, `mem_percent` percent of the card's
// memory, `core` percent of its compute. Off by default: HAMi's count name
// nvidia.com/gpu is also NVIDIA's device plugin's, so a cluster that runs
// both must rename it here and on the node agent.
struct HamiNames {
  bool enabled = false;
  std::string gpu = "nvidia.com/gpu";
  std::string mem = "nvidia.com/gpumem";
  std::string mem_percent = "nvidia.com/gpumem-percentage";
  std::string core = "nvidia.com/gpucores";
  bool operator==(const HamiNames&) const = default;
};

// The extended resource names a cluster uses for GPU shares (configurable so
// Tessera can sit beside another GPU-sharing project's names), and the
// compatibility front ends that map other projects' names onto the same
// request model.
struct ResourceNames {
  std::string gpu = "tessera.io/gpu";
  std::string mem = "tessera.io/gpu-mem";
  std::string core = "tessera.io/gpu-core";
  GpushareNames gpushare;
  HamiNames hami;

  // Every name a pod may use to ask for a GPU: Tessera's three, then those
  // of the enabled front ends.
  std::vector<std::string> All() const;
  bool operator==(const ResourceNames&) const = default;
};

// Which vocabulary a container's GPU request is written in.
enum class FrontEnd { kNone, kTessera, kGpushare, kHami };
std::string_view FrontEndName(FrontEnd front_end);  // "none", "tessera", "gpushare", "hami"

// The vocabulary `container` (one entry of a pod's spec.containers) uses:
// the first whose names appear in its limits or requests, in the order
// Tessera, gpushare, HAMi (disabled front ends are not looked at). Lenient:
// a container mixing vocabularies is reported by PodRequestFromJson, not here.
FrontEnd FrontEndOf(const nlohmann::json& container, const ResourceNames& names);

// The GiB a gpushare-style container asks for (its names.gpushare.mem limit,
// else request); 0 when it names none or the value is not a whole number.
int64_t GpushareGiB(const nlohmann::json& container, const ResourceNames& names);

// Pod annotations read by PodRequestFromJson.
inline constexpr std::string_view kModelAnnotation = "tessera.io/gpu-model";
inline constexpr std::string_view kModelAvoidAnnotation = "tessera.io/gpu-model-avoid";
inline constexpr std::string_view kPriorityAnnotation = "tessera.io/priority";
inline constexpr std::string_view kIsolationAnnotation = "tessera.io/isolation";
// `share` (default: work-conserving) or `hard` (never above the gpu-core share).
inline constexpr std::string_view kCorePolicyAnnotation = "tessera.io/gpu-core-policy";
// Burst: the % of a GPU the arbiter may lend each GPU container when the GPU
// has idle time (1-100, at least the container's gpu-core; `share` policy,
// not with MPS).
inline constexpr std::string_view kCoreLimitAnnotation = "tessera.io/gpu-core-limit";

// "namespace/name" of a Pod object (namespace "default" when absent).
// INVALID_ARGUMENT when `pod` is not an object or has no metadata.name.
Result<std::string> PodKey(const nlohmann::json& pod);

// The CPU and host memory a pod needs on its node: the larger of the sum over
// its containers and its largest init container (per resource), taking each
// container's requests (its limits when it has no requests).
struct HostResources {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  bool operator==(const HostResources&) const = default;
};
// INVALID_ARGUMENT, naming the container, on a malformed quantity or spec.
Result<HostResources> PodHostResources(const nlohmann::json& pod);

// The full request of a Pod object: key, CPU and memory (PodHostResources),
// per container its GPU count and per-GPU share, the model selector, the
// priority and the isolation mode from the annotations. Containers that ask for no GPU are kept with
// gpu_count 0 (the assignment lists every container). The result has passed
// core ValidateRequest. INVALID_ARGUMENT with a message that names the
// container and what to fix, e.g.
//   container "worker": tessera.io/gpu-core: 150 is over 100 (percent of one GPU)
// GPU resources on init containers are rejected (not supported).
Result<PodRequest> PodRequestFromJson(const nlohmann::json& pod, const ResourceNames& names);

// True when any container or init container names one of `names` in its
// requests or limits (kube-scheduler's rule for sending a pod to the
// extender). False for anything that is not a Pod object.
bool WantsGpu(const nlohmann::json& pod, const ResourceNames& names);

// The request the ledger holds for a bound pod with `assignment`: key, CPU and
// memory from its spec, and per container the GPU shares exactly as the
// assignment grants them (so they always match, whatever the resource names
// or model annotations say). The scheduler and kubectl-tessera book pods with
// it. INVALID_ARGUMENT when a container's shares differ between its GPUs
// (other than whole GPUs of different sizes).
Result<PodRequest> HeldRequest(const nlohmann::json& pod, const std::string& key, const Assignment& assignment);

// A Node object's name, status.allocatable cpu and memory, and its GPUs from
// the tessera.io/gpu-inventory annotation (core codec), ordered by index.
// NOT_FOUND "not a GPU node (no tessera.io/gpu-inventory annotation)" when
// the annotation is absent; INVALID_ARGUMENT naming the field for a malformed
// node, annotation, quantity, or GPU indexes that are not 0..n-1.
Result<NodeInfo> NodeInfoFromJson(const nlohmann::json& node);

// The whole number of `resource` (a device-plugin count such as
// tessera.io/gpu) a Node object's status.allocatable gives: what its kubelet
// has registered and can hand out. 0 when absent or not a whole number (the
// kubelet writes counts as decimal text).
int64_t AllocatableCount(const nlohmann::json& node, std::string_view resource);

// The device-plugin count resources whose slots are counted per node:
// Tessera's GPU count, and HAMi's with that front end on. (gpushare's memory
// units are advertised by the node and counted by kube-scheduler.)
std::vector<std::string> SlotResources(const ResourceNames& names);

// The device-plugin slots a node's inventory lists: the sum of its GPUs'
// sharer limits (GpuInfo::max_sharers), which the node agent registers with
// the kubelet as the count resource once it runs. -1 when a GPU lists none
// (no limit) or there are no GPUs: nothing to compare allocatable with.
int64_t ListedSlots(const NodeInfo& node);

}  // namespace tessera::core
