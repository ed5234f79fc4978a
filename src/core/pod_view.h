// PodView: what Tessera reads of a Kubernetes Pod, decoded once where the
// JSON enters (the scheduler's pod informer, the extender's wire layer, the
// node agent's pod cache) and passed by value or const& past that edge, so no
// module past it reads pod JSON or decodes the same pod twice. DecodePod is
// the one reader; it uses podspec.h for the request. Pure; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(PodView pod, DecodePod(pod_json, names));
//   if (!pod.request.ok()) reject(pod.key, pod.request.status());
//
// A pod is decoded leniently: only a pod without an identity (not an object,
// no metadata.name, a metadata.namespace that is not a string) fails to
// decode. Every other field that is absent or of the wrong type reads as its
// default ("" for text, 0 for numbers), as Kubernetes leaves them out when
// empty; a user's mistake in the GPU request is kept in `request` as the
// error podspec gives, never dropped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model.h"
#include "core/podspec.h"
#include "core/status.h"

namespace tessera::core {

struct PodView {
  // Identity.
  std::string key;               // "namespace/name" (PodKey)
  std::string ns, name;          // namespace "default" when absent
  std::string uid;               // metadata.uid; "" when absent
  std::string resource_version;  // metadata.resourceVersion; "" when absent

  // Where it is in its life.
  std::string phase;           // status.phase ("Pending", "Running", "Succeeded", ...)
  std::string node;            // spec.nodeName; "" while unbound
  std::string nominated_node;  // status.nominatedNodeName; "" when none
  bool terminating = false;    // metadata.deletionTimestamp is set
  std::string created_at;      // metadata.creationTimestamp, as written
  // status.startTime, else metadata.creationTimestamp, in unix seconds; 0
  // when neither is an RFC 3339 time.
  int64_t started_unix = 0;

  // Scheduling.
  int32_t priority = 0;      // spec.priority (0 when absent)
  bool may_preempt = true;   // spec.preemptionPolicy is not "Never"
  // The spec states placement preferences of its own that kube-scheduler
  // scores: a preferredDuringSchedulingIgnoredDuringExecution term of node
  // affinity, pod affinity or pod anti-affinity, or a topology spread
  // constraint with whenUnsatisfiable ScheduleAnyway (SoftPlacementPreferences).
  bool prefers_placement = false;
  // The workload its GPU-use history is kept under (core::WorkloadKey): its
  // tessera.io/workload label, else its controlling owner (a ReplicaSet of a
  // Deployment counts as the Deployment), else "Pod/NS/NAME".
  std::string workload;

  // The annotations Tessera writes and reads (codec.h). An annotation that is
  // absent or not a string reads as absent.
  std::optional<std::string> assignment;  // tessera.io/assignment, undecoded
  std::string assigned_at;                // tessera.io/assigned-at
  std::string allocated;                  // tessera.io/allocated ("main,sidecar")
  std::string usage;                      // tessera.io/usage, undecoded
  // The annotations that say how a bound pod's containers run (podspec.h), as
  // written: the node agent hands out the share with them (the extender
  // checked them before the bind).
  std::string priority_annotation;     // tessera.io/priority: high, normal, low
  std::string isolation_annotation;    // tessera.io/isolation: hook, mps, none
  std::string core_policy_annotation;  // tessera.io/gpu-core-policy: share, hard
  std::string core_limit_annotation;   // tessera.io/gpu-core-limit: percent of one GPU

  // The request. `wants_gpu`: a container or init container names a GPU
  // resource (WantsGpu: kube-scheduler's rule for calling the extender).
  // `request`: PodRequestFromJson, or the message that tells the user what to
  // fix. `host`: CPU and memory of the spec (PodHostResources; zero when
  // unreadable), which HeldRequest books for a bound pod.
  bool wants_gpu = false;
  Result<PodRequest> request = PodRequest{};
  HostResources host;

  // A variable a container's spec sets in its `env` (`envFrom` sources are
  // not read): the node agent refuses shares to pods that set its own.
  struct EnvVar {
    std::string container;  // the container's name ("" when it has none)
    std::string name;
    bool operator==(const EnvVar&) const = default;
  };
  std::vector<EnvVar> spec_env;  // init containers, then containers, each in spec order

  // A container of the spec as the node agent's Allocate reads it: the
  // resources it names, and the vocabulary its GPU request is written in.
  struct Container {
    std::string name;   // "" when it has none
    bool init = false;  // listed in spec.initContainers
    // Its resources.limits and resources.requests: every resource named,
    // with its quantity as written (an integer as its decimal text; "" for a
    // value that is neither a string nor an integer).
    std::map<std::string, std::string> limits, requests;
    // FrontEndOf the container, with the names the pod was decoded with.
    FrontEnd front_end = FrontEnd::kNone;
    // GpushareGiB of the container, with those names (0 when it names none).
    int64_t gpushare_gib = 0;

    // Whether its limits or requests name `resource`.
    bool Names(const std::string& resource) const { return limits.contains(resource) || requests.contains(resource); }
    bool operator==(const Container&) const = default;
  };
  // Init containers, then containers, each in spec order; entries that are
  // not objects are left out.
  std::vector<Container> containers;

  // DRA: the ResourceClaims the pod uses (spec.resourceClaims), in spec
  // order. `claim` is the claim's name: resourceClaimName when the pod names
  // one, else the name status.resourceClaimStatuses gives the claim made
  // from its template ("" until the resourceclaim controller made it).
  struct ClaimRef {
    std::string name;   // the pod's name for it (spec.resourceClaims[].name)
    std::string claim;  // the ResourceClaim's metadata.name; "" not known yet
    bool operator==(const ClaimRef&) const = default;
  };
  std::vector<ClaimRef> claims;

  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
};

// Decodes `pod` (a v1 Pod object) with the extended resource names `names`.
// INVALID_ARGUMENT, as PodKey says it, only when the pod has no identity
// (see the file comment); everything else is in the view.
Result<PodView> DecodePod(const nlohmann::json& pod, const ResourceNames& names);

// The request the ledger holds for a bound pod with `assignment` (HeldRequest
// in podspec.h): the pod's key and host resources, and per container the GPU
// shares exactly as the assignment grants them. INVALID_ARGUMENT when a
// container's shares differ between its GPUs (other than whole GPUs of
// different sizes).
Result<PodRequest> HeldRequest(const PodView& pod, const Assignment& assignment);

// Whether a pod spec (`spec`, a v1 PodSpec) states placement preferences
// that kube-scheduler scores (PodView::prefers_placement): a non-empty
// preferredDuringSchedulingIgnoredDuringExecution under spec.affinity's
// nodeAffinity, podAffinity or podAntiAffinity, or a topologySpreadConstraint
// with whenUnsatisfiable ScheduleAnyway. Required terms are filters, not
// preferences: false for them.
bool SoftPlacementPreferences(const nlohmann::json& spec);

// The workload key of a pod object (PodView::workload); "" only when it has
// no metadata.name.
std::string WorkloadOf(const nlohmann::json& pod);

}  // namespace tessera::core
