// The node's ResourceSlice: one shareable device per healthy GPU with
// Tessera's request policies, and the names it must get right.
#include "dra/resource_slice.h"

#include <gtest/gtest.h>

#include "dra/test_gpus.h"

namespace tessera::dra {
namespace {

SliceOptions WithPodHeld(std::map<int, core::GpuShare> held) {
  SliceOptions options;
  options.pod_held = std::move(held);
  return options;
}

TEST(ResourceSliceTest, OneShareableDevicePerGpuWithTesserasPolicies) {
  auto slice = ResourceSliceFor("node-1", testing::TwoGpus(), {.generation = 3, .node_uid = "uid-n1", .pod_held = {}});
  ASSERT_TRUE(slice.ok()) << slice.status().message();
  const nlohmann::json& s = *slice;
  EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(s["kind"], "ResourceSlice");
  EXPECT_EQ(s["metadata"]["name"], "node-1-gpu.tessera.io");
  EXPECT_EQ(s["metadata"]["ownerReferences"][0]["uid"], "uid-n1");
  EXPECT_EQ(s["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(s["spec"]["driver"], "gpu.tessera.io");
  EXPECT_EQ(s["spec"]["nodeName"], "node-1");
  EXPECT_EQ(s["spec"]["pool"]["name"], "node-1");
  EXPECT_EQ(s["spec"]["pool"]["generation"], 3);
  EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 1);
  ASSERT_EQ(s["spec"]["devices"].size(), 2u);
  const nlohmann::json& d = s["spec"]["devices"][1];
  EXPECT_EQ(d["name"], "gpu-1");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["attributes"]["model"]["string"], "A100");
  EXPECT_EQ(d["attributes"]["uuid"]["string"], "GPU-bbbb");
  EXPECT_EQ(d["attributes"]["index"]["int"], 1);
  EXPECT_EQ(d["attributes"]["memoryMiB"]["int"], 40960);
  EXPECT_EQ(d["attributes"]["mps"]["bool"], true);
  const nlohmann::json& mem = d["capacity"]["memory"];
  EXPECT_EQ(mem["value"], "40960Mi");
  EXPECT_EQ(mem["requestPolicy"]["default"], "40960Mi");
  EXPECT_EQ(mem["requestPolicy"]["validRange"], (nlohmann::json{{"min", "1Mi"}, {"max", "40960Mi"}, {"step", "1Mi"}}));
  const nlohmann::json& compute = d["capacity"]["compute"];
  EXPECT_EQ(compute["value"], "100");
  EXPECT_EQ(compute["requestPolicy"]["default"], "0");
  EXPECT_EQ(compute["requestPolicy"]["validRange"], (nlohmann::json{{"min", "0"}, {"max", "100"}, {"step", "1"}}));
  // At most 32 attributes and capacities per device.
  EXPECT_LE(d["attributes"].size() + d["capacity"].size(), 32u);
  EXPECT_FALSE(d.contains("taints"));
}

// A mixed node: each GPU offers claims what device-plugin pods leave, the
// policies' max and default with it (API validation bounds them by the
// value); claims are kube-scheduler's to subtract.
TEST(ResourceSliceTest, EachGpuOffersWhatDevicePluginPodsLeave) {
  std::map<int, core::GpuShare> held;
  held[0] = {0, "GPU-aaaa", 16384, 405};  // 40.5 %: a claim may have 59, not 59.5
  auto slice = ResourceSliceFor("node-1", testing::TwoGpus(), WithPodHeld(held));
  ASSERT_TRUE(slice.ok()) << slice.status().message();
  const nlohmann::json& d0 = (*slice)["spec"]["devices"][0];
  EXPECT_EQ(d0["capacity"]["memory"],
            (nlohmann::json{{"value", "24576Mi"},
                            {"requestPolicy",
                             {{"default", "24576Mi"}, {"validRange", {{"min", "1Mi"}, {"max", "24576Mi"}, {"step", "1Mi"}}}}}}));
  EXPECT_EQ(d0["capacity"]["compute"],
            (nlohmann::json{{"value", "59"},
                            {"requestPolicy", {{"default", "0"}, {"validRange", {{"min", "0"}, {"max", "59"}, {"step", "1"}}}}}}));
  EXPECT_FALSE(d0.contains("taints"));
  const nlohmann::json& d1 = (*slice)["spec"]["devices"][1];  // no pod on GPU 1: the whole card
  EXPECT_EQ(d1["capacity"]["memory"]["value"], "40960Mi");
  EXPECT_EQ(d1["capacity"]["compute"]["value"], "100");
}

// A GPU with less than one valid request left (2Mi of memory: min 1Mi plus
// a step; 1 point of compute) cannot say so in its values (the API refuses
// them): it is tainted NoSchedule, its values the smallest valid ones.
TEST(ResourceSliceTest, AGpuThePodsFillIsTaintedNoSchedule) {
  const nlohmann::json taint = nlohmann::json::array({{{"key", kFullTaintKey}, {"effect", "NoSchedule"}}});
  for (const core::GpuShare& held : {core::GpuShare{0, "GPU-aaaa", 40959, 100},     // 1 MiB left
                                     core::GpuShare{0, "GPU-aaaa", 1024, 995},      // 0.5 % left
                                     core::GpuShare{0, "GPU-aaaa", 81920, 2000}}) {  // more than the card
    auto slice = ResourceSliceFor("node-1", testing::TwoGpus(), WithPodHeld({{0, held}}));
    ASSERT_TRUE(slice.ok()) << slice.status().message();
    const nlohmann::json& d = (*slice)["spec"]["devices"][0];
    EXPECT_EQ(d["taints"], taint) << held.mem_mib << " MiB, " << held.core_milli;
    const nlohmann::json& mem = d["capacity"]["memory"];
    const nlohmann::json& compute = d["capacity"]["compute"];
    EXPECT_EQ(mem["value"], held.mem_mib == 1024 ? "39936Mi" : "2Mi");
    EXPECT_EQ(mem["requestPolicy"]["validRange"]["max"], mem["value"]);
    EXPECT_EQ(mem["requestPolicy"]["default"], mem["value"]);
    EXPECT_EQ(compute["value"], held.core_milli == 100 ? "90" : "1");
    EXPECT_EQ(compute["requestPolicy"]["validRange"]["max"], compute["value"]);
    EXPECT_FALSE((*slice)["spec"]["devices"][1].contains("taints"));
  }
  // 2 MiB and 1 point left: room for the least request, no taint.
  auto room = ResourceSliceFor("node-1", testing::TwoGpus(), WithPodHeld({{0, {0, "GPU-aaaa", 40958, 990}}}));
  ASSERT_TRUE(room.ok());
  EXPECT_FALSE((*room)["spec"]["devices"][0].contains("taints"));
  EXPECT_EQ((*room)["spec"]["devices"][0]["capacity"]["compute"]["value"], "1");
}

TEST(ResourceSliceTest, NoOwnerWithoutNodeUidAndUnhealthyGpusLeftOut) {
  auto gpus = testing::TwoGpus();
  gpus[0].healthy = false;
  auto slice = ResourceSliceFor("node-1", gpus, {});
  ASSERT_TRUE(slice.ok());
  EXPECT_FALSE((*slice)["metadata"].contains("ownerReferences"));
  ASSERT_EQ((*slice)["spec"]["devices"].size(), 1u);
  EXPECT_EQ((*slice)["spec"]["devices"][0]["name"], "gpu-1");
  auto none = ResourceSliceFor("node-1", {}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)["spec"]["devices"].empty());
}

TEST(ResourceSliceTest, BadInputIsRefusedWithTheReason) {
  auto gpus = testing::TwoGpus();
  auto bad_node = ResourceSliceFor("Node_1", gpus, {});
  EXPECT_EQ(bad_node.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_node.status().message().find("node name \"Node_1\" is not a DNS subdomain"), std::string::npos);
  EXPECT_FALSE(ResourceSliceFor("node-1", gpus, {.driver = "gpu..tessera.io", .generation = 1, .node_uid = "", .pod_held = {}}).ok());
  EXPECT_FALSE(ResourceSliceFor("node-1", gpus, {.driver = std::string(64, 'a'), .generation = 1, .node_uid = "", .pod_held = {}}).ok());
  EXPECT_FALSE(ResourceSliceFor("", gpus, {}).ok());
  auto twice = gpus;
  twice[1].index = 0;
  EXPECT_NE(ResourceSliceFor("node-1", twice, {}).status().message().find("appears twice"), std::string::npos);
  auto no_memory = gpus;
  no_memory[0].memory_mib = 0;
  EXPECT_NE(ResourceSliceFor("node-1", no_memory, {}).status().message().find("no memory size"), std::string::npos);
}

TEST(ResourceSliceTest, NamesAndPaths) {
  EXPECT_EQ(DeviceName(7), "gpu-7");
  EXPECT_EQ(ResourceSlicePath("a"), "/apis/resource.k8s.io/v1/resourceslices/a");
  EXPECT_EQ(ResourceClaimPath("ns", "c"), "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c");
  EXPECT_TRUE(CheckDnsSubdomain(kDriverName, 63, "driver").ok());
  EXPECT_FALSE(CheckDnsSubdomain("-a.b", 63, "driver").ok());
  EXPECT_FALSE(CheckDnsSubdomain("a.b-", 63, "driver").ok());
  EXPECT_FALSE(CheckDnsSubdomain("a.", 63, "driver").ok());
}

}  // namespace
}  // namespace tessera::dra
