#include "node/inventory.h"

#include <gtest/gtest.h>

#include "core/codec.h"
#include "kube/fake_api.h"
#include "kube/paths.h"

namespace tessera::node {
namespace {

TEST(GpuFileTest, ParsesYamlAndJson) {
  auto gpus = ParseGpuFile(R"(gpus:
- {uuid: GPU-a, model: A100, memMiB: 81920, sms: 108, numa: 0}
- {uuid: GPU-b, model: A100, memMiB: 40960, healthy: false}
)", "gpus.yaml");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0], (core::GpuInfo{0, "GPU-a", "A100", 81920, 108, 0, true}));
  EXPECT_EQ((*gpus)[1], (core::GpuInfo{1, "GPU-b", "A100", 40960, 0, -1, false}));
  auto json = ParseGpuFile(R"({"gpus":[{"uuid":"GPU-c","model":"T4","memMiB":15360}]})", "gpus.json");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)[0].uuid, "GPU-c");
}

TEST(GpuFileTest, ErrorsNameTheEntry) {
  auto missing = ParseGpuFile("gpus:\n- {uuid: GPU-a, model: A100}\n", "f.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("f.yaml: gpus[0]"), std::string::npos) << missing.status().message();
  auto dup = ParseGpuFile("gpus:\n- {uuid: G, model: A, memMiB: 1}\n- {uuid: G, model: A, memMiB: 1}\n", "f");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("twice"), std::string::npos);
  EXPECT_FALSE(ParseGpuFile("gpus: 3", "f").ok());
  EXPECT_FALSE(ParseGpuFile("gpus:\n- {uuid: G, model: A, memMiB: -5}\n", "f").ok());
}

TEST(GpuFileTest, FormatReadsBackTheSameGpus) {
  std::vector<core::GpuInfo> gpus = {{0, "GPU-a", "H100", 81559, 132, 0, true}, {1, "GPU-b", "H100", 81559, 132, 1, false}};
  auto back = ParseGpuFile(FormatGpuFile(gpus), "formatted");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << FormatGpuFile(gpus);
  EXPECT_EQ(back.value(), gpus);
}

TEST(InventoryPatchTest, AnnotationAndLabels) {
  std::vector<core::GpuInfo> gpus = {{0, "GPU-a", "NVIDIA A100-SXM4-80GB", 81920, 108, 0, true},
                                     {1, "GPU-b", "NVIDIA A100-SXM4-80GB", 40960, 108, 0, true}};
  auto patch = InventoryPatch(gpus);
  ASSERT_TRUE(patch.ok());
  EXPECT_EQ((*patch)["metadata"]["labels"][kModelLabel], "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ((*patch)["metadata"]["labels"][kMemoryLabel], "40960");
  auto back = core::DecodeInventory((*patch)["metadata"]["annotations"]["tessera.io/gpu-inventory"].get<std::string>());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, gpus);
  EXPECT_EQ((*patch)["metadata"]["annotations"]["tessera.io/node-agent"], kNodeAgentVersion);
}

TEST(PublishInventoryTest, PatchesTheNodeOnlyWhenItDiffers) {
  kube::FakeApi api;
  ASSERT_TRUE(api.Upsert("/api/v1/nodes", {{"metadata", {{"name", "n1"}, {"labels", {{"keep", "me"}}}}}}).ok());
  std::vector<core::GpuInfo> gpus = {{0, "GPU-a", "T4", 15360, 40, 0, true}};
  auto sent = PublishInventory(api, "n1", gpus);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_TRUE(*sent);
  nlohmann::json node = *api.Peek(kube::NodePath("n1"));
  EXPECT_EQ(node["metadata"]["labels"][kModelLabel], "T4");
  EXPECT_EQ(node["metadata"]["labels"]["keep"], "me") << "a merge patch leaves other labels alone";
  EXPECT_EQ(*core::DecodeInventory(node["metadata"]["annotations"]["tessera.io/gpu-inventory"].get<std::string>()),
            gpus);
  EXPECT_FALSE(*PublishInventory(api, "n1", gpus)) << "the Node says so already";
  EXPECT_EQ(api.CountCalls("PATCH"), 1);
  gpus[0].healthy = false;
  EXPECT_TRUE(*PublishInventory(api, "n1", gpus));
  EXPECT_EQ(PublishInventory(api, "n2", gpus).status().code(), StatusCode::kNotFound);
}

TEST(InventoryPatchTest, LabelValuesAreSanitised) {
  EXPECT_EQ(LabelValue("Tesla T4"), "Tesla-T4");
  EXPECT_EQ(LabelValue("(x)"), "x");
  EXPECT_EQ(LabelValue(std::string(80, 'a')).size(), 63u);
}

}  // namespace
}  // namespace tessera::node
