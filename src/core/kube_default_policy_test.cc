#include "core/kube_default_policy.h"

#include <gtest/gtest.h>

#include <set>

#include "core/placer.h"

namespace tessera::core {
namespace {

NodeInfo Node(const std::string& name, int gpus = 2) {
  NodeInfo n{name, 64000, 262144, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "", "T4", 0});
  return n;
}

PodRequest Pod(const std::string& key, int64_t cpu, int64_t mem, int64_t core = 500) {
  return PodRequest{key, cpu, mem, {{"main", 1, 0, core, {}}}};
}

TEST(KubeDefaultScore, LeastAllocatedPlusBalancedAllocation) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n")).ok());
  // An eighth of CPU and memory on an empty node: LeastAllocated
  // (87 + 87) / 2 = 87; balance stays perfect, 50 + (50 + 100 - 100) / 2 = 75.
  EXPECT_EQ(KubeDefaultScore(Pod("x", 8000, 32768), *l.FindNode("n")), 87 + 75);
  // Half the CPU taken, no memory: a memory-only pod evens the node out.
  // LeastAllocated (50 + 50) / 2 = 50; balance from 75 to 100:
  // 50 + (50 + 25) / 2 = 87.
  ASSERT_TRUE(l.Assume(PodRequest{"cpu", 32000, 0, {}}, Assignment{"n", {}}).ok());
  EXPECT_EQ(KubeDefaultScore(Pod("y", 0, 131072), *l.FindNode("n")), 50 + 87);
  // A CPU-only request there fills the CPU (LeastAllocated (0 + 100) / 2)
  // and unbalances it further: 50 + (50 + 50 - 75) / 2 = 62.
  EXPECT_EQ(KubeDefaultScore(Pod("z", 32000, 0), *l.FindNode("n")), 50 + 62);
}

TEST(KubeDefaultPolicy, SpreadsByCpuAndMemoryAndIgnoresGpus) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("busy")).ok());
  ASSERT_TRUE(l.AddNode(Node("idle", 8)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 16000, 65536, 900), {"busy", {{"main", {{0, "", 0, 900}}}}}).ok());
  KubeDefaultPolicy p;
  Placer placer(p, 1);
  auto a = placer.Place(Pod("x", 4000, 16384, 100), l);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->node, "idle");  // the least allocated, though "busy" has a GPU the share fits tighter on
  Rng rng(1);
  const int64_t total = KubeDefaultScore(Pod("x", 4000, 16384, 100), *l.FindNode("idle"));
  const Candidate c = p.Evaluate(Pod("x", 4000, 16384, 100), *l.FindNode("idle"), rng);
  EXPECT_EQ(c.fine, static_cast<double>(total));  // ranks by the total,
  EXPECT_EQ(c.score, total / 2);                  // within 0..100
}

TEST(KubeDefaultPolicy, BreaksTiesAtRandomAsSelectHostDoes) {
  Ledger l;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(l.AddNode(Node("n" + std::to_string(i))).ok());
  KubeDefaultPolicy p;
  EXPECT_EQ(p.tie_break(), TieBreak::kRandom);
  std::set<std::string> chosen;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Placer placer(p, seed);
    auto a = placer.Place(Pod("x", 1000, 1024), l);
    ASSERT_TRUE(a.ok());
    chosen.insert(a->node);
  }
  EXPECT_EQ(chosen.size(), 4u);
}

}  // namespace
}  // namespace tessera::core
