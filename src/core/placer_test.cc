#include "core/placer.h"

#include <gtest/gtest.h>

#include "core/fragmentation.h"

namespace tessera::core {
namespace {

NodeInfo Node(const std::string& name, int gpus, const std::string& model = "T4", int64_t cpu = 32000) {
  NodeInfo n{name, cpu, 262144, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "", model, 0});
  return n;
}

PodRequest Pod(const std::string& key, int gpus, int64_t core, int64_t cpu = 1000) {
  return PodRequest{key, cpu, 1024, {{"main", gpus, 0, core, {}}}};
}

TEST(Fit, BestFitPicksTheFullestFittingGpuAndWholeGpusLowestIndex) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 4)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 300), {"n", {{"main", {{2, "", 0, 300}}}}}).ok());
  ASSERT_TRUE(l.Assume(Pod("b", 1, 600), {"n", {{"main", {{1, "", 0, 600}}}}}).ok());
  GpuPick pick;
  ASSERT_TRUE(PickGpus(Pod("c", 1, 300), *l.FindNode("n"), GpuSelect::kBestFit, nullptr, &pick));
  EXPECT_EQ(pick.index[0], 1);  // 400 free beats 700 and 1000
  ASSERT_TRUE(PickGpus(Pod("d", 2, 1000), *l.FindNode("n"), GpuSelect::kBestFit, nullptr, &pick));
  EXPECT_EQ(pick.count, 2);
  EXPECT_EQ(pick.index[0], 0);
  EXPECT_EQ(pick.index[1], 3);
  EXPECT_EQ(FitsNode(Pod("e", 3, 1000), *l.FindNode("n")), FitFailure::kGpuCount);
  EXPECT_EQ(FitsNode(Pod("f", 1, 100, 64000), *l.FindNode("n")), FitFailure::kCpu);
  auto a100 = Pod("g", 1, 100);
  a100.containers[0].models.allowed = {"A100"};
  EXPECT_EQ(FitsNode(a100, *l.FindNode("n")), FitFailure::kGpuModel);
}

TEST(Fit, MpsPodsGoOnlyToGpusThatRunMps) {
  Ledger l;
  NodeInfo plain = Node("plain", 2);
  NodeInfo mps = Node("mps", 2);
  mps.gpus[1].mps = true;
  ASSERT_TRUE(l.AddNode(plain).ok());
  ASSERT_TRUE(l.AddNode(mps).ok());
  PodRequest pod = Pod("m", 1, 300);
  pod.isolation = Isolation::kMps;
  EXPECT_EQ(FitsNode(pod, *l.FindNode("plain")), FitFailure::kGpuMps);
  EXPECT_NE(FitFailureName(FitFailure::kGpuMps).find("tessera-node --mps"), std::string::npos);
  ASSERT_EQ(FitsNode(pod, *l.FindNode("mps")), FitFailure::kNone);
  GpuPick pick;
  ASSERT_TRUE(PickGpus(pod, *l.FindNode("mps"), GpuSelect::kBestFit, nullptr, &pick));
  EXPECT_EQ(pick.index[0], 1);  // GPU 0 has room but no MPS
  // The default isolation is unaffected by the flag.
  EXPECT_EQ(FitsNode(Pod("h", 2, 300), *l.FindNode("plain")), FitFailure::kNone);
  // A model the pod does not allow is still named as such.
  pod.containers[0].models.allowed = {"A100"};
  EXPECT_EQ(FitsNode(pod, *l.FindNode("plain")), FitFailure::kGpuModel);
}

TEST(MakePolicy, UnknownNameListsTheKnownOnes) {
  auto p = MakePolicy("binpak", {});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("fgd"), std::string::npos) << p.status().message();
  for (const auto& name : PolicyNames()) EXPECT_TRUE(MakePolicy(name, {}).ok()) << name;
}

TEST(Placer, ExplainsWhyNothingFits) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n1", 1)).ok());
  ASSERT_TRUE(l.AddNode(Node("n2", 1, "T4", 500)).ok());
  auto policy = std::move(MakePolicy("bestfit", {})).value();
  Placer placer(*policy, 1);
  auto r = placer.Place(Pod("big", 2, 1000), l);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("0/2 nodes fit big"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("not enough CPU"), std::string::npos) << r.status().message();
}

TEST(Fragmentation, HandComputedExample) {
  // Two classes: half want 500 milli, half want a whole GPU.
  TargetWorkload w;
  w.classes.push_back({0, 500, 1, {}, 0.5});
  w.classes.push_back({0, 1000, 1, {}, 0.5});
  std::vector<int64_t> left = {1000, 300};
  // 500-class fits: only GPU 1 (300) is too small -> 0.5*300.
  // 1000-class fits: GPU 1 too small -> 0.5*300. Total 300.
  EXPECT_DOUBLE_EQ(NodeFragAmount(w, "T4", 1000, left), 300.0);
  left = {400, 300};  // nothing fits the whole-GPU class: 0.5*700; 500-class: 0.5*700
  EXPECT_DOUBLE_EQ(NodeFragAmount(w, "T4", 1000, left), 700.0);
  auto all = NodeFragBreakdown(w, "T4", 1000, std::vector<int64_t>{1000, 300});
  EXPECT_DOUBLE_EQ(all.idle(), 1300.0);
}

TEST(Fragmentation, FitClassSaysWhetherAClassFitsAndWhatIsTooSmall) {
  const std::vector<int64_t> left = {1000, 300, 600};
  const TaskClass share{2000, 500, 1, {}, 1.0};
  ClassFit f = FitClass(share, true, 4000, left);
  EXPECT_TRUE(f.fits);
  EXPECT_EQ(f.small, 300);  // only GPU 1 is too small for 500
  EXPECT_FALSE(FitClass(share, false, 4000, left).fits);  // model not allowed
  EXPECT_FALSE(FitClass(share, true, 1000, left).fits);   // not enough CPU
  const TaskClass two_whole{0, 1000, 2, {}, 1.0};
  f = FitClass(two_whole, true, 4000, left);  // one whole GPU free, two wanted
  EXPECT_FALSE(f.fits);
  EXPECT_EQ(f.small, 0);
  const TaskClass cpu_only{1000, 0, 0, {}, 1.0};
  EXPECT_FALSE(FitClass(cpu_only, true, 4000, left).fits);
}

TEST(Fragmentation, TypicalWorkloadKeepsTheCommonClasses) {
  std::vector<PodRequest> pods;
  for (int i = 0; i < 90; ++i) pods.push_back(Pod("a" + std::to_string(i), 1, 500));
  for (int i = 0; i < 9; ++i) pods.push_back(Pod("b" + std::to_string(i), 1, 1000));
  pods.push_back(Pod("rare", 2, 1000));
  TargetWorkload w = TypicalWorkload(pods, 0.95);
  ASSERT_EQ(w.classes.size(), 2u);
  EXPECT_NEAR(w.classes[0].weight, 90.0 / 99, 1e-12);
  EXPECT_EQ(w.classes[1].gpu_milli, 1000);
}

// Property: every policy only proposes placements the ledger accepts, and a
// pod is refused only when no node fits it.
TEST(PlacerProperty, EveryPolicyProposesOnlyValidPlacements) {
  Rng rng(7);
  std::vector<PodRequest> sample;
  for (int i = 0; i < 400; ++i) {
    const int kind = static_cast<int>(rng.Below(4));
    const int gpus = kind == 3 ? 1 + static_cast<int>(rng.Below(4)) : (kind == 0 ? 0 : 1);
    const int64_t core = gpus == 0 ? 0 : (kind == 1 ? 50 * (1 + static_cast<int64_t>(rng.Below(19))) : 1000);
    sample.push_back(Pod("p" + std::to_string(i), gpus, core, 1000 * static_cast<int64_t>(rng.Below(12))));
  }
  TargetWorkload w = TypicalWorkload(sample, 0.95);
  for (const auto& name : PolicyNames()) {
    Ledger l;
    for (int n = 0; n < 12; ++n) ASSERT_TRUE(l.AddNode(Node("n" + std::to_string(n), 1 << (n % 4))).ok());
    auto policy = std::move(MakePolicy(name, {w})).value();
    Placer placer(*policy, 3);
    for (const auto& pod : sample) {
      auto a = placer.Place(pod, l);
      if (a.ok()) {
        ASSERT_TRUE(l.Assume(pod, *a).ok()) << name << " " << pod.key;
      } else {
        for (const auto& node : l.nodes()) ASSERT_NE(FitsNode(pod, node), FitFailure::kNone) << name;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::core
