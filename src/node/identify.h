// Which pod and container an Allocate call is for. The kubelet never says
// (it passes only device IDs), so the node agent works it out from what the
// API server holds: the pods bound to this node whose tessera.io/assignment
// is not yet fully marked tessera.io/allocated. Works on pods decoded once
// (core::PodView, pod_views.h); reads no JSON. Pure functions; thread-safe.
//
//   auto pending = PendingPodsFromList(snapshot.pods, "node-1");
//   TESSERA_ASSIGN_OR_RETURN(Identified who, IdentifyContainer(slot_gpus, pending, steered));
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/codec.h"
#include "core/model.h"
#include "core/pod_view.h"
#include "core/podspec.h"
#include "core/status.h"
#include "node/pod_views.h"

namespace tessera::node {

// Pod annotation listing the containers whose Allocate has been answered
// ("main,sidecar"), written by the node agent.
inline constexpr const char* kAllocatedAnnotation = core::kAllocatedAnnotation.data();

// The containers of `pod` whose Allocate has been answered: its
// tessera.io/allocated annotation, split.
std::vector<std::string> AllocatedContainers(const core::PodView& pod);

// A container that still waits for its Allocate, with its GPU shares.
struct PendingContainer {
  std::string name;
  std::vector<core::GpuShare> gpus;  // one slot per GPU
};

// Pod annotation: `hard` caps each container at its gpu-core share even when
// the GPU is otherwise idle; `share` (default) lets the arbiter give it idle time.
inline constexpr const char* kCorePolicyAnnotation = core::kCorePolicyAnnotation.data();
// Pod annotation: the burst ceiling, in % of one GPU, up to which the arbiter
// may lend a `share` container idle time (core/podspec.h).
inline constexpr const char* kCoreLimitAnnotation = core::kCoreLimitAnnotation.data();

// How the compute arbiter treats a pod's containers, from its annotations
// (tessera.io/priority, tessera.io/gpu-core-policy, tessera.io/gpu-core-limit).
// The device-plugin path (PendingPodFrom) and the DRA driver (a claim takes
// the annotations of the pod it is reserved for) both read them here.
struct ComputeAnnotations {
  core::Priority priority = core::Priority::kNormal;  // unreadable: normal
  bool core_hard = false;                             // "hard"; anything else: share
  // The burst ceiling in core milli per GPU: a whole percent 1-100; 0 when
  // absent, unreadable, or the policy is hard (a hard share has no ceiling).
  int64_t core_limit_milli = 0;
  bool operator==(const ComputeAnnotations&) const = default;
};
// The compute annotations of `pod`. Lenient: a value it cannot read is the
// default (the extender refuses such pods before they are bound).
ComputeAnnotations ComputeAnnotationsOf(const core::PodView& pod);

// A pod bound to this node with an assignment not yet fully allocated.
struct PendingPod {
  std::string ns, name, uid, resource_version;
  std::string assigned_at;   // tessera.io/assigned-at; "" when missing
  std::string created_at;    // metadata.creationTimestamp
  std::string assignment_error;  // non-empty: the annotation is unreadable or names another node
  core::Isolation isolation = core::Isolation::kHook;  // tessera.io/isolation (the extender checked it)
  std::vector<PendingContainer> containers;  // not yet allocated, in the kubelet's order
  std::vector<std::string> allocated;        // already answered
  // Every named container of the spec (containers and init containers) by
  // name, as decoded: which resources it asks for (AsksFor), and what the
  // environment takes from the pod's own requests (the gpushare front end's
  // GiB).
  std::map<std::string, core::PodView::Container> specs;
  core::Priority priority = core::Priority::kNormal;  // tessera.io/priority (unreadable: normal)
  bool core_hard = false;  // tessera.io/gpu-core-policy: hard (default share: work-conserving)
  // tessera.io/gpu-core-limit in core milli per GPU (the extender checked
  // it); 0 when absent or unreadable: no burst ceiling.
  int64_t core_limit_milli = 0;
  std::string Key() const { return ns + "/" + name; }
};

// The pending pods among `pods`: bound to `node`, with an assignment
// annotation, not finished or being deleted, with at least one container
// left (or an unreadable assignment, kept so errors can name it).
// Containers follow the kubelet's order (init containers, then containers, as
// in the spec). Sorted oldest first: assigned-at, then creation time, then
// namespace/name.
std::vector<PendingPod> PendingPodsFromList(const PodViews& pods, const std::string& node);

// One pod of that list: the pending view of `pod`, or nullopt when
// PendingPodsFromList would leave it out.
std::optional<PendingPod> PendingPodFrom(const core::PodView& pod, const std::string& node);
// Sorts as PendingPodsFromList does: oldest first.
void SortOldestFirst(std::vector<PendingPod>& pending);

// Whether container `name` of `pod` names `resource` (an extended resource,
// "tessera.io/gpu") in its spec's limits or requests. The kubelet calls a
// device plugin's Allocate only for containers whose limits name its
// resource, so an Allocate of one resource is never for another's container.
bool AsksFor(const PendingPod& pod, const std::string& name, const std::string& resource);

// Keeps the pods of `pending` an Allocate (or a preferred-allocation
// request) of `resource` may be for: those whose next container asks for
// it, and those with an unreadable assignment when any container asks for
// it (so the refusal still names them). Order is kept. An empty `resource`
// keeps every pod.
void KeepPendingFor(std::vector<PendingPod>& pending, const std::string& resource);

// A pod's next container, by position in a PendingPod list.
struct Identified {
  size_t pod = 0;
  size_t container = 0;
};
// Names a pod for a caller outside this module (an Event's involvedObject).
struct PodRef {
  std::string ns, name, uid;
  bool operator==(const PodRef&) const = default;
};

// Names a container across calls (the preferred-allocation hint).
struct ContainerRef {
  std::string pod_key, container;
  bool operator==(const ContainerRef&) const = default;
};

// Finds the pod whose next container wants exactly the GPUs of the slots the
// kubelet passed (`slot_gpus`, one uuid per device ID; its size is the slot
// count). Only each pod's *next* container is a candidate, because the
// kubelet allocates a pod's containers in order. When several candidates fit
// equally, `steered` (the container GetPreferredAllocation last steered to
// these very slots) decides; without it the call fails. Errors:
// FAILED_PRECONDITION when nothing matches or the match is ambiguous, the
// message naming every candidate and what it wants (or why it is unreadable).
// On an error, `named` (when given) receives the positions in `pending` of
// the pods the message names, so callers can act on them (Events) without
// parsing the text.
Result<Identified> IdentifyContainer(const std::vector<std::string>& slot_gpus, const std::vector<PendingPod>& pending,
                                     const std::optional<ContainerRef>& steered,
                                     std::vector<size_t>* named = nullptr);

// The container GetPreferredAllocation should steer to: the oldest pending
// pod's next container that wants `size` slots and whose GPUs all have a
// slot among `available_gpus` (one uuid per available device ID). nullopt
// when none.
std::optional<Identified> NextToSteer(const std::vector<PendingPod>& pending, size_t size,
                                      const std::vector<std::string>& available_gpus);

// "GPU-a, GPU-b" for logs and messages.
std::string JoinUuids(const std::vector<std::string>& uuids);

}  // namespace tessera::node
