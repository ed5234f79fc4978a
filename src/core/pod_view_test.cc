#include "core/pod_view.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/codec.h"

namespace tessera::core {
namespace {

using Json = nlohmann::json;

// A bound, running pod with every field the view reads.
Json FullPod() {
  return Json::parse(R"({
    "metadata": {
      "name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "1234",
      "creationTimestamp": "2026-03-01T12:00:00Z",
      "labels": {"tessera.io/workload": "bert"},
      "annotations": {
        "tessera.io/assignment": "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"main\",\"gpus\":[{\"index\":0,\"uuid\":\"GPU-0\",\"memMiB\":4096,\"coreMilli\":250}]}]}",
        "tessera.io/assigned-at": "2026-03-01T12:00:01Z",
        "tessera.io/allocated": "main",
        "tessera.io/usage": "{\"v\":1}",
        "tessera.io/priority": "high"
      }
    },
    "spec": {
      "nodeName": "n1", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority",
      "containers": [{"name": "main", "resources": {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"tessera.io/gpu-mem": "4096", "tessera.io/gpu-core": "25"}}}]
    },
    "status": {"phase": "Running", "startTime": "2026-03-01T12:00:10Z", "nominatedNodeName": "n2"}
  })");
}

TEST(PodViewTest, DecodesEveryFieldOnce) {
  Result<PodView> v = DecodePod(FullPod(), ResourceNames{});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->key, "ml/train-0");
  EXPECT_EQ(v->ns, "ml");
  EXPECT_EQ(v->name, "train-0");
  EXPECT_EQ(v->uid, "u-1");
  EXPECT_EQ(v->resource_version, "1234");
  EXPECT_EQ(v->phase, "Running");
  EXPECT_FALSE(v->terminal());
  EXPECT_EQ(v->node, "n1");
  EXPECT_EQ(v->nominated_node, "n2");
  EXPECT_FALSE(v->terminating);
  EXPECT_EQ(v->created_at, "2026-03-01T12:00:00Z");
  EXPECT_EQ(v->started_unix, 1772366410);  // startTime wins over creation
  EXPECT_EQ(v->priority, 1000);
  EXPECT_TRUE(v->may_preempt);
  EXPECT_EQ(v->workload, "label/ml/bert");
  ASSERT_TRUE(v->assignment.has_value());
  EXPECT_TRUE(DecodeAssignment(*v->assignment).ok());
  EXPECT_EQ(v->assigned_at, "2026-03-01T12:00:01Z");
  EXPECT_EQ(v->allocated, "main");
  EXPECT_EQ(v->usage, "{\"v\":1}");
  EXPECT_TRUE(v->wants_gpu);
  ASSERT_TRUE(v->request.ok()) << v->request.status().ToString();
  EXPECT_EQ(*v->request, *PodRequestFromJson(FullPod(), ResourceNames{}));
  EXPECT_EQ(v->request->priority, Priority::kHigh);
  EXPECT_EQ(v->host, (HostResources{500, 2048}));
}

TEST(PodViewTest, AbsentFieldsReadAsDefaults) {
  Result<PodView> v = DecodePod(Json::parse(R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}})"),
                                ResourceNames{});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->key, "default/p");
  EXPECT_EQ(v->ns, "default");
  EXPECT_EQ(v->uid, "");
  EXPECT_EQ(v->resource_version, "");
  EXPECT_EQ(v->phase, "");
  EXPECT_EQ(v->node, "");
  EXPECT_EQ(v->started_unix, 0);
  EXPECT_EQ(v->priority, 0);
  EXPECT_TRUE(v->may_preempt);
  EXPECT_FALSE(v->prefers_placement);
  EXPECT_EQ(v->workload, "Pod/default/p");
  EXPECT_FALSE(v->assignment.has_value());
  EXPECT_EQ(v->allocated, "");
  EXPECT_FALSE(v->wants_gpu);
  ASSERT_TRUE(v->request.ok());
  EXPECT_FALSE(v->request->UsesGpu());
}

TEST(PodViewTest, SoftPlacementPreferencesAreTheScoredOnesOnly) {
  auto prefers = [](const char* spec) { return SoftPlacementPreferences(Json::parse(spec)); };
  EXPECT_FALSE(prefers(R"({})"));
  // Required terms and DoNotSchedule spreading are filters.
  EXPECT_FALSE(prefers(R"({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
      {"topologyKey": "kubernetes.io/hostname"}]}}})"));
  EXPECT_FALSE(prefers(R"({"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]})"));
  EXPECT_FALSE(prefers(R"({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}})"));
  for (const char* kind : {"nodeAffinity", "podAffinity", "podAntiAffinity"}) {
    const std::string spec = std::string(R"({"affinity": {")") + kind +
                             R"(": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10}]}}})";
    EXPECT_TRUE(prefers(spec.c_str())) << kind;
  }
  EXPECT_TRUE(prefers(R"({"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"},
      {"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]})"));
  // Wrong types read as absent.
  EXPECT_FALSE(prefers(R"({"affinity": "x", "topologySpreadConstraints": {"a": 1}})"));
  // And the view carries it.
  Json pod = FullPod();
  pod["spec"]["topologySpreadConstraints"] = Json::parse(R"([{"whenUnsatisfiable": "ScheduleAnyway"}])");
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->prefers_placement);
}

TEST(PodViewTest, CreationTimeWhenNotStartedAndDeletion) {
  Json pod = FullPod();
  pod["status"].erase("startTime");
  pod["metadata"]["deletionTimestamp"] = "2026-03-01T13:00:00Z";
  pod["spec"]["preemptionPolicy"] = "Never";
  pod["status"]["phase"] = "Succeeded";
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->started_unix, 1772366400);
  EXPECT_TRUE(v->terminating);
  EXPECT_FALSE(v->may_preempt);
  EXPECT_TRUE(v->terminal());
  pod["metadata"]["deletionTimestamp"] = nullptr;  // null is not set
  EXPECT_FALSE(DecodePod(pod, ResourceNames{})->terminating);
}

TEST(PodViewTest, ClaimsByNameAndFromTemplates) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "p", "namespace": "ml"},
    "spec": {"resourceClaims": [
      {"name": "own", "resourceClaimName": "shared-claim"},
      {"name": "gpu", "resourceClaimTemplateName": "gpu-share"},
      {"name": "later", "resourceClaimTemplateName": "gpu-share"}]},
    "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}]}
  })");
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->claims.size(), 3u);
  EXPECT_EQ(v->claims[0], (PodView::ClaimRef{"own", "shared-claim"}));
  EXPECT_EQ(v->claims[1], (PodView::ClaimRef{"gpu", "p-gpu-x7k2"}));
  EXPECT_EQ(v->claims[2], (PodView::ClaimRef{"later", ""}));  // not made yet
  EXPECT_TRUE(DecodePod(FullPod(), ResourceNames{})->claims.empty());
}

TEST(PodViewTest, PodsWithoutIdentityFailWithAClearError) {
  for (const char* text : {R"([1,2])", R"("pod")", R"({})", R"({"metadata":{}})", R"({"metadata":{"name":""}})",
                           R"({"metadata":{"name":7}})", R"({"metadata":"x"})"}) {
    Result<PodView> v = DecodePod(Json::parse(text), ResourceNames{});
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(v.status().message(), "pod object has no metadata.name") << text;
  }
  Result<PodView> v = DecodePod(Json::parse(R"({"metadata":{"name":"p","namespace":3}})"), ResourceNames{});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "pod metadata.namespace must be a string");
}

TEST(PodViewTest, MalformedRequestIsKeptWithEverythingElse) {
  Json pod = FullPod();
  pod["spec"]["containers"][0]["resources"]["limits"]["tessera.io/gpu-core"] = "150";
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_FALSE(v->request.ok());
  EXPECT_EQ(v->request.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v->request.status().message(), PodRequestFromJson(pod, ResourceNames{}).status().message());
  EXPECT_NE(v->request.status().message().find("150"), std::string::npos) << v->request.status().message();
  // Nothing else is lost: the identity, the annotations and the host resources stay.
  EXPECT_TRUE(v->wants_gpu);
  EXPECT_EQ(v->key, "ml/train-0");
  EXPECT_EQ(v->uid, "u-1");
  EXPECT_TRUE(v->assignment.has_value());
  EXPECT_EQ(v->host, (HostResources{500, 2048}));
}

TEST(PodViewTest, FieldsOfTheWrongTypeReadAsAbsent) {
  Json pod = FullPod();
  pod["metadata"]["uid"] = 5;
  pod["metadata"]["annotations"][std::string(kAssignmentAnnotation)] = Json::object();
  pod["metadata"]["annotations"][std::string(kAllocatedAnnotation)] = 3;
  pod["metadata"]["ownerReferences"] = {{{"kind", "Job"}, {"name", "j"}, {"controller", "yes"}}};
  pod["metadata"]["labels"] = "not an object";
  pod["spec"]["priority"] = "high";
  pod["spec"]["nodeName"] = Json::array();
  pod["status"] = "weird";
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->uid, "");
  EXPECT_FALSE(v->assignment.has_value());
  EXPECT_EQ(v->allocated, "");
  EXPECT_EQ(v->workload, "Job/ml/j");
  EXPECT_EQ(v->priority, 0);
  EXPECT_EQ(v->node, "");
  EXPECT_EQ(v->phase, "");
  EXPECT_EQ(v->started_unix, 1772366400);
}

TEST(PodViewTest, MalformedSpecKeepsTheKeyAndTheError) {
  Json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}}, {"spec", {{"containers", "nope"}}}};
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE(v->request.ok());
  EXPECT_EQ(v->request.status().message(), "ns/p: spec.containers must be an array");
  EXPECT_EQ(v->host, HostResources{});
}

TEST(PodViewTest, SpecEnvNamesInitContainersFirst) {
  Json pod = FullPod();
  pod["spec"]["containers"][0]["env"] = {{{"name", "A"}, {"value", "1"}}, {{"name", 3}}, "junk", {{"name", "B"}}};
  pod["spec"]["initContainers"] = {{{"name", "init"}, {"env", {{{"name", "C"}}}}}, {{"name", "bare"}, {"env", "x"}}};
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->spec_env, (std::vector<PodView::EnvVar>{{"init", "C"}, {"main", "A"}, {"main", "B"}}));
}

TEST(PodViewTest, ShareAnnotationsAsWritten) {
  Json pod = FullPod();
  auto& annotations = pod["metadata"]["annotations"];
  annotations[std::string(kIsolationAnnotation)] = "mps";
  annotations[std::string(kCorePolicyAnnotation)] = "hard";
  annotations[std::string(kCoreLimitAnnotation)] = "60%";  // as written: the reader decides
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->priority_annotation, "high");
  EXPECT_EQ(v->isolation_annotation, "mps");
  EXPECT_EQ(v->core_policy_annotation, "hard");
  EXPECT_EQ(v->core_limit_annotation, "60%");
  annotations[std::string(kPriorityAnnotation)] = 1;  // not a string: absent
  annotations.erase(std::string(kIsolationAnnotation));
  v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->priority_annotation, "");
  EXPECT_EQ(v->isolation_annotation, "");
}

TEST(PodViewTest, ContainersInitFirstWithTheirResourcesAndVocabulary) {
  Json pod = FullPod();
  pod["spec"]["containers"].push_back(
      {{"name", "gs"}, {"resources", {{"limits", {{"aliyun.com/gpu-mem", "3"}}}, {"requests", {{"cpu", 2}}}}}});
  pod["spec"]["containers"].push_back("junk");
  pod["spec"]["containers"].push_back({{"resources", {{"limits", {{"x.io/odd", 1.5}}}}}});
  pod["spec"]["initContainers"] = {{{"name", "init"}, {"resources", "nope"}}};
  ResourceNames names;
  names.gpushare.enabled = true;
  Result<PodView> v = DecodePod(pod, names);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->containers.size(), 4u);  // "junk" is not a container

  const PodView::Container& init = v->containers[0];
  EXPECT_EQ(init.name, "init");
  EXPECT_TRUE(init.init);
  EXPECT_TRUE(init.limits.empty());
  EXPECT_EQ(init.front_end, FrontEnd::kNone);

  const PodView::Container& main = v->containers[1];
  EXPECT_EQ(main.name, "main");
  EXPECT_FALSE(main.init);
  EXPECT_EQ(main.limits, (std::map<std::string, std::string>{{"tessera.io/gpu-core", "25"},
                                                             {"tessera.io/gpu-mem", "4096"}}));
  EXPECT_EQ(main.requests, (std::map<std::string, std::string>{{"cpu", "500m"}, {"memory", "2Gi"}}));
  EXPECT_EQ(main.front_end, FrontEnd::kTessera);
  EXPECT_EQ(main.gpushare_gib, 0);
  EXPECT_TRUE(main.Names("tessera.io/gpu-mem"));
  EXPECT_TRUE(main.Names("cpu"));  // requests count too
  EXPECT_FALSE(main.Names("tessera.io/gpu"));

  const PodView::Container& gs = v->containers[2];
  EXPECT_EQ(gs.front_end, FrontEnd::kGpushare);
  EXPECT_EQ(gs.gpushare_gib, 3);
  EXPECT_EQ(gs.requests.at("cpu"), "2");  // an integer, as its decimal text

  const PodView::Container& unnamed = v->containers[3];
  EXPECT_EQ(unnamed.name, "");
  EXPECT_EQ(unnamed.limits.at("x.io/odd"), "");  // neither a string nor an integer: named, no quantity
  EXPECT_TRUE(unnamed.Names("x.io/odd"));

  // The vocabulary follows the names decoded with: gpushare's off, its
  // container asks in none.
  v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->containers[2].front_end, FrontEnd::kNone);
  EXPECT_EQ(v->containers[2].front_end, FrontEndOf(pod["spec"]["containers"][1], ResourceNames{}));
}

TEST(PodViewTest, HeldRequestMatchesTheJsonReading) {
  const Json pod = FullPod();
  Result<PodView> v = DecodePod(pod, ResourceNames{});
  ASSERT_TRUE(v.ok());
  Result<Assignment> a = DecodeAssignment(*v->assignment);
  ASSERT_TRUE(a.ok());
  Result<PodRequest> held = HeldRequest(*v, *a);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(*held, *HeldRequest(pod, v->key, *a));
  EXPECT_EQ(held->cpu_milli, 500);
  ASSERT_EQ(held->containers.size(), 1u);
  EXPECT_EQ(held->containers[0].core_milli_per_gpu, 250);
  a->containers[0].gpus.push_back({1, "GPU-1", 4096, 300});
  EXPECT_FALSE(HeldRequest(*v, *a).ok());
}

TEST(PodViewTest, WorkloadOfJsonAgreesWithTheView) {
  Json pod = FullPod();
  pod["metadata"]["labels"] = {{"pod-template-hash", "7d9f8"}};
  pod["metadata"]["ownerReferences"] = {{{"kind", "ReplicaSet"}, {"name", "web-7d9f8"}, {"controller", true}}};
  EXPECT_EQ(WorkloadOf(pod), "Deployment/ml/web");
  EXPECT_EQ(DecodePod(pod, ResourceNames{})->workload, "Deployment/ml/web");
  EXPECT_EQ(WorkloadOf(Json::array()), "");
}

}  // namespace
}  // namespace tessera::core
