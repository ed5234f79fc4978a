#include "core/dra_policy.h"

#include <gtest/gtest.h>

#include "core/fgd_policy.h"
#include "core/placer.h"
#include "core/tessera_policy.h"

namespace tessera::core {
namespace {

NodeInfo Node(const std::string& name, int gpus) {
  NodeInfo n{name, 64000, 262144, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "", "T4", 0});
  return n;
}

PodRequest Pod(const std::string& key, int gpus, int64_t core) {
  return PodRequest{key, 1000, 1024, {{"main", gpus, 0, core, {}}}};
}

Assignment On(const std::string& node, int gpu, int64_t core) { return {node, {{"main", {{gpu, "", 0, core}}}}}; }

// Half the pods want 600, half 400 (tessera_policy_test.cc's workload where
// tessera keeps an empty GPU rather than fit a 400 tightest).
void Teach(PlacementPolicy& p) {
  for (int i = 0; i < 16; ++i) p.OnArrival(Pod("a" + std::to_string(i), 1, 600));
  for (int i = 0; i < 16; ++i) p.OnArrival(Pod("b" + std::to_string(i), 1, 400));
}

std::unique_ptr<PlacementPolicy> Make(std::string_view name) {
  auto p = MakeDraPolicy(name, {});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

TEST(DraPolicy, NamesAndUnknownName) {
  for (const auto& name : DraPolicyNames()) EXPECT_EQ(Make(name)->name(), name);
  auto bad = MakeDraPolicy("dra-fgd", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dra-tessera-sorted"), std::string::npos) << bad.status().message();
  // The extender's registry does not offer them.
  EXPECT_FALSE(MakePolicy("dra-kube", {}).ok());
}

TEST(DraPolicy, TheGpuIsTheAllocatorsFirstFitInSliceOrder) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 3)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 300), On("n", 0, 300)).ok());  // 700 free
  ASSERT_TRUE(l.Assume(Pod("b", 1, 600), On("n", 1, 600)).ok());  // 400 free
  const NodeState& n = *l.FindNode("n");
  Rng rng(1);
  EXPECT_EQ(Make("dra-kube")->Evaluate(Pod("x", 1, 300), n, rng).pick.index[0], 0);
  EXPECT_EQ(Make("dra-kube-sorted")->Evaluate(Pod("x", 1, 300), n, rng).pick.index[0], 1);
  EXPECT_EQ(Make("dra-tessera")->Evaluate(Pod("x", 1, 300), n, rng).pick.index[0], 0);
  EXPECT_EQ(Make("dra-tessera-sorted")->Evaluate(Pod("x", 1, 300), n, rng).pick.index[0], 1);
  EXPECT_EQ(Make("dra-kube")->tie_break(), TieBreak::kRandom);
  EXPECT_EQ(Make("dra-tessera")->tie_break(), TieBreak::kNodeOrder);
}

TEST(DraPolicy, TesseraScoresTheNodeByItsOwnPickOrByTheAllocators) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 2)).ok());
  ASSERT_TRUE(l.Assume(Pod("first", 1, 300), On("n", 0, 300)).ok());
  const NodeState& n = *l.FindNode("n");
  const PodRequest pod = Pod("x", 1, 400);
  TesseraPolicy tessera;
  Teach(tessera);
  auto own = Make("dra-tessera-node");
  auto aware = Make("dra-tessera");
  Teach(*own);
  Teach(*aware);
  Rng rng(1);
  // tessera would put the 400 on the empty GPU 1; the allocator's first fit
  // takes GPU 0 and leaves 300 there that no pod of the workload fills.
  const Candidate best = tessera.Evaluate(pod, n, rng);
  ASSERT_EQ(best.pick.index[0], 1);
  GpuPick first_fit;
  first_fit.Add(0);
  const int64_t first_fit_score = tessera.ScorePick(pod, n, first_fit, rng);
  EXPECT_LT(first_fit_score, best.score);
  const Candidate c_own = own->Evaluate(pod, n, rng);
  EXPECT_EQ(c_own.score, best.score);
  EXPECT_EQ(c_own.pick.index[0], 0);
  const Candidate c_aware = aware->Evaluate(pod, n, rng);
  EXPECT_EQ(c_aware.score, first_fit_score);
  EXPECT_EQ(c_aware.pick.index[0], 0);
}

TEST(DraPolicy, AwareSteeringAvoidsNodesWhereFirstFitStrandsAShare) {
  // "a" has GPU 0 at 700 free and GPU 1 empty, "b" is empty. tessera alone
  // can use a's empty GPU; under first fit the pod would land on a's GPU 0,
  // so the aware variant sends it to b.
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("a", 2)).ok());
  ASSERT_TRUE(l.AddNode(Node("b", 2)).ok());
  ASSERT_TRUE(l.Assume(Pod("first", 1, 300), On("a", 0, 300)).ok());
  auto aware = Make("dra-tessera");
  Teach(*aware);
  Rng rng(1);
  const PodRequest pod = Pod("x", 1, 400);
  EXPECT_LT(aware->Evaluate(pod, *l.FindNode("a"), rng).score, aware->Evaluate(pod, *l.FindNode("b"), rng).score);
  Placer placer(*aware, 1);
  auto placed = placer.Place(pod, l);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->node, "b");
  EXPECT_EQ(placed->containers[0].gpus[0].index, 0);
}

TEST(ScorePick, OfThePolicysOwnPickIsEvaluatesScore) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 4)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 300), On("n", 0, 300)).ok());
  ASSERT_TRUE(l.Assume(Pod("b", 1, 850), On("n", 2, 850)).ok());
  TargetWorkload w;
  w.classes.push_back({1000, 400, 1, {}, 0.5});
  w.classes.push_back({1000, 600, 1, {}, 0.5});
  for (const char* name : {"tessera", "tessera-v2", "fgd"}) {
    auto p = std::move(MakePolicy(name, PolicyConfig{w})).value();
    Teach(*p);
    Rng rng(1);
    for (const PodRequest& pod : {Pod("s", 1, 400), Pod("t", 1, 100), Pod("w", 2, 1000)}) {
      const Candidate c = p->Evaluate(pod, *l.FindNode("n"), rng);
      EXPECT_EQ(p->ScorePick(pod, *l.FindNode("n"), c.pick, rng), c.score) << name << " " << pod.key;
    }
  }
}

}  // namespace
}  // namespace tessera::core
