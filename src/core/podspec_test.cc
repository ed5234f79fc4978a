#include "core/podspec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/codec.h"

namespace tessera::core {
namespace {

using Json = nlohmann::json;

// A pod with one container per entry of `limits` (name -> limits object).
Json Pod(const std::vector<std::pair<std::string, Json>>& containers, Json annotations = Json::object()) {
  Json pod = {{"metadata", {{"name", "p1"}, {"namespace", "team"}, {"uid", "u1"}, {"annotations", annotations}}},
              {"spec", {{"containers", Json::array()}}}};
  for (const auto& [name, limits] : containers)
    pod["spec"]["containers"].push_back({{"name", name}, {"resources", {{"limits", limits}}}});
  return pod;
}

Result<PodRequest> Parse(const Json& pod) { return PodRequestFromJson(pod, ResourceNames{}); }

// The message of a failed parse ("" when it succeeded).
std::string Error(const Json& pod) {
  auto r = Parse(pod);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

TEST(PodSpecTest, ShareOfOneGpu) {
  Json pod = Pod({{"worker", {{"tessera.io/gpu-mem", "8192"}, {"tessera.io/gpu-core", "30"}}}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "500m"}, {"memory", "2Gi"}};
  auto r = Parse(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->key, "team/p1");
  EXPECT_EQ(r->cpu_milli, 500);
  EXPECT_EQ(r->memory_mib, 2048);
  ASSERT_EQ(r->containers.size(), 1u);
  const ContainerRequest& c = r->containers[0];
  EXPECT_EQ(c.name, "worker");
  EXPECT_EQ(c.gpu_count, 1);
  EXPECT_EQ(c.mem_mib_per_gpu, 8192);
  EXPECT_EQ(c.core_milli_per_gpu, 300);
  EXPECT_EQ(r->priority, Priority::kNormal);
}

TEST(PodSpecTest, IsolationAnnotation) {
  const std::pair<std::string, Json> c = {"worker", {{"tessera.io/gpu-mem", "1024"}, {"tessera.io/gpu-core", "30"}}};
  EXPECT_EQ(Parse(Pod({c}))->isolation, Isolation::kHook);
  EXPECT_EQ(Parse(Pod({c}, {{"tessera.io/isolation", "mps"}}))->isolation, Isolation::kMps);
  EXPECT_EQ(Parse(Pod({c}, {{"tessera.io/isolation", "none"}}))->isolation, Isolation::kNone);
  auto bad = Parse(Pod({c}, {{"tessera.io/isolation", "MPS"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tessera.io/isolation: \"MPS\" is not one of hook, mps, none"),
            std::string::npos)
      << bad.status().message();
}

TEST(PodSpecTest, CorePolicyAndBurstCeiling) {
  const std::pair<std::string, Json> c = {"worker", {{"tessera.io/gpu-mem", "1024"}, {"tessera.io/gpu-core", "20"}}};
  auto plain = Parse(Pod({c}));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->core_hard);
  EXPECT_EQ(plain->core_limit_milli, 0);
  EXPECT_TRUE(Parse(Pod({c}, {{"tessera.io/gpu-core-policy", "hard"}}))->core_hard);
  EXPECT_FALSE(Parse(Pod({c}, {{"tessera.io/gpu-core-policy", "share"}}))->core_hard);
  EXPECT_EQ(Error(Pod({c}, {{"tessera.io/gpu-core-policy", "Hard"}})),
            "team/p1: annotation tessera.io/gpu-core-policy: \"Hard\" is not one of share, hard");

  auto burst = Parse(Pod({c}, {{"tessera.io/gpu-core-limit", "60"}}));
  ASSERT_TRUE(burst.ok()) << burst.status().ToString();
  EXPECT_EQ(burst->core_limit_milli, 600);
  EXPECT_EQ(burst->containers[0].core_milli_per_gpu, 200);  // the request stays what is scheduled
  EXPECT_EQ(Parse(Pod({c}, {{"tessera.io/gpu-core-limit", "20"}}))->core_limit_milli, 200);

  for (const char* bad : {"0", "101", "60%", "0.5", "", "sixty", "-5"}) {
    EXPECT_NE(Error(Pod({c}, {{"tessera.io/gpu-core-limit", bad}}))
                  .find("is not a whole percent of one GPU from 1 to 100"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(Error(Pod({c}, {{"tessera.io/gpu-core-limit", "10"}})).find("below container \"worker\"'s gpu-core request of 20 percent"),
            std::string::npos);
  EXPECT_NE(Error(Pod({c}, {{"tessera.io/gpu-core-limit", "60"}, {"tessera.io/gpu-core-policy", "hard"}}))
                .find("needs tessera.io/gpu-core-policy: share"),
            std::string::npos);
  EXPECT_NE(Error(Pod({c}, {{"tessera.io/gpu-core-limit", "60"}, {"tessera.io/isolation", "mps"}}))
                .find("no burst with tessera.io/isolation: mps"),
            std::string::npos);
  const std::pair<std::string, Json> mem_only = {"worker", {{"tessera.io/gpu-mem", "1024"}}};
  EXPECT_NE(Error(Pod({mem_only}, {{"tessera.io/gpu-core-limit", "60"}})).find("nothing to burst from"),
            std::string::npos);
  const std::pair<std::string, Json> cpu_only = {"worker", {{"cpu", "1"}}};
  EXPECT_NE(Error(Pod({cpu_only}, {{"tessera.io/gpu-core-limit", "60"}})).find("the pod asks for no GPU"),
            std::string::npos);
}

TEST(PodSpecTest, CountAloneMeansWholeGpus) {
  auto r = Parse(Pod({{"train", {{"tessera.io/gpu", "2"}}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].gpu_count, 2);
  EXPECT_EQ(r->containers[0].core_milli_per_gpu, 1000);
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 0);
}

TEST(PodSpecTest, IntegersAndRequestsAreAccepted) {
  Json pod = Pod({{"c", Json::object()}});
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"tessera.io/gpu-mem", 4096}}}};
  auto r = Parse(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].gpu_count, 1);
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 4096);
  EXPECT_EQ(r->containers[0].core_milli_per_gpu, 0);
}

TEST(PodSpecTest, LimitsWinOverRequestsForGpuResources) {
  Json pod = Pod({{"c", {{"tessera.io/gpu-mem", "1000"}}}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"tessera.io/gpu-mem", "2000"}};
  auto r = Parse(pod);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 1000);
}

TEST(PodSpecTest, CpuAndMemoryAreMaxOfSumAndLargestInit) {
  Json pod = Pod({{"a", {{"tessera.io/gpu-mem", "1024"}}}, {"b", Json::object()}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "1"}, {"memory", "1Gi"}};
  pod["spec"]["containers"][1]["resources"]["limits"] = {{"cpu", "2"}, {"memory", "1Gi"}};  // limits only
  pod["spec"]["initContainers"] = {{{"name", "init"}, {"resources", {{"requests", {{"cpu", "4"}, {"memory", "512Mi"}}}}}}};
  auto r = Parse(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cpu_milli, 4000);     // init 4 > 1 + 2
  EXPECT_EQ(r->memory_mib, 2048);    // 1Gi + 1Gi > 512Mi
  ASSERT_EQ(r->containers.size(), 2u);
  EXPECT_EQ(r->containers[1].gpu_count, 0);
  auto host = PodHostResources(pod);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(*host, (HostResources{4000, 2048}));
}

TEST(PodSpecTest, AnnotationsSetModelsAndPriority) {
  Json pod = Pod({{"c", {{"tessera.io/gpu-core", "50"}}}, {"side", Json::object()}},
                 {{"tessera.io/gpu-model", "A100 | H100"}, {"tessera.io/gpu-model-avoid", "T4"},
                  {"tessera.io/priority", "high"}});
  auto r = Parse(pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].models.allowed, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(r->containers[0].models.avoided, (std::vector<std::string>{"T4"}));
  EXPECT_TRUE(r->containers[1].models.Unconstrained());
  EXPECT_EQ(r->priority, Priority::kHigh);
}

TEST(PodSpecTest, NamespaceDefaults) {
  Json pod = Pod({{"c", {{"tessera.io/gpu", "1"}}}});
  pod["metadata"].erase("namespace");
  auto key = PodKey(pod);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "default/p1");
}

TEST(PodSpecTest, CustomResourceNames) {
  ResourceNames names;
  names.gpu = "example.com/gpu";
  names.mem = "example.com/mem";
  names.core = "example.com/core";
  Json pod = Pod({{"c", {{"example.com/mem", "100"}, {"tessera.io/gpu-core", "500"}}}});
  auto r = PodRequestFromJson(pod, names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 100);
  EXPECT_EQ(r->containers[0].core_milli_per_gpu, 0);
  EXPECT_TRUE(WantsGpu(pod, names));
  EXPECT_FALSE(WantsGpu(Pod({{"c", {{"tessera.io/gpu-core", "5"}}}}), names));
}

TEST(PodSpecTest, MistakesNameTheContainerAndTheFix) {
  struct Case {
    Json limits;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {{{"tessera.io/gpu-core", "150"}},
       {"container \"worker\": tessera.io/gpu-core: 150 is over 100 (percent of one GPU)"}},
      {{{"tessera.io/gpu-core", "-5"}}, {"container \"worker\"", "tessera.io/gpu-core", "negative"}},
      {{{"tessera.io/gpu-mem", "1.5"}}, {"container \"worker\"", "tessera.io/gpu-mem", "whole number", "MiB"}},
      {{{"tessera.io/gpu-mem", "abc"}}, {"tessera.io/gpu-mem", "\"abc\"", "whole number of MiB"}},
      {{{"tessera.io/gpu-mem", ""}}, {"tessera.io/gpu-mem: \"\" is not a whole number"}},
      {{{"tessera.io/gpu-mem", true}}, {"tessera.io/gpu-mem", "quantity string"}},
      {{{"tessera.io/gpu-mem", 1.5}}, {"tessera.io/gpu-mem", "number 1.5"}},
      {{{"tessera.io/gpu-mem", "8Gi"}}, {"plain number of MiB", "write \"8192\""}},
      {{{"tessera.io/gpu", "0.5"}}, {"tessera.io/gpu", "whole number of GPUs"}},
      {{{"tessera.io/gpu", "65"}}, {"65 GPUs is more than any node has"}},
      {{{"tessera.io/gpu", "99999999999999"}}, {"more than any node has"}},
      {{{"tessera.io/gpu", "2"}, {"tessera.io/gpu-core", "30"}}, {"container \"worker\"", "whole"}},
      {{{"tessera.io/gpu", "0"}, {"tessera.io/gpu-mem", "100"}}, {"container \"worker\"", "0 GPUs"}},
      {{{"tessera.io/gpu-mem", "0"}}, {"container \"worker\"", "neither memory nor core"}},
      {{{"tessera.io/gpu-mem", "1024"}, {"tessera.io/gpu-core", "0"}},
       {"container \"worker\": tessera.io/gpu-core: 0 is not a share of compute: ask for 1 to 100 (percent of one "
        "GPU), or leave tessera.io/gpu-core out for a share of memory alone"}},
      {{{"tessera.io/gpu-core", "0"}}, {"tessera.io/gpu-core: 0 is not a share of compute"}},
  };
  for (const Case& c : cases) {
    const std::string msg = Error(Pod({{"worker", c.limits}}));
    for (const auto& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << c.limits << " -> " << msg;
  }
}

// Both compatibility front ends on, with their default names.
ResourceNames CompatNames() {
  ResourceNames names;
  names.gpushare.enabled = true;
  names.hami.enabled = true;
  return names;
}

std::string CompatError(const Json& pod) {
  auto r = PodRequestFromJson(pod, CompatNames());
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

TEST(FrontEndTest, GpushareGibOnOneGpu) {
  Json pod = Pod({{"tf", {{"aliyun.com/gpu-mem", "3"}}}, {"log", Json::object()}});
  auto r = PodRequestFromJson(pod, CompatNames());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->containers.size(), 2u);
  EXPECT_EQ(r->containers[0].gpu_count, 1);
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 3 * 1024);
  EXPECT_EQ(r->containers[0].core_milli_per_gpu, 0);
  EXPECT_EQ(r->containers[1].gpu_count, 0);
  EXPECT_TRUE(WantsGpu(pod, CompatNames()));
  EXPECT_EQ(FrontEndOf(pod["spec"]["containers"][0], CompatNames()), FrontEnd::kGpushare);
  EXPECT_EQ(FrontEndOf(pod["spec"]["containers"][1], CompatNames()), FrontEnd::kNone);
  EXPECT_EQ(GpushareGiB(pod["spec"]["containers"][0], CompatNames()), 3);
  // Integers from hand-written JSON, and requests when there are no limits.
  Json req = Pod({{"tf", Json::object()}});
  req["spec"]["containers"][0]["resources"] = {{"requests", {{"aliyun.com/gpu-mem", 5}}}};
  auto r2 = PodRequestFromJson(req, CompatNames());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->containers[0].mem_mib_per_gpu, 5 * 1024);
  EXPECT_EQ(GpushareGiB(req["spec"]["containers"][0], CompatNames()), 5);
  // 0 GiB asks for no GPU, as in gpushare.
  auto zero = PodRequestFromJson(Pod({{"tf", {{"aliyun.com/gpu-mem", "0"}}}}), CompatNames());
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->containers[0].gpu_count, 0);
}

TEST(FrontEndTest, HamiSharesPerGpu) {
  auto r = PodRequestFromJson(
      Pod({{"infer", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}}}}),
      CompatNames());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].gpu_count, 1);
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 3000);
  EXPECT_EQ(r->containers[0].core_milli_per_gpu, 300);

  // Memory on two GPUs, no compute share.
  r = PodRequestFromJson(Pod({{"c", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "4096"}}}}), CompatNames());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].gpu_count, 2);
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 4096);
  EXPECT_EQ(r->containers[0].core_milli_per_gpu, 0);

  // The count alone, or with the whole memory: whole GPUs.
  for (const Json& limits : {Json{{"nvidia.com/gpu", "2"}},
                             Json{{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem-percentage", "100"}},
                             Json{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "100"},
                                  {"nvidia.com/gpucores", "100"}}}) {
    r = PodRequestFromJson(Pod({{"c", limits}}), CompatNames());
    ASSERT_TRUE(r.ok()) << limits << ": " << r.status().ToString();
    EXPECT_EQ(r->containers[0].core_milli_per_gpu, 1000) << limits;
    EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 0) << limits;
  }

  // A share without the count asks for one GPU.
  r = PodRequestFromJson(Pod({{"c", {{"nvidia.com/gpumem", "1024"}}}}), CompatNames());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].gpu_count, 1);
  EXPECT_EQ(FrontEndOf(Pod({{"c", {{"nvidia.com/gpumem", "1"}}}})["spec"]["containers"][0], CompatNames()),
            FrontEnd::kHami);
}

TEST(FrontEndTest, HamiCountNameIsConfigurable) {
  ResourceNames names = CompatNames();
  names.hami.gpu = "hami.io/vgpu";
  Json pod = Pod({{"c", {{"hami.io/vgpu", "1"}, {"nvidia.com/gpumem", "2000"}}}});
  auto r = PodRequestFromJson(pod, names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->containers[0].gpu_count, 1);
  EXPECT_EQ(r->containers[0].mem_mib_per_gpu, 2000);
  // nvidia.com/gpu then belongs to NVIDIA's own device plugin: not a GPU share.
  Json plain = Pod({{"c", {{"nvidia.com/gpu", "1"}}}});
  EXPECT_FALSE(WantsGpu(plain, names));
  EXPECT_TRUE(WantsGpu(plain, CompatNames()));
}

TEST(FrontEndTest, DisabledFrontEndsAreNotRead) {
  const ResourceNames names;  // defaults: both off
  Json gpushare = Pod({{"c", {{"aliyun.com/gpu-mem", "3"}}}});
  Json hami = Pod({{"c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}}});
  EXPECT_FALSE(WantsGpu(gpushare, names));
  EXPECT_FALSE(WantsGpu(hami, names));
  auto r = PodRequestFromJson(gpushare, names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->UsesGpu());
  EXPECT_EQ(FrontEndOf(gpushare["spec"]["containers"][0], names), FrontEnd::kNone);
  EXPECT_EQ(names.All(), (std::vector<std::string>{"tessera.io/gpu", "tessera.io/gpu-mem", "tessera.io/gpu-core"}));
  EXPECT_EQ(CompatNames().All().size(), 8u);
}

TEST(FrontEndTest, MistakesNameTheContainerAndResources) {
  struct Case {
    Json limits;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {{{"tessera.io/gpu-mem", "4096"}, {"aliyun.com/gpu-mem", "4"}},
       {"container \"worker\"", "mixes", "tessera.io/gpu-mem", "aliyun.com/gpu-mem"}},
      {{{"aliyun.com/gpu-mem", "4"}, {"nvidia.com/gpucores", "30"}},
       {"container \"worker\"", "aliyun.com/gpu-mem", "nvidia.com/gpucores"}},
      {{{"tessera.io/gpu", "1"}, {"nvidia.com/gpu", "1"}}, {"tessera.io/gpu", "nvidia.com/gpu"}},
      {{{"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpumem-percentage", "50"}},
       {"container \"worker\"", "both nvidia.com/gpumem and nvidia.com/gpumem-percentage"}},
      {{{"aliyun.com/gpu-mem", "1.5"}}, {"container \"worker\"", "aliyun.com/gpu-mem", "whole number of GiB"}},
      {{{"aliyun.com/gpu-mem", "-2"}}, {"aliyun.com/gpu-mem", "negative"}},
      {{{"aliyun.com/gpu-mem", "3Gi"}}, {"aliyun.com/gpu-mem", "unit suffix", "\"3\""}},
      {{{"nvidia.com/gpumem", "3Gi"}}, {"nvidia.com/gpumem", "plain number of MiB", "\"3072\""}},
      {{{"nvidia.com/gpucores", "150"}}, {"nvidia.com/gpucores: 150 is over 100"}},
      {{{"nvidia.com/gpumem-percentage", "120"}}, {"nvidia.com/gpumem-percentage: 120 is over 100"}},
      {{{"nvidia.com/gpumem-percentage", "50"}}, {"nvidia.com/gpumem-percentage: 50 percent is not supported",
                                                   "nvidia.com/gpumem in MiB"}},
      {{{"nvidia.com/gpumem-percentage", "100"}, {"nvidia.com/gpucores", "30"}}, {"whole memory"}},
      {{{"nvidia.com/gpumem-percentage", "0"}}, {"nvidia.com/gpumem-percentage: 0 asks for no memory"}},
      {{{"nvidia.com/gpu", "0"}, {"nvidia.com/gpumem", "100"}}, {"container \"worker\"", "0 GPUs"}},
      {{{"nvidia.com/gpu", "2"}, {"nvidia.com/gpucores", "30"}}, {"container \"worker\"", "whole"}},
      {{{"nvidia.com/gpu", "x"}}, {"nvidia.com/gpu", "whole number of GPUs"}},
  };
  for (const Case& c : cases) {
    const std::string msg = CompatError(Pod({{"worker", c.limits}}));
    for (const auto& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << c.limits << " -> " << msg;
  }
}

TEST(FrontEndTest, InitContainersAreRejectedInEveryVocabulary) {
  Json pod = Pod({{"c", Json::object()}});
  pod["spec"]["initContainers"] = {{{"name", "warm"}, {"resources", {{"limits", {{"aliyun.com/gpu-mem", "1"}}}}}}};
  EXPECT_NE(CompatError(pod).find("init container \"warm\""), std::string::npos);
}

TEST(PodSpecTest, BadAnnotations) {
  Json limits = {{"tessera.io/gpu-core", "10"}};
  EXPECT_NE(Error(Pod({{"c", limits}}, {{"tessera.io/priority", "urgent"}})).find("not one of high, normal, low"),
            std::string::npos);
  EXPECT_NE(Error(Pod({{"c", limits}}, {{"tessera.io/gpu-model", "A100||H100"}})).find("empty model name"),
            std::string::npos);
  EXPECT_NE(Error(Pod({{"c", limits}}, {{"tessera.io/gpu-model", "A100"}, {"tessera.io/gpu-model-avoid", "A100"}}))
                .find("both allowed and avoided"),
            std::string::npos);
}

TEST(PodSpecTest, InitContainerGpusAreRejected) {
  Json pod = Pod({{"c", Json::object()}});
  pod["spec"]["initContainers"] = {{{"name", "warm"}, {"resources", {{"limits", {{"tessera.io/gpu-mem", "10"}}}}}}};
  EXPECT_NE(Error(pod).find("init container \"warm\""), std::string::npos);
  EXPECT_TRUE(WantsGpu(pod, ResourceNames{}));
}

TEST(PodSpecTest, MalformedObjects) {
  for (const Json& pod : {Json(nullptr), Json(42), Json::array(), Json::object(), Json{{"metadata", {{"name", 3}}}},
                          Json{{"metadata", {{"name", "p"}}}}, Json{{"metadata", {{"name", "p"}}}, {"spec", 1}},
                          Json{{"metadata", {{"name", "p"}}}, {"spec", {{"containers", {1, 2}}}}},
                          Json{{"metadata", {{"name", "p"}, {"namespace", 7}}}, {"spec", {{"containers", Json::array()}}}},
                          Json{{"metadata", {{"name", "p"}}}, {"spec", {{"containers", {{{"name", "c"}, {"resources", 5}}}}}}},
                          Json{{"metadata", {{"name", "p"}}},
                               {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", "x"}}}}}}}}},
                          Json{{"metadata", {{"name", "p"}}},
                               {"spec", {{"containers", {{{"resources", {{"limits", Json::object()}}}}}}}}}}) {
    auto r = Parse(pod);
    EXPECT_FALSE(r.ok()) << pod;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
    EXPECT_FALSE(WantsGpu(pod, ResourceNames{}));
  }
  Json bad_cpu = Pod({{"c", {{"cpu", "lots"}}}});
  EXPECT_NE(Error(bad_cpu).find("container \"c\": resources.limits.cpu"), std::string::npos);
}

TEST(PodSpecTest, WantsGpuLooksAtRequestsAndLimits) {
  EXPECT_FALSE(WantsGpu(Pod({{"c", {{"cpu", "1"}}}}), ResourceNames{}));
  EXPECT_TRUE(WantsGpu(Pod({{"c", {{"tessera.io/gpu", "1"}}}}), ResourceNames{}));
  Json pod = Pod({{"c", Json::object()}});
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"tessera.io/gpu-core", "1"}}}};
  EXPECT_TRUE(WantsGpu(pod, ResourceNames{}));
}

GpuInfo Gpu(int index, const std::string& model) {
  GpuInfo g;
  g.index = index;
  g.model = model;
  g.memory_mib = 16384;
  return g;
}

Json Node(const std::string& name, const std::vector<GpuInfo>& gpus) {
  Json node = {{"metadata", {{"name", name}, {"annotations", Json::object()}}},
               {"status", {{"allocatable", {{"cpu", "64"}, {"memory", "256Gi"}, {"tessera.io/gpu", "16"}}}}}};
  auto inv = EncodeInventory(gpus);
  EXPECT_TRUE(inv.ok());
  node["metadata"]["annotations"][std::string(kInventoryAnnotation)] = *inv;
  return node;
}

TEST(PodSpecTest, NodeFromInventory) {
  std::vector<GpuInfo> gpus = {{.index = 1, .uuid = "GPU-b", .model = "A100", .memory_mib = 40960},
                               {.index = 0, .uuid = "GPU-a", .model = "A100", .memory_mib = 40960}};
  auto n = NodeInfoFromJson(Node("n1", gpus));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->name, "n1");
  EXPECT_EQ(n->cpu_milli, 64000);
  EXPECT_EQ(n->memory_mib, 262144);
  ASSERT_EQ(n->gpus.size(), 2u);
  EXPECT_EQ(n->gpus[0].uuid, "GPU-a");  // sorted by index
}

TEST(PodSpecTest, NodeErrors) {
  Json plain = Node("n1", {});
  plain["metadata"].erase("annotations");
  auto r = NodeInfoFromJson(plain);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "not a GPU node (no tessera.io/gpu-inventory annotation)");

  Json gap = Node("n1", {Gpu(0, "T4"), Gpu(2, "T4")});
  r = NodeInfoFromJson(gap);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without gaps, got 0, 2"), std::string::npos) << r.status().message();

  Json garbage = Node("n1", {});
  garbage["metadata"]["annotations"]["tessera.io/gpu-inventory"] = "{not json";
  r = NodeInfoFromJson(garbage);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("tessera.io/gpu-inventory"), std::string::npos);

  Json no_cpu = Node("n1", {});
  no_cpu["status"]["allocatable"].erase("cpu");
  r = NodeInfoFromJson(no_cpu);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status.allocatable.cpu is missing"), std::string::npos);

  for (const Json& bad : {Json(nullptr), Json::object(), Json{{"metadata", {{"name", ""}}}}}) {
    EXPECT_FALSE(NodeInfoFromJson(bad).ok()) << bad;
  }
}

TEST(HeldRequestTest, SharesComeFromTheAssignment) {
  Json pod = Pod({{"train", {{"cpu", "2"}, {"memory", "1Gi"}}}, {"side", Json::object()}});
  Assignment a{"n1",
               {{"train", {{0, "GPU-a", 81920, kCoreMilliPerGpu}, {1, "GPU-b", 40960, kCoreMilliPerGpu}}},
                {"side", {{0, "GPU-a", 2048, 150}}}}};
  auto req = HeldRequest(pod, "team/p1", a);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->key, "team/p1");
  ASSERT_EQ(req->containers.size(), 2u);
  EXPECT_EQ(req->containers[0].gpu_count, 2);
  EXPECT_EQ(req->containers[0].mem_mib_per_gpu, 0);  // whole GPUs of different sizes: all of each
  EXPECT_EQ(req->containers[1].mem_mib_per_gpu, 2048);
  EXPECT_EQ(req->containers[1].core_milli_per_gpu, 150);
  a.containers[0].gpus[1].core_milli = 500;
  EXPECT_EQ(HeldRequest(pod, "team/p1", a).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::core
