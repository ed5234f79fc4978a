#include "kubectl/inventory.h"

#include <gtest/gtest.h>

#include "core/codec.h"
#include "kubectl/test_objects.h"

namespace tessera::kubectl {
namespace {

using testing::AssignedPod;
using testing::GpuNode;
using testing::OnNode;
using Json = nlohmann::json;

core::GpuShare Share(int index, int64_t mem, int64_t core) {
  return {.index = index, .uuid = "", .mem_mib = mem, .core_milli = core};
}

TEST(InventoryTest, CountsLivePodsExactlyAsTheLedger) {
  const Json nodes = Json::array({GpuNode("b", 2, "A100", 40960), GpuNode("a", 1, "T4", 15360),
                                  Json{{"metadata", {{"name", "cpu-only"}}}}});
  Json pending = AssignedPod("default", "waiting", {});
  Json pods = Json::array({
      AssignedPod("default", "p1", OnNode("b", "main", {Share(0, 8192, 300)})),
      AssignedPod("team", "p2", OnNode("b", "main", {Share(0, 4096, 200)})),
      AssignedPod("default", "whole", OnNode("b", "trainer", {Share(1, 40960, 1000)})),
      AssignedPod("default", "t4", OnNode("a", "main", {Share(0, 1024, 100)}), "Pending"),
      AssignedPod("default", "done", OnNode("b", "main", {Share(0, 8192, 300)}), "Succeeded"),
      AssignedPod("default", "failed", OnNode("a", "main", {Share(0, 8192, 300)}), "Failed"),
      pending,
  });
  const Inventory inv = BuildInventory(nodes, pods);
  EXPECT_TRUE(inv.problems.empty()) << inv.problems[0].message;
  ASSERT_EQ(inv.nodes.size(), 2u);
  EXPECT_EQ(inv.nodes[0].name, "a");
  EXPECT_EQ(inv.other_nodes, 1);
  EXPECT_EQ(inv.pending, std::vector<std::string>{});  // asks for no GPU resource
  const NodeView& b = inv.nodes[1];
  EXPECT_EQ(b.Model(), "A100");
  ASSERT_EQ(b.gpus.size(), 2u);
  EXPECT_EQ(b.gpus[0].used, (core::GpuUsage{12288, 500, 2}));
  EXPECT_EQ(b.gpus[0].pods, 2);
  ASSERT_EQ(b.gpus[0].shares.size(), 2u);
  EXPECT_EQ(b.gpus[0].shares[0], (ShareView{"default", "p1", "main", 8192, 300, "", ""}));
  EXPECT_EQ(b.gpus[0].shares[1].Holder(), "team/p2[main]");
  EXPECT_EQ(b.gpus[1].used, (core::GpuUsage{40960, 1000, 1}));
  EXPECT_EQ(b.totals, (Totals{2, 81920, 53248, 2000, 1500, 3}));
  EXPECT_EQ(b.cpu_used_milli, 3000);
  EXPECT_EQ(inv.totals, (Totals{3, 81920 + 15360, 53248 + 1024, 3000, 1600, 4}));
}

TEST(InventoryTest, UnboundGpuPodsArePending) {
  Json pod = AssignedPod("default", "big", {});
  pod["spec"]["containers"] = Json::array(
      {{{"name", "m"}, {"resources", {{"limits", {{"tessera.io/gpu-mem", "999999"}}}}}}});
  const Inventory inv = BuildInventory(Json::array({GpuNode("n", 1, "T4", 15360)}), Json::array({pod}));
  EXPECT_EQ(inv.pending, std::vector<std::string>{"default/big"});
}

TEST(InventoryTest, MalformedObjectsAreReportedAndTheRestShown) {
  Json bad_node = GpuNode("bad", 1, "T4", 15360);
  bad_node["metadata"]["annotations"]["tessera.io/gpu-inventory"] = "{";
  Json bad_pod = AssignedPod("default", "garbled", OnNode("n", "main", {Share(0, 1, 1)}));
  bad_pod["metadata"]["annotations"]["tessera.io/assignment"] = R"({"v":9})";
  Json moved = AssignedPod("default", "moved", OnNode("n", "main", {Share(0, 1, 1)}));
  moved["spec"]["nodeName"] = "elsewhere";
  Json lost = AssignedPod("default", "lost", OnNode("gone", "main", {Share(0, 1, 1)}));
  const Inventory inv = BuildInventory(
      Json::array({bad_node, GpuNode("n", 1, "T4", 15360)}),
      Json::array({bad_pod, moved, lost, AssignedPod("default", "ok", OnNode("n", "main", {Share(0, 1024, 100)}))}));
  ASSERT_EQ(inv.nodes.size(), 1u);
  EXPECT_EQ(inv.nodes[0].gpus[0].used.mem_used_mib, 1024);
  ASSERT_EQ(inv.problems.size(), 4u);
  EXPECT_EQ(inv.problems[0].object, "node bad");
  EXPECT_NE(inv.problems[0].message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(inv.problems[1].object, "pod default/garbled");
  EXPECT_NE(inv.problems[1].message.find("unsupported version 9"), std::string::npos);
  EXPECT_EQ(inv.problems[2].object, "pod default/lost");
  EXPECT_NE(inv.problems[2].message.find("not a GPU node"), std::string::npos);
  EXPECT_EQ(inv.problems[3].object, "pod default/moved");
  EXPECT_NE(inv.problems[3].message.find("bound to elsewhere"), std::string::npos);
}

// A node whose kubelet has registered fewer slots than its inventory lists
// (the node agent starting, or unhealthy slots) is shown and reported, with
// the counts; one with all of them, or whose GPUs list no limit, is not.
TEST(InventoryTest, NodesShortOfSlotsAreReported) {
  Json starting = GpuNode("starting", 2, "T4", 15360);
  starting["status"]["allocatable"].erase("tessera.io/gpu");
  Json partial = GpuNode("partial", 2, "T4", 15360);
  partial["status"]["allocatable"]["tessera.io/gpu"] = "12";
  Json unlimited = GpuNode("unlimited", 1, "T4", 15360);
  std::vector<core::GpuInfo> gpus = {{.index = 0, .uuid = "GPU-u-0", .model = "T4", .memory_mib = 15360,
                                      .healthy = true, .max_sharers = 0}};
  unlimited["metadata"]["annotations"]["tessera.io/gpu-inventory"] = core::EncodeInventory(gpus).value();
  unlimited["status"]["allocatable"].erase("tessera.io/gpu");
  const Inventory inv =
      BuildInventory(Json::array({starting, partial, unlimited, GpuNode("ready", 2, "T4", 15360)}), Json::array());
  EXPECT_EQ(inv.nodes.size(), 4u);  // all still shown
  ASSERT_EQ(inv.problems.size(), 2u);
  EXPECT_EQ(inv.problems[0].object, "node partial");
  EXPECT_NE(inv.problems[0].message.find("reports 12 of the 16 tessera.io/gpu slots"), std::string::npos)
      << inv.problems[0].message;
  EXPECT_EQ(inv.problems[1].object, "node starting");
  EXPECT_NE(inv.problems[1].message.find("reports 0 of the 16 tessera.io/gpu slots"), std::string::npos)
      << inv.problems[1].message;
  // With HAMi's front end on, its count is checked too.
  core::ResourceNames names;
  names.hami.enabled = true;
  const Inventory hami = BuildInventory(Json::array({GpuNode("ready", 2, "T4", 15360)}), Json::array(), names);
  ASSERT_EQ(hami.problems.size(), 1u);
  EXPECT_NE(hami.problems[0].message.find("reports 0 of the 16 nvidia.com/gpu slots"), std::string::npos);
}

TEST(InventoryTest, OverCommitKeepsTheOlderHolderAndReportsTheOther) {
  const Json nodes = Json::array({GpuNode("n", 1, "T4", 15360)});
  const Json pods = Json::array({
      AssignedPod("default", "a-late", OnNode("n", "main", {Share(0, 10240, 500)}), "Running", "2026-03-01T10:00:05Z"),
      AssignedPod("default", "z-early", OnNode("n", "main", {Share(0, 10240, 500)}), "Running", "2026-03-01T10:00:00Z"),
  });
  const Inventory inv = BuildInventory(nodes, pods);
  ASSERT_EQ(inv.nodes[0].gpus[0].shares.size(), 1u);
  EXPECT_EQ(inv.nodes[0].gpus[0].shares[0].pod, "z-early");
  ASSERT_EQ(inv.problems.size(), 1u);
  EXPECT_EQ(inv.problems[0].object, "pod default/a-late");
  EXPECT_NE(inv.problems[0].message.find("does not fit"), std::string::npos) << inv.problems[0].message;
}

// Issue 19: a pod that wrote itself an earlier assigned-at (or copied one)
// must not push out the pod its node agent actually handed the GPU to.
TEST(InventoryTest, WhatTheNodeAgentHandedOutIsCountedFirst) {
  const Json nodes = Json::array({GpuNode("n", 1, "T4", 15360)});
  Json legit = AssignedPod("default", "legit", OnNode("n", "main", {Share(0, 10240, 500)}), "Running",
                           "2026-03-01T10:00:05Z");
  legit["metadata"]["annotations"]["tessera.io/allocated"] = "main";
  const Json forged = AssignedPod("default", "forged", OnNode("n", "main", {Share(0, 10240, 500)}), "Pending",
                                  "2026-03-01T10:00:00Z");
  const Inventory inv = BuildInventory(nodes, Json::array({forged, legit}));
  ASSERT_EQ(inv.nodes[0].gpus[0].shares.size(), 1u);
  EXPECT_EQ(inv.nodes[0].gpus[0].shares[0].pod, "legit");
  ASSERT_EQ(inv.problems.size(), 1u);
  EXPECT_EQ(inv.problems[0].object, "pod default/forged");
  EXPECT_NE(inv.problems[0].message.find("not allocated yet; it will be refused at the node"), std::string::npos)
      << inv.problems[0].message;
  // Two handed out past the GPU (before node agents checked): an over-commit.
  Json copy = forged;
  copy["metadata"]["annotations"]["tessera.io/allocated"] = "main";
  const Inventory over = BuildInventory(nodes, Json::array({copy, legit}));
  ASSERT_EQ(over.problems.size(), 1u);
  EXPECT_NE(over.problems[0].message.find("over-committed"), std::string::npos) << over.problems[0].message;
}

TEST(InventoryTest, TerminatingPodsStillHoldTheirShare) {
  Json pod = AssignedPod("default", "leaving", OnNode("n", "main", {Share(0, 2048, 100)}));
  pod["metadata"]["deletionTimestamp"] = "2026-03-01T10:00:00Z";
  const Inventory inv = BuildInventory(Json::array({GpuNode("n", 1, "T4", 15360)}), Json::array({pod}));
  EXPECT_EQ(inv.nodes[0].gpus[0].used.mem_used_mib, 2048);
}

}  // namespace
}  // namespace tessera::kubectl
