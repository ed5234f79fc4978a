#include "core/pod_view.h"

#include <chrono>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/codec.h"
#include "core/load.h"
#include "core/timestamp.h"

namespace tessera::core {
namespace {

using Json = nlohmann::json;

// The member `key` of `obj`; nullptr when `obj` is not an object, lacks it,
// or holds null there.
const Json* Member(const Json* obj, std::string_view key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  return it == obj->end() || it->is_null() ? nullptr : &*it;
}

// The string at `key` of `obj`, or "" when absent or not a string.
std::string Text(const Json* obj, std::string_view key) {
  const Json* v = Member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t UnixSeconds(const std::string& text) {
  if (text.empty()) return 0;
  Result<WallTime> t = ParseRfc3339(text);
  if (!t.ok()) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
}

// WorkloadOf on the pod's metadata object, `ns` already defaulted.
std::string WorkloadIn(const Json* meta, const std::string& ns, const std::string& name) {
  const Json* labels = Member(meta, "labels");
  const std::string label = Text(labels, kWorkloadLabel);
  const std::string pod_template_hash = Text(labels, "pod-template-hash");
  // The controlling owner (the first owner when none is marked controller).
  std::string kind, owner;
  if (const Json* refs = Member(meta, "ownerReferences"); refs != nullptr && refs->is_array()) {
    for (const Json& ref : *refs) {
      const Json* controller = Member(&ref, "controller");
      const bool controls = controller != nullptr && controller->is_boolean() && controller->get<bool>();
      if (kind.empty() || controls) {
        kind = Text(&ref, "kind");
        owner = Text(&ref, "name");
      }
      if (controls) break;
    }
  }
  // A Deployment's ReplicaSet is named DEPLOYMENT-HASH, the hash also in the
  // pod's pod-template-hash label; every rollout makes a new ReplicaSet, but
  // the workload is the same.
  if (kind == "ReplicaSet" && !pod_template_hash.empty() && owner.size() > pod_template_hash.size() + 1 &&
      owner.ends_with("-" + pod_template_hash)) {
    kind = "Deployment";
    owner.resize(owner.size() - pod_template_hash.size() - 1);
  }
  std::string key = WorkloadKey(ns, label, kind, owner);
  return key.empty() ? "Pod/" + ns + "/" + name : key;
}

// The resources of `list` (a container's limits or requests) by name, each
// quantity as written.
std::map<std::string, std::string> Quantities(const Json* list) {
  std::map<std::string, std::string> out;
  if (list == nullptr || !list->is_object()) return out;
  for (const auto& [resource, value] : list->items()) {
    out[resource] = value.is_string() ? value.get<std::string>() : value.is_number_integer() ? value.dump() : "";
  }
  return out;
}

// One container object of the spec.
PodView::Container ContainerOf(const Json& c, bool init, const ResourceNames& names) {
  PodView::Container out;
  out.name = Text(&c, "name");
  out.init = init;
  const Json* resources = Member(&c, "resources");
  out.limits = Quantities(Member(resources, "limits"));
  out.requests = Quantities(Member(resources, "requests"));
  out.front_end = FrontEndOf(c, names);
  out.gpushare_gib = GpushareGiB(c, names);
  return out;
}

Result<PodView> Decode(const Json& pod, const ResourceNames& names) {
  TESSERA_ASSIGN_OR_RETURN(std::string key, PodKey(pod));
  PodView v;
  v.key = std::move(key);
  const Json* meta = Member(&pod, "metadata");
  const Json* spec = Member(&pod, "spec");
  const Json* status = Member(&pod, "status");
  const Json* annotations = Member(meta, "annotations");
  v.name = Text(meta, "name");
  v.ns = v.key.substr(0, v.key.size() - v.name.size() - 1);
  v.uid = Text(meta, "uid");
  v.resource_version = Text(meta, "resourceVersion");

  v.phase = Text(status, "phase");
  v.node = Text(spec, "nodeName");
  v.nominated_node = Text(status, "nominatedNodeName");
  v.terminating = Member(meta, "deletionTimestamp") != nullptr;
  v.created_at = Text(meta, "creationTimestamp");
  v.started_unix = UnixSeconds(Text(status, "startTime"));
  if (v.started_unix == 0) v.started_unix = UnixSeconds(v.created_at);

  if (const Json* p = Member(spec, "priority"); p != nullptr && p->is_number_integer()) v.priority = p->get<int32_t>();
  v.may_preempt = Text(spec, "preemptionPolicy") != "Never";
  if (spec != nullptr) v.prefers_placement = SoftPlacementPreferences(*spec);
  v.workload = WorkloadIn(meta, v.ns, v.name);

  if (const Json* a = Member(annotations, kAssignmentAnnotation); a != nullptr && a->is_string())
    v.assignment = a->get<std::string>();
  v.assigned_at = Text(annotations, kAssignedAtAnnotation);
  v.allocated = Text(annotations, kAllocatedAnnotation);
  v.usage = Text(annotations, kUsageAnnotation);
  v.priority_annotation = Text(annotations, kPriorityAnnotation);
  v.isolation_annotation = Text(annotations, kIsolationAnnotation);
  v.core_policy_annotation = Text(annotations, kCorePolicyAnnotation);
  v.core_limit_annotation = Text(annotations, kCoreLimitAnnotation);

  for (const char* list : {"initContainers", "containers"}) {
    const Json* containers = Member(spec, list);
    if (containers == nullptr || !containers->is_array()) continue;
    for (const Json& c : *containers) {
      if (!c.is_object()) continue;
      v.containers.push_back(ContainerOf(c, list == std::string_view("initContainers"), names));
      const Json* env = Member(&c, "env");
      if (env == nullptr || !env->is_array()) continue;
      const std::string container = Text(&c, "name");
      for (const Json& e : *env) {
        if (std::string name = Text(&e, "name"); !name.empty()) v.spec_env.push_back({container, std::move(name)});
      }
    }
  }

  if (const Json* refs = Member(spec, "resourceClaims"); refs != nullptr && refs->is_array()) {
    const Json* generated = Member(status, "resourceClaimStatuses");
    for (const Json& ref : *refs) {
      PodView::ClaimRef c{Text(&ref, "name"), Text(&ref, "resourceClaimName")};
      if (c.claim.empty() && generated != nullptr && generated->is_array()) {
        for (const Json& g : *generated) {
          if (Text(&g, "name") == c.name) c.claim = Text(&g, "resourceClaimName");
        }
      }
      v.claims.push_back(std::move(c));
    }
  }

  v.wants_gpu = WantsGpu(pod, names);
  v.request = PodRequestFromJson(pod, names);
  if (v.request.ok()) {
    v.host = HostResources{v.request->cpu_milli, v.request->memory_mib};
  } else if (Result<HostResources> host = PodHostResources(pod); host.ok()) {
    v.host = *host;
  }
  return v;
}

}  // namespace

Result<PodView> DecodePod(const nlohmann::json& pod, const ResourceNames& names) {
  // The readers only use accessors that check types first; nothing nlohmann
  // throws may leave this file all the same.
  try {
    return Decode(pod, names);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("malformed pod object: ") + e.what());
  }
}

Result<PodRequest> HeldRequest(const PodView& pod, const Assignment& assignment) {
  PodRequest req;
  req.key = pod.key;
  req.cpu_milli = pod.host.cpu_milli;
  req.memory_mib = pod.host.memory_mib;
  for (const auto& ca : assignment.containers) {
    ContainerRequest c;
    c.name = ca.name;
    c.gpu_count = static_cast<int>(ca.gpus.size());
    if (!ca.gpus.empty()) {
      c.mem_mib_per_gpu = ca.gpus[0].mem_mib;
      c.core_milli_per_gpu = ca.gpus[0].core_milli;
      for (const auto& g : ca.gpus) {
        if (g.core_milli != c.core_milli_per_gpu)
          return InvalidArgument("container \"" + ca.name + "\" has unequal shares on its GPUs");
        if (g.mem_mib == c.mem_mib_per_gpu) continue;
        // Whole GPUs hold all of their memory (ShareMemMiB), which differs
        // between GPUs of different sizes.
        if (c.core_milli_per_gpu != kCoreMilliPerGpu)
          return InvalidArgument("container \"" + ca.name + "\" has unequal shares on its GPUs");
        c.mem_mib_per_gpu = 0;
      }
    }
    req.containers.push_back(std::move(c));
  }
  return req;
}

bool SoftPlacementPreferences(const nlohmann::json& spec) {
  const Json* affinity = Member(&spec, "affinity");
  for (const char* kind : {"nodeAffinity", "podAffinity", "podAntiAffinity"}) {
    const Json* preferred = Member(Member(affinity, kind), "preferredDuringSchedulingIgnoredDuringExecution");
    if (preferred != nullptr && preferred->is_array() && !preferred->empty()) return true;
  }
  if (const Json* spread = Member(&spec, "topologySpreadConstraints"); spread != nullptr && spread->is_array()) {
    for (const Json& c : *spread)
      if (Text(&c, "whenUnsatisfiable") == "ScheduleAnyway") return true;
  }
  return false;
}

std::string WorkloadOf(const nlohmann::json& pod) {
  const Json* meta = Member(&pod, "metadata");
  const std::string name = Text(meta, "name");
  if (name.empty()) return {};
  std::string ns = Text(meta, "namespace");
  if (ns.empty()) ns = "default";
  return WorkloadIn(meta, ns, name);
}

}  // namespace tessera::core
