#include "tests/support/sim_nodes.h"

#include <gtest/gtest.h>

#include "core/codec.h"

namespace tessera::testing {
namespace {

TEST(SimNodesTest, ExpandsCountsAndDerivesStableUuids) {
  auto nodes = ParseSimNodes(R"(
slotsPerGpu: 4
nodes:
- {name: a100, count: 2, cpu: "64", memory: 512Gi, gpus: {model: A100, memMiB: 40960, sms: 108, count: 2}}
- {name: t4, cpu: "8", memory: 32Gi, gpus: {model: T4, memMiB: 15360, count: 1}}
)",
                             "nodes.yaml");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].info.name, "a100-0");
  EXPECT_EQ((*nodes)[1].info.name, "a100-1");
  EXPECT_EQ((*nodes)[2].info.name, "t4");
  EXPECT_EQ((*nodes)[0].info.cpu_milli, 64000);
  EXPECT_EQ((*nodes)[0].info.memory_mib, 512 * 1024);
  EXPECT_EQ((*nodes)[0].slots_per_gpu, 4);
  EXPECT_EQ((*nodes)[0].info.gpus[1].uuid, SimGpuUuid("a100-0", 1));
  EXPECT_NE(SimGpuUuid("a100-0", 1), SimGpuUuid("a100-1", 1));
  EXPECT_EQ(SimGpuUuid("a100-0", 1).size(), std::string("GPU-12345678-1234-1234-1234-123456789012").size());
}

TEST(SimNodesTest, NodeObjectCarriesInventorySlotsAndLabels) {
  auto nodes = UniformSimNodes("n", 1, 2, "H100", 81559, 8);
  nodes[0].labels["group"] = "g1";
  const auto object = NodeObject(nodes[0]);
  EXPECT_EQ(object["status"]["allocatable"]["tessera.io/gpu"], "16");
  EXPECT_EQ(object["metadata"]["labels"]["tessera.io/gpu-model"], "H100");
  EXPECT_EQ(object["metadata"]["labels"]["group"], "g1");
  auto gpus = core::DecodeInventory(object["metadata"]["annotations"]["tessera.io/gpu-inventory"].get<std::string>());
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, nodes[0].info.gpus);
}

TEST(SimNodesTest, BadFilesNameTheEntry) {
  for (const char* text : {"nodes: 3", "[", "nodes: [{cpu: '4'}]", "nodes: [{name: a, gpus: {model: A100, count: 2}}]",
                           "nodes: [{name: a, cpu: lots, gpus: {model: A, memMiB: 1, count: 1}}]",
                           "slotsPerGpu: 0\nnodes: []"}) {
    auto nodes = ParseSimNodes(text, "bad.yaml");
    ASSERT_FALSE(nodes.ok()) << text;
    EXPECT_NE(nodes.status().message().find("bad.yaml"), std::string::npos) << nodes.status().message();
  }
}

}  // namespace
}  // namespace tessera::testing
