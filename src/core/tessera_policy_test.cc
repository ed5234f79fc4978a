#include "core/tessera_policy.h"

#include <gtest/gtest.h>

#include "core/fgd_policy.h"
#include "core/fragmentation.h"

namespace tessera::core {
namespace {

NodeInfo Node(const std::string& name, std::vector<int64_t> used, int64_t cpu = 64000, const std::string& model = "T4") {
  NodeInfo n{name, cpu, 262144, {}};
  for (size_t i = 0; i < used.size(); ++i) n.gpus.push_back({static_cast<int>(i), "", model, 0});
  return n;
}

PodRequest Pod(const std::string& key, int gpus, int64_t core, int64_t cpu = 1000) {
  return PodRequest{key, cpu, 1024, {{"main", gpus, 0, core, {}}}};
}

// Teaches `p` a workload: 20 pods of 400 milli, 12 whole GPUs (32 arrivals,
// the first refresh).
void Teach(TesseraPolicy& p) {
  for (int i = 0; i < 20; ++i) p.OnArrival(Pod("s" + std::to_string(i), 1, 400));
  for (int i = 0; i < 12; ++i) p.OnArrival(Pod("w" + std::to_string(i), 1, 1000));
  ASSERT_EQ(p.workload().classes.size(), 2u);
}

TEST(TesseraPolicy, DeadMilliIsFreeShareNoLearnedClassCanUse) {
  TesseraPolicy p;
  Teach(p);
  // 300 is below every class (400, 1000); 500 takes a 400 pod; whole GPUs take anything.
  EXPECT_EQ(p.DeadMilli("T4", 64000, std::vector<int64_t>{1000, 300, 0}), 300);
  EXPECT_EQ(p.DeadMilli("T4", 64000, std::vector<int64_t>{500, 1000}), 0);
  // No class fits the node's CPU: all of its free share is dead.
  EXPECT_EQ(p.DeadMilli("T4", 500, std::vector<int64_t>{1000, 300}), 1300);
}

TEST(TesseraPolicy, DeadMilliHonoursModelsAndMultiGpuClasses) {
  TesseraPolicy p;
  for (int i = 0; i < 32; ++i) {
    PodRequest pod = Pod("m" + std::to_string(i), 2, 1000);
    pod.containers[0].models.allowed = {"A100"};
    p.OnArrival(pod);
  }
  // The only class wants two whole A100s.
  EXPECT_EQ(p.DeadMilli("A100", 64000, std::vector<int64_t>{1000, 1000}), 0);
  EXPECT_EQ(p.DeadMilli("A100", 64000, std::vector<int64_t>{1000, 900}), 1900);
  EXPECT_EQ(p.DeadMilli("T4", 64000, std::vector<int64_t>{1000, 1000}), 2000);
}

TEST(TesseraPolicy, ExpectedWasteFollowsTheLearnedShares) {
  TesseraPolicy p;
  EXPECT_EQ(p.ExpectedWaste(1000), 0.0);  // nothing learned yet
  Teach(p);
  // GPU demand: p(400) = 20/32, p(1000) = 12/32; both far above the fill
  // threshold (0.1), so any room they fit is filled.
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(300), 300.0);  // nothing fits
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(400), 0.0);    // one 400 share
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(500), 100.0);  // one 400 share, 100 left
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(900), 100.0);  // two 400 shares
  // An empty GPU: by popularity, a whole-GPU pod (12/32) leaves nothing and a
  // 400 share (20/32) leaves 600, whose waste is 200; the best fit (the
  // whole-GPU pod) leaves nothing. fill_greedy mixes the two.
  const double g = p.options().fill_greedy;
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(1000), (1 - g) * (20.0 / 32.0 * 200.0) + g * 0.0);
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(5000), p.ExpectedWaste(1000));  // clamped
}

TEST(TesseraPolicy, ExpectedWasteCountsRoomOnlyRareSharesFitAsMostlyWasted) {
  TesseraPolicyOptions o;
  o.coverage = 1.0;  // keep the rare class
  TesseraPolicy p(o);
  for (int i = 0; i < 31; ++i) p.OnArrival(Pod("w" + std::to_string(i), 1, 1000));
  p.OnArrival(Pod("small", 1, 200));
  // 300 free: only the 200 share fits, 1/32 of GPU demand, under the fill
  // threshold: filled (100 left) with r = (1/32) / threshold, else all 300
  // wasted.
  const double r = (1.0 / 32.0) / p.options().fill_threshold;
  ASSERT_LT(r, 1.0);
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(300), (1 - r) * 300.0 + r * 100.0);
  EXPECT_DOUBLE_EQ(p.ExpectedWaste(100), 100.0);
}

TEST(TesseraPolicy, NodeValueIsExpectedWastePlusDeadMilliAndIgnoresGpuOrder) {
  TesseraPolicy p;
  TesseraPolicy v1(TesseraPolicyOptions::V1(), "tessera-v1");
  TesseraPolicy v2(TesseraPolicyOptions::V2(), "tessera-v2");
  Teach(p);
  Teach(v1);
  Teach(v2);
  const std::vector<int64_t> a = {1000, 300, 0}, b = {0, 1000, 300};
  // Plenty of CPU: no stranding, so v1's value is FGD's fragmentation alone,
  // v2 adds the 300 dead milli, and the default counts expected waste instead
  // of fragmentation, and the dead milli at dead_weight.
  EXPECT_DOUBLE_EQ(v1.NodeValue("T4", 64000, a), NodeFragAmount(v1.workload(), "T4", 64000, a));
  EXPECT_DOUBLE_EQ(v2.NodeValue("T4", 64000, a), NodeFragAmount(v2.workload(), "T4", 64000, a) + 300.0);
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 64000, a),
                   p.ExpectedWaste(1000) + p.ExpectedWaste(300) + p.ExpectedWaste(0) +
                       p.options().dead_weight * 300.0);
  // Memoised on the sorted shares: the same value in any GPU order, twice.
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 64000, b), p.NodeValue("T4", 64000, a));
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 64000, b), p.NodeValue("T4", 64000, b));
}

TEST(TesseraPolicy, StarvedNodeCountsAllItsIdleGpusAtStarvedWeight) {
  TesseraPolicy p;
  TesseraPolicyOptions o = p.options();
  o.starved_weight = 0;
  TesseraPolicy q(o);
  Teach(p);
  Teach(q);
  // Every learned class wants 1000 CPU milli: with 500 left, no class can use
  // the node's 1300 idle GPU milli.
  const std::vector<int64_t> left = {1000, 300};
  EXPECT_EQ(p.DeadMilli("T4", 500, left), 1300);
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 500, left) - q.NodeValue("T4", 500, left),
                   p.options().starved_weight * 1300.0);
  // With the CPU, only the 300 sliver is dead, at dead_weight.
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 64000, left), q.NodeValue("T4", 64000, left));
}

TEST(TesseraPolicy, ScoresASliverNoClassCanUseBelowV1) {
  TesseraPolicy p(TesseraPolicyOptions::V2(), "tessera-v2");
  TesseraPolicy v1(TesseraPolicyOptions::V1(), "tessera-v1");
  Teach(p);
  Teach(v1);
  Ledger ledger;
  ASSERT_TRUE(ledger.AddNode(Node("n", {0, 0})).ok());
  // 400 on a free GPU leaves 600: a 400 pod still fits, nothing dead.
  // 700 leaves 300, which no class can use.
  Rng rng(1);
  const NodeState& node = ledger.nodes()[0];
  const Candidate a = p.Evaluate(Pod("x", 1, 400), node, rng);
  const Candidate a1 = v1.Evaluate(Pod("x", 1, 400), node, rng);
  EXPECT_EQ(a.score, a1.score);
  const Candidate b = p.Evaluate(Pod("y", 1, 700), node, rng);
  const Candidate b1 = v1.Evaluate(Pod("y", 1, 700), node, rng);
  EXPECT_LT(b.score, b1.score);
  // The score is FGD's squash of the value's change.
  const double before = p.NodeValue("T4", 64000, std::vector<int64_t>{1000, 1000});
  const double after = p.NodeValue("T4", 63000, std::vector<int64_t>{300, 1000});
  EXPECT_EQ(b.score, FgdScore(after - before));
}

TEST(TesseraPolicy, PrefersTheGpuWhereTheShareLeavesNothingDead) {
  TesseraPolicy p;
  Teach(p);
  Ledger ledger;
  ASSERT_TRUE(ledger.AddNode(Node("n", {0, 0})).ok());
  PodRequest first = Pod("first", 1, 600);
  Assignment a{"n", {{"main", {{0, "", 0, 600}}}}};
  ASSERT_TRUE(ledger.Assume(first, a).ok());
  // GPU 0 has 400 free: a 400 pod fills it exactly; on GPU 1 it would leave 600.
  Rng rng(1);
  const Candidate c = p.Evaluate(Pod("x", 1, 400), ledger.nodes()[0], rng);
  ASSERT_EQ(c.pick.count, 1);
  EXPECT_EQ(c.pick.index[0], 0);
}

TEST(TesseraPolicy, LeavesRoomACommonShareFillsRatherThanFitTightest) {
  TesseraPolicy p;
  // Half the pods want 600, half 400: they pair up on a GPU.
  for (int i = 0; i < 16; ++i) p.OnArrival(Pod("a" + std::to_string(i), 1, 600));
  for (int i = 0; i < 16; ++i) p.OnArrival(Pod("b" + std::to_string(i), 1, 400));
  Ledger ledger;
  ASSERT_TRUE(ledger.AddNode(Node("n", {0, 0})).ok());
  ASSERT_TRUE(ledger.Assume(Pod("first", 1, 300), Assignment{"n", {{"main", {{0, "", 0, 300}}}}}).ok());
  // A 400 pod fits tightest on GPU 0 (700 free), but would leave 300 there,
  // which no pod of this workload fills; on GPU 1 it leaves 600, which a 600
  // share fills exactly.
  Rng rng(1);
  const Candidate c = p.Evaluate(Pod("x", 1, 400), ledger.nodes()[0], rng);
  ASSERT_EQ(c.pick.count, 1);
  EXPECT_EQ(c.pick.index[0], 1);
  EXPECT_LT(p.ExpectedWaste(600) - p.ExpectedWaste(1000), p.ExpectedWaste(300) - p.ExpectedWaste(700));
}

TEST(TesseraPolicy, RefreshWithinToleranceKeepsCachedScores) {
  TesseraPolicy p;
  TesseraPolicy v1(TesseraPolicyOptions::V1(), "tessera-v1");
  Teach(p);
  Teach(v1);
  EXPECT_EQ(p.epoch(), 1u);
  EXPECT_EQ(v1.epoch(), 1u);
  Teach(p);  // the same mix again: the refresh at 64 arrivals changes nothing
  Teach(v1);
  EXPECT_EQ(p.epoch(), 1u);
  EXPECT_EQ(v1.epoch(), 2u);  // v1 adopts every refresh
  // A different mix is adopted.
  for (int i = 0; i < 64; ++i) p.OnArrival(Pod("big" + std::to_string(i), 2, 1000));
  EXPECT_EQ(p.epoch(), 2u);
}

// Teaches `p` 16 whole-GPU pods of 1000 CPU milli interleaved with 16 CPU-only
// pods of `cpu_only_cpu` (32 arrivals, the first refresh).
void TeachWithCpuPods(TesseraPolicy& p, int64_t cpu_only_cpu) {
  for (int i = 0; i < 16; ++i) {
    p.OnArrival(Pod("w" + std::to_string(i), 1, 1000, 1000));
    p.OnArrival(PodRequest{"c" + std::to_string(i), cpu_only_cpu, 1024, {{"main", 0, 0, 0, {}}}});
  }
}

TEST(TesseraPolicy, CpuPressureRaisesTheStrandRatio) {
  TesseraPolicy p;
  TesseraPolicy v3(TesseraPolicyOptions::V3(), "tessera-v3");
  // GPU pods ask 1000 CPU milli per GPU; all pods ask 1.8 times the GPU
  // pods' CPU: c = 1.8, so the ratio is raised by 1 + 1.0 * (1.8 - 1.2) = 1.6.
  TeachWithCpuPods(p, 800);
  TeachWithCpuPods(v3, 800);
  EXPECT_DOUBLE_EQ(v3.strand_ratio(), 1000.0);
  EXPECT_DOUBLE_EQ(p.strand_ratio(), 1600.0);
  // Two idle GPUs and 2000 CPU milli free: enough at 1000 per GPU, but at
  // 1600 only 1250 GPU milli can be fed, so 750 count as stranded.
  const std::vector<int64_t> idle = {1000, 1000};
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 2000, idle) - v3.NodeValue("T4", 2000, idle), 750.0);
  // With CPU to spare, the boost changes nothing.
  EXPECT_DOUBLE_EQ(p.NodeValue("T4", 64000, idle), v3.NodeValue("T4", 64000, idle));
}

TEST(TesseraPolicy, CpuPressureIsOffWithoutCpuOnlyPodsAndCapped) {
  TesseraPolicy plain;
  Teach(plain);  // GPU pods only: c = 1, below the knee
  EXPECT_DOUBLE_EQ(plain.strand_ratio(), 1000.0 * 32000.0 / 20000.0);
  TesseraPolicy heavy;
  TeachWithCpuPods(heavy, 10000);  // c = 11: the boost stops at cpu_pressure_max
  EXPECT_DOUBLE_EQ(heavy.strand_ratio(), 1000.0 * heavy.options().cpu_pressure_max);
}

TEST(TesseraPolicy, WorkloadDistance) {
  TargetWorkload a, b;
  a.classes.push_back({0, 500, 1, {}, 0.5});
  a.classes.push_back({0, 1000, 1, {}, 0.5});
  EXPECT_DOUBLE_EQ(WorkloadDistance(a, a), 0.0);
  b.classes.push_back({0, 500, 1, {}, 0.75});
  b.classes.push_back({0, 1000, 1, {}, 0.25});
  EXPECT_DOUBLE_EQ(WorkloadDistance(a, b), 0.5);
  TargetWorkload c;
  c.classes.push_back({4000, 0, 0, {}, 1.0});
  EXPECT_DOUBLE_EQ(WorkloadDistance(a, c), 2.0);
}

TEST(TesseraPolicy, RegisteredNames) {
  auto cur = MakePolicy("tessera", {});
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ((*cur)->name(), "tessera");
  EXPECT_GT(static_cast<TesseraPolicy&>(**cur).options().dead_weight, 0);
  EXPECT_GT(static_cast<TesseraPolicy&>(**cur).options().waste_weight, 0);
  EXPECT_EQ(static_cast<TesseraPolicy&>(**cur).options().frag_weight, 0);
  EXPECT_GT(static_cast<TesseraPolicy&>(**cur).options().cpu_pressure_gain, 0);
  auto v3 = MakePolicy("tessera-v3", {});
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ((*v3)->name(), "tessera-v3");
  EXPECT_EQ(static_cast<TesseraPolicy&>(**v3).options().cpu_pressure_gain, 0);
  EXPECT_GT(static_cast<TesseraPolicy&>(**v3).options().waste_weight, 0);
  auto v2 = MakePolicy("tessera-v2", {});
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ((*v2)->name(), "tessera-v2");
  EXPECT_EQ(static_cast<TesseraPolicy&>(**v2).options().waste_weight, 0);
  EXPECT_EQ(static_cast<TesseraPolicy&>(**v2).options().cpu_pressure_gain, 0);
  EXPECT_GT(static_cast<TesseraPolicy&>(**v2).options().dead_weight, 0);
  auto v1 = MakePolicy("tessera-v1", {});
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ((*v1)->name(), "tessera-v1");
  EXPECT_EQ(static_cast<TesseraPolicy&>(**v1).options().dead_weight, 0);
  EXPECT_EQ(static_cast<TesseraPolicy&>(**v1).options().cpu_pressure_gain, 0);
}

}  // namespace
}  // namespace tessera::core
