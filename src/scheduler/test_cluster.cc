#include "scheduler/test_cluster.h"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "core/codec.h"

namespace tessera::scheduler::testing {

using Json = nlohmann::json;

std::shared_ptr<spdlog::logger> QuietLogger() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

ClusterStateOptions QuietStateOptions() {
  ClusterStateOptions o;
  o.logger = QuietLogger();
  return o;
}

Result<core::Assignment> PickAndAssume(ClusterState& state, const core::PodRequest& pod, std::string_view uid,
                                       std::string_view node, const PickFn& pick, Clock::time_point now) {
  Result<core::NodeState> copy = state.Read([&](const ClusterView& view) -> Result<core::NodeState> {
    TESSERA_ASSIGN_OR_RETURN(const core::NodeState* target, view.BindTarget(pod.key, node));
    return *target;
  });
  if (!copy.ok()) return copy.status();
  TESSERA_ASSIGN_OR_RETURN(core::Assignment chosen, pick(*copy));
  const SlotAsk slots{state.options().resources.gpu, pod.TotalGpuCount(), 0};  // a Tessera pod's
  return state.Assume(pod, slots, uid, chosen, copy->version, now);
}

std::string GpuUuid(const std::string& node, int index) { return "GPU-" + node + "-" + std::to_string(index); }

Json NodeJson(const std::string& name, int gpus, const std::string& model, int64_t gpu_mem_mib,
              const std::string& cpu, const std::string& memory) {
  std::vector<core::GpuInfo> list;
  for (int i = 0; i < gpus; ++i) {
    core::GpuInfo g;
    g.index = i;
    g.uuid = GpuUuid(name, i);
    g.model = model;
    g.memory_mib = gpu_mem_mib;
    g.sm_count = 108;
    g.numa_node = i * 2 / std::max(gpus, 1);
    list.push_back(g);
  }
  return NodeJson(name, list, cpu, memory);
}

Json NodeJson(const std::string& name, const std::vector<core::GpuInfo>& gpus, const std::string& cpu,
              const std::string& memory) {
  Json node = {
      {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}, {"annotations", Json::object()}}},
      {"spec", Json::object()},
      {"status",
       {{"allocatable", {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}, {"tessera.io/gpu", std::to_string(gpus.size() * 8)}}},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  auto inventory = core::EncodeInventory(gpus);
  if (inventory.ok()) node["metadata"]["annotations"][std::string(core::kInventoryAnnotation)] = *inventory;
  return node;
}

Json PodJson(const std::string& ns, const std::string& name, const std::vector<Container>& containers,
             const std::map<std::string, std::string>& annotations, const std::string& uid) {
  Json pod = {{"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", uid.empty() ? "uid-" + ns + "-" + name : uid},
                {"labels", {{"app", name}}},
                {"annotations", Json::object()}}},
              {"spec", {{"schedulerName", "default-scheduler"}, {"containers", Json::array()}}},
              {"status", {{"phase", "Pending"}}}};
  for (const auto& [k, v] : annotations) pod["metadata"]["annotations"][k] = v;
  for (const Container& c : containers) {
    Json limits = Json::object();
    if (c.gpus > 0) limits["tessera.io/gpu"] = std::to_string(c.gpus);
    if (c.mem_mib > 0) limits["tessera.io/gpu-mem"] = std::to_string(c.mem_mib);
    if (c.core_percent > 0) limits["tessera.io/gpu-core"] = std::to_string(c.core_percent);
    pod["spec"]["containers"].push_back(
        {{"name", c.name},
         {"image", "registry.example.com/train:1.0"},
         {"resources", {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}}}, {"limits", limits}}}});
  }
  return pod;
}

Json BoundPodJson(Json pod, const core::Assignment& assignment, const std::string& phase) {
  pod["spec"]["nodeName"] = assignment.node;
  pod["status"]["phase"] = phase;
  auto text = core::EncodeAssignment(assignment);
  if (text.ok()) pod["metadata"]["annotations"][std::string(core::kAssignmentAnnotation)] = *text;
  return pod;
}

std::string FilterBody(const Json& pod, const std::vector<std::string>& node_names) {
  return Json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", node_names}}.dump();
}

std::string NodesFilterBody(const Json& pod, const std::vector<Json>& nodes) {
  return Json{{"Pod", pod}, {"Nodes", {{"items", nodes}}}, {"NodeNames", nullptr}}.dump();
}

std::string BindBody(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node) {
  return Json{{"PodName", name}, {"PodNamespace", ns}, {"PodUID", uid}, {"Node", node}}.dump();
}

Status FakeBinder::Bind(const std::string& pod_namespace, const std::string& pod_name, const std::string& pod_uid,
                        const std::string& node, const std::map<std::string, std::string>& annotations) {
  Call call{pod_namespace, pod_name, pod_uid, node, annotations};
  if (on_bind) on_bind(call);
  MutexLock lock(mu_);
  if (!fail_with_.ok()) return fail_with_;
  calls_.push_back(std::move(call));
  return Status();
}

void FakeBinder::FailWith(Status status) {
  MutexLock lock(mu_);
  fail_with_ = std::move(status);
}

std::vector<FakeBinder::Call> FakeBinder::calls() const {
  MutexLock lock(mu_);
  return calls_;
}

nlohmann::json SliceJson(const std::string& node, const std::vector<int>& indexes, int64_t mem_mib) {
  nlohmann::json devices = nlohmann::json::array();
  for (int i : indexes) {
    devices.push_back({{"name", "gpu-" + std::to_string(i)},
                       {"allowMultipleAllocations", true},
                       {"attributes", {{"index", {{"int", i}}}, {"uuid", {{"string", GpuUuid(node, i)}}}}},
                       {"capacity", {{"memory", {{"value", std::to_string(mem_mib) + "Mi"}}}, {"compute", {{"value", "100"}}}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.tessera.io"}}},
          {"spec",
           {{"driver", "gpu.tessera.io"},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

nlohmann::json ClaimJson(const std::string& ns, const std::string& name, const std::vector<ClaimAsk>& asks,
                         const std::string& pool, const std::vector<ClaimGot>& got) {
  nlohmann::json requests = nlohmann::json::array();
  for (const ClaimAsk& a : asks) {
    nlohmann::json exactly = {{"deviceClassName", "gpu.tessera.io"}, {"count", a.count}};
    if (a.mem_mib > 0) exactly["capacity"]["requests"]["memory"] = std::to_string(a.mem_mib) + "Mi";
    if (a.percent > 0) exactly["capacity"]["requests"]["compute"] = std::to_string(a.percent);
    requests.push_back({{"name", a.name}, {"exactly", exactly}});
  }
  nlohmann::json claim = {{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceClaim"},
                          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-claim-" + ns + "-" + name}}},
                          {"spec", {{"devices", {{"requests", requests}}}}}};
  if (got.empty()) return claim;
  nlohmann::json results = nlohmann::json::array();
  for (const ClaimGot& g : got) {
    nlohmann::json r = {{"request", asks.empty() ? "gpu" : asks[0].name},
                        {"driver", "gpu.tessera.io"},
                        {"pool", pool},
                        {"device", "gpu-" + std::to_string(g.index)}};
    if (g.consumed) {
      r["consumedCapacity"] = nlohmann::json::object();
      if (g.mem_mib > 0) r["consumedCapacity"]["memory"] = std::to_string(g.mem_mib) + "Mi";
      if (g.percent > 0) r["consumedCapacity"]["compute"] = std::to_string(g.percent);
      r["shareID"] = "share-" + name + "-" + std::to_string(g.index);
    }
    results.push_back(r);
  }
  claim["status"]["allocation"]["devices"]["results"] = results;
  return claim;
}

nlohmann::json WithClaims(nlohmann::json pod, const std::vector<std::string>& claim_names) {
  nlohmann::json refs = nlohmann::json::array();
  for (const std::string& c : claim_names) refs.push_back({{"name", c}, {"resourceClaimName", c}});
  pod["spec"]["resourceClaims"] = refs;
  return pod;
}

}  // namespace tessera::scheduler::testing
