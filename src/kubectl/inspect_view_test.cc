#include "kubectl/inspect_view.h"

#include <gtest/gtest.h>

#include <sstream>

#include "kubectl/test_objects.h"

namespace tessera::kubectl {
namespace {

using testing::AssignedPod;
using testing::GpuNode;
using testing::OnNode;
using Json = nlohmann::json;

Inventory Sample() {
  const Json nodes = Json::array({GpuNode("a100-0", 2, "A100", 40960), GpuNode("t4", 1, "T4", 15360)});
  const Json pods = Json::array({
      AssignedPod("default", "bert-serving-0", OnNode("a100-0", "server", {{0, "", 6144, 200}})),
      AssignedPod("default", "llama-8b-a", OnNode("a100-0", "server", {{0, "", 20480, 300}})),
      AssignedPod("default", "finetune", OnNode("a100-0", "trainer", {{1, "", 40960, 1000}})),
  });
  return BuildInventory(nodes, pods);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(InspectViewTest, TableHasOneRowPerGpuAndTotals) {
  const std::string text = RenderInventoryTable(Sample(), {});
  EXPECT_EQ(text,
            "NODE    GPU  MODEL    MEMORY GiB   MEM  CORE  PODS\n"
            "a100-0  0    A100    26.0 / 40.0   65%   50%     2\n"
            "a100-0  1    A100    40.0 / 40.0  100%  100%     1\n"
            "a100-0  all  2 GPUs  66.0 / 80.0   83%   75%     3\n"
            "t4      0    T4       0.0 / 15.0    0%    0%     0\n"
            "TOTAL   all  3 GPUs  66.0 / 95.0   69%   50%     3\n");
}

TEST(InspectViewTest, WideAddsUuidNumaSharersAndHolders) {
  const std::vector<std::string> lines = Lines(RenderInventoryTable(Sample(), {.table = {}, .unit = MemUnit::kGiB, .wide = true}));
  EXPECT_NE(lines[0].find("UUID"), std::string::npos);
  EXPECT_NE(lines[0].find("HELD BY"), std::string::npos);
  EXPECT_NE(lines[1].find("GPU-a100-0-0     0    2/8  default/bert-serving-0[server] 6.0/20%, "
                          "default/llama-8b-a[server] 20.0/30%"),
            std::string::npos)
      << lines[1];
}

// Who runs without enforcement (tessera.io/isolation: none) or under MPS is
// said beside the share, in text and JSON.
TEST(InspectViewTest, SharesSayWhenTheyAreNotEnforcedOrUnderMps) {
  const Json nodes = Json::array({GpuNode("a100-0", 1, "A100", 40960)});
  Json raw = AssignedPod("ml", "raw", OnNode("a100-0", "main", {{0, "", 8192, 200}}));
  raw["metadata"]["annotations"]["tessera.io/isolation"] = "none";
  Json mps = AssignedPod("ml", "mps", OnNode("a100-0", "main", {{0, "", 4096, 100}}));
  mps["metadata"]["annotations"]["tessera.io/isolation"] = "mps";
  Json hook = AssignedPod("ml", "plain", OnNode("a100-0", "main", {{0, "", 2048, 100}}));
  hook["metadata"]["annotations"]["tessera.io/isolation"] = "hook";
  const Inventory inv = BuildInventory(nodes, Json::array({raw, mps, hook}));
  const std::string detail = RenderNodeDetail(*inv.FindNode("a100-0"), {});
  EXPECT_NE(detail.find("  ml/raw[main] (not enforced)"), std::string::npos) << detail;
  EXPECT_NE(detail.find("  ml/mps[main] (MPS)"), std::string::npos) << detail;
  EXPECT_NE(detail.find("  ml/plain[main] "), std::string::npos) << detail;
  const std::string wide = RenderInventoryTable(inv, {.table = {}, .unit = MemUnit::kGiB, .wide = true});
  EXPECT_NE(wide.find("ml/raw[main] (not enforced) 8.0/20%"), std::string::npos) << wide;
  const auto doc = InventoryToJson(inv);
  const auto& shares = doc["nodes"][0]["gpus"][0]["shares"];
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_EQ(shares[0]["pod"], "mps");
  EXPECT_EQ(shares[0]["isolation"], "mps");
  EXPECT_EQ(shares[1]["isolation"], "hook");
  EXPECT_EQ(shares[2]["isolation"], "none");
}

TEST(InspectViewTest, NarrowTerminalCutsButKeepsColumnsAligned) {
  const std::vector<std::string> lines = Lines(RenderInventoryTable(Sample(), {.table = {.width = 90}, .unit = MemUnit::kGiB, .wide = true}));
  const size_t mem_col = lines[0].find("MEMORY");
  for (const auto& line : lines) EXPECT_LE(DisplayWidth(line), 90) << line;
  EXPECT_NE(lines[1].find("\xe2\x80\xa6"), std::string::npos) << "the holders are cut: " << lines[1];
  for (size_t i = 1; i < 6; ++i) EXPECT_EQ(lines[i].find(" / "), lines[1].find(" / ")) << lines[i];
  EXPECT_LT(mem_col, lines[1].find(" / "));
}

TEST(InspectViewTest, MiBUnitsAreExact) {
  const std::vector<std::string> lines = Lines(RenderInventoryTable(Sample(), {.table = {}, .unit = MemUnit::kMiB, .wide = false}));
  EXPECT_NE(lines[0].find("MEMORY MiB"), std::string::npos);
  EXPECT_NE(lines[1].find("26624 / 40960"), std::string::npos) << lines[1];
}

TEST(InspectViewTest, NodeDetailListsEveryShare) {
  const Inventory inv = Sample();
  const std::string text = RenderNodeDetail(*inv.FindNode("a100-0"), {});
  EXPECT_EQ(text,
            "Node a100-0 (A100, 2 GPUs): memory 66.0 / 80.0 GiB (83%), core 75%, 3 pods\n"
            "Host: CPU 3.0 / 64.0 cores, memory 3.0 / 512.0 GiB\n"
            "\n"
            "GPU  MODEL  HELD BY                            MEMORY GiB  CORE\n"
            "0    A100   2 pods, 2 shares                  26.0 / 40.0   50%\n"
            "              default/bert-serving-0[server]   6.0          20%\n"
            "              default/llama-8b-a[server]      20.0          30%\n"
            "1    A100   1 pod, 1 share                    40.0 / 40.0  100%\n"
            "              default/finetune[trainer]       40.0         100%\n");
}

TEST(InspectViewTest, JsonCarriesTheLedgersNumbers) {
  const Inventory inv = Sample();
  const auto doc = InventoryToJson(inv);
  EXPECT_EQ(doc["v"], 1);
  EXPECT_EQ(doc["kind"], "GpuInventory");
  ASSERT_EQ(doc["nodes"].size(), 2u);
  const auto& gpu0 = doc["nodes"][0]["gpus"][0];
  EXPECT_EQ(gpu0["memUsedMiB"], 26624);
  EXPECT_EQ(gpu0["coreUsedMilli"], 500);
  EXPECT_EQ(gpu0["sharers"], 2);
  EXPECT_EQ(gpu0["shares"][1]["pod"], "llama-8b-a");
  EXPECT_EQ(doc["totals"]["memUsedMiB"], 67584);
  EXPECT_EQ(doc["totals"]["gpus"], 3);
  const auto one = InventoryToJson(inv, inv.FindNode("t4"));
  ASSERT_EQ(one["nodes"].size(), 1u);
  EXPECT_EQ(one["totals"]["gpus"], 1);
}

// Sample() with DRA claims beside the pods.
Inventory WithClaims() {
  const Json nodes = Json::array({GpuNode("a100-0", 2, "A100", 40960), GpuNode("t4", 1, "T4", 15360)});
  const Json pods = Json::array({
      AssignedPod("default", "bert-serving-0", OnNode("a100-0", "server", {{0, "", 6144, 200}})),
      AssignedPod("default", "finetune", OnNode("a100-0", "trainer", {{1, "", 40960, 1000}})),
  });
  const Json claims = Json::array({
      testing::AllocatedClaim("default", "infer-gpu", {{"a100-0", 0, "8Gi", "20"}}, "infer"),
      testing::AllocatedClaim("ml", "loose", {{"t4", 0, "4Gi", ""}}),
      testing::AllocatedClaim("ml", "elsewhere", {{"h100-9", 0, "1Gi", ""}}),
      testing::AllocatedClaim("ml", "too-much", {{"a100-0", 1, "1Gi", "1"}}, "late"),
  });
  return BuildInventory(nodes, pods, claims);
}

TEST(InspectViewTest, ClaimsAreSharesBesideThePodsMarkedAsClaims) {
  const Inventory inv = WithClaims();
  const NodeView& a100 = *inv.FindNode("a100-0");
  const GpuView& gpu0 = a100.gpus[0];
  EXPECT_EQ(gpu0.used.mem_used_mib, 6144 + 8192);
  EXPECT_EQ(gpu0.used.core_used_milli, 200 + 200);
  EXPECT_EQ(gpu0.used.sharers, 1) << "a claim takes no device-plugin slot";
  EXPECT_EQ(gpu0.pods, 2);
  EXPECT_EQ(gpu0.claims, 1);
  ASSERT_EQ(gpu0.shares.size(), 2u);
  EXPECT_EQ(gpu0.shares[1].Holder(), "default/infer[claim:infer-gpu]");
  EXPECT_EQ(inv.FindNode("t4")->gpus[0].shares[0].Holder(), "ml/claim:loose");
  EXPECT_EQ(inv.FindNode("t4")->totals.pods, 1) << "a claim reserved for no pod counts as one holder";
  EXPECT_EQ(inv.totals.mem_used_mib, 6144 + 8192 + 40960 + 1024 + 4096);
  // A claim on a node this view lacks, and one past a full GPU (still shown).
  ASSERT_EQ(inv.problems.size(), 2u);
  EXPECT_EQ(inv.problems[0].object, "claim ml/elsewhere");
  EXPECT_NE(inv.problems[0].message.find("h100-9"), std::string::npos) << inv.problems[0].message;
  EXPECT_EQ(inv.problems[1].object, "claim ml/too-much");
  EXPECT_NE(inv.problems[1].message.find("over-committed"), std::string::npos) << inv.problems[1].message;

  const std::string detail = RenderNodeDetail(a100, {});
  EXPECT_NE(detail.find("2 pods, 2 shares (1 claim)"), std::string::npos) << detail;
  EXPECT_NE(detail.find("  default/infer[claim:infer-gpu]   8.0          20%"), std::string::npos) << detail;
  const std::vector<std::string> wide =
      Lines(RenderInventoryTable(inv, {.table = {}, .unit = MemUnit::kGiB, .wide = true}));
  EXPECT_NE(wide[1].find("default/bert-serving-0[server] 6.0/20%, default/infer[claim:infer-gpu] 8.0/20%"),
            std::string::npos)
      << wide[1];

  const auto doc = InventoryToJson(inv);
  const auto& share = doc["nodes"][0]["gpus"][0]["shares"][1];
  EXPECT_EQ(share["claim"], "infer-gpu");
  EXPECT_EQ(share["pod"], "infer");
  EXPECT_FALSE(share.contains("container"));
  EXPECT_EQ(share["memMiB"], 8192);
  EXPECT_EQ(doc["nodes"][0]["gpus"][0]["claims"], 1);
}

}  // namespace
}  // namespace tessera::kubectl
