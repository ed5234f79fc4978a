#include "core/ledger.h"
#include "core/placer.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera::core {
namespace {

NodeInfo MakeNode(const std::string& name, int gpus, int64_t gpu_mem = 16384,
                  const std::string& model = "T4") {
  NodeInfo n{name, 32000, 65536, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, name + "-gpu" + std::to_string(i), model, gpu_mem});
  return n;
}

PodRequest Pod(const std::string& key, int gpus, int64_t mem, int64_t core, int64_t cpu = 1000) {
  PodRequest p{key, cpu, 1024, {{"main", gpus, mem, core, {}}}};
  return p;
}

Assignment On(const std::string& node, std::vector<int> idx, int64_t mem, int64_t core) {
  Assignment a{node, {{"main", {}}}};
  for (int i : idx) a.containers[0].gpus.push_back({i, "", mem, core});
  return a;
}

TEST(Ledger, TouchGivesANewVersionAndChangesNothingElse) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(MakeNode("n1", 2)).ok());
  ASSERT_TRUE(l.AddNode(MakeNode("n2", 2)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 4096, 300), On("n1", {0}, 4096, 300)).ok());
  const NodeState before = *l.FindNode("n1");
  const uint64_t other = l.FindNode("n2")->version;
  ASSERT_TRUE(l.Touch("n1").ok());
  const NodeState& after = *l.FindNode("n1");
  EXPECT_NE(after.version, before.version);
  EXPECT_NE(after.version, other);
  EXPECT_EQ(after.gpus, before.gpus);
  EXPECT_EQ(after.info, before.info);
  EXPECT_EQ(l.FindNode("n2")->version, other);
  EXPECT_EQ(l.Touch("nope").code(), StatusCode::kNotFound);
}

TEST(Ledger, AssumeConfirmForget) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(MakeNode("n1", 2)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 4096, 300), On("n1", {0}, 4096, 300)).ok());
  EXPECT_EQ(*l.StateOf("a"), HoldState::kAssumed);
  ASSERT_TRUE(l.Confirm("a").ok());
  EXPECT_EQ(*l.StateOf("a"), HoldState::kConfirmed);
  EXPECT_EQ(l.FindNode("n1")->gpus[0].core_used_milli, 300);
  EXPECT_EQ(l.FindNode("n1")->GpuMemFree(0), 16384 - 4096);
  ASSERT_TRUE(l.Forget("a").ok());
  EXPECT_EQ(l.FindNode("n1")->gpus[0], GpuUsage{});
  EXPECT_EQ(l.Forget("a").code(), StatusCode::kNotFound);
}

TEST(Ledger, WholeGpuWithoutMemorySizeHoldsAllOfItsMemory) {
  Ledger ledger;
  ASSERT_TRUE(ledger.AddNode(MakeNode("n1", 2, 40960)).ok());
  const PodRequest pod = Pod("ns/whole", 1, 0, kCoreMilliPerGpu);
  GpuPick pick;
  pick.Add(1);
  const Assignment a = MakeAssignment(pod, *ledger.FindNode("n1"), pick);
  ASSERT_EQ(a.containers[0].gpus[0].mem_mib, 40960);
  ASSERT_TRUE(ledger.Assume(pod, a).ok());
  EXPECT_EQ(ledger.FindNode("n1")->GpuMemFree(1), 0);
  // A memory-only share (no core) keeps a whole GPU off that card.
  Ledger shared;
  ASSERT_TRUE(shared.AddNode(MakeNode("n2", 1, 40960)).ok());
  ASSERT_TRUE(shared.Assume(Pod("ns/mem-only", 1, 1024, 0), On("n2", {0}, 1024, 0)).ok());
  EXPECT_EQ(FitsNode(pod, *shared.FindNode("n2")), FitFailure::kGpuMemory);
  // A fraction still has to match its request exactly.
  EXPECT_FALSE(ledger.CheckFits(Pod("ns/frac", 1, 0, 500), On("n1", {0}, 40960, 500)).ok());
}

TEST(Ledger, SharerLimitBoundsContainersPerGpu) {
  NodeInfo node = MakeNode("n1", 2);
  for (auto& g : node.gpus) g.max_sharers = 2;
  Ledger l;
  ASSERT_TRUE(l.AddNode(node).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 1024, 100), On("n1", {0}, 1024, 100)).ok());
  ASSERT_TRUE(l.Assume(Pod("b", 1, 1024, 100), On("n1", {0}, 1024, 100)).ok());
  // Memory and compute are left on GPU 0, but both of its slots are taken.
  const Status third = l.Assume(Pod("c", 1, 1024, 100), On("n1", {0}, 1024, 100));
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("its limit is 2"), std::string::npos) << third.message();
  // The fit check agrees: the next share goes to GPU 1.
  GpuPick pick;
  ASSERT_TRUE(PickGpus(Pod("c", 1, 1024, 100), *l.FindNode("n1"), GpuSelect::kBestFit, nullptr, &pick));
  EXPECT_EQ(pick.index[0], 1);
  EXPECT_EQ(ShareCandidates(Pod("c", 1, 1024, 100), *l.FindNode("n1")).size(), 1u);
  ASSERT_TRUE(l.Forget("a").ok());
  EXPECT_TRUE(l.Assume(Pod("c", 1, 1024, 100), On("n1", {0}, 1024, 100)).ok());
}

TEST(Ledger, HoldersWithoutSlotsTakeShareButNoSharerSlot) {
  Ledger l;
  NodeInfo n = MakeNode("n1", 1);
  n.gpus[0].max_sharers = 1;
  ASSERT_TRUE(l.AddNode(n).ok());
  // A DRA claim: memory and compute, no device-plugin slot.
  ASSERT_TRUE(l.Assume(Pod("claim:c", 1, 8192, 300), On("n1", {0}, 8192, 300), /*takes_slots=*/false).ok());
  EXPECT_EQ(l.FindNode("n1")->gpus[0].sharers, 0);
  EXPECT_EQ(l.FindNode("n1")->gpus[0].mem_used_mib, 8192);
  // The one slot is still free for a pod, and the claim's memory is not.
  EXPECT_EQ(l.Assume(Pod("a", 1, 9000, 100), On("n1", {0}, 9000, 100)).code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(l.Assume(Pod("a", 1, 8192, 100), On("n1", {0}, 8192, 100)).ok());
  EXPECT_EQ(l.FindNode("n1")->gpus[0].sharers, 1);
  // A GPU held only by the claim cannot disappear under it.
  ASSERT_TRUE(l.Forget("a").ok());
  NodeInfo none = n;
  none.gpus.clear();
  EXPECT_EQ(l.UpdateNode(none).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(l.Forget("claim:c").ok());
  EXPECT_EQ(l.FindNode("n1")->gpus[0], GpuUsage{});
}

TEST(Ledger, RefusesOverCommitAndNamesTheShortfall) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(MakeNode("n1", 1)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 0, 700), On("n1", {0}, 0, 700)).ok());
  Status s = l.Assume(Pod("b", 1, 0, 400), On("n1", {0}, 0, 400));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("300 core milli free"), std::string::npos) << s.message();
  Status m = l.Assume(Pod("c", 1, 20000, 100), On("n1", {0}, 20000, 100));
  EXPECT_EQ(m.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(l.pod_count(), 1u);
}

TEST(Ledger, RejectsAssignmentsThatDoNotMatchTheRequest) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(MakeNode("n1", 2)).ok());
  EXPECT_EQ(l.Assume(Pod("a", 2, 0, 1000), On("n1", {0}, 0, 1000)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.Assume(Pod("a", 2, 0, 1000), On("n1", {1, 1}, 0, 1000)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.Assume(Pod("a", 1, 0, 500), On("n1", {5}, 0, 500)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.Assume(Pod("a", 1, 0, 500), On("n2", {0}, 0, 500)).code(), StatusCode::kNotFound);
  auto pod = Pod("a", 1, 0, 500);
  pod.containers[0].models.allowed = {"A100"};
  EXPECT_EQ(l.Assume(pod, On("n1", {0}, 0, 500)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(l.Assume(Pod("a", 1, 0, 500), On("n1", {0}, 0, 500)).ok());
  EXPECT_EQ(l.Assume(Pod("a", 1, 0, 500), On("n1", {1}, 0, 500)).code(), StatusCode::kAlreadyExists);
}

TEST(Ledger, NodeLifecycleKeepsAllocations) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(MakeNode("n1", 2)).ok());
  EXPECT_EQ(l.AddNode(MakeNode("n1", 2)).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(l.Assume(Pod("a", 1, 8192, 500), On("n1", {1}, 8192, 500)).ok());
  EXPECT_EQ(l.UpdateNode(MakeNode("n1", 1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(l.UpdateNode(MakeNode("n1", 2, 4096)).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(l.UpdateNode(MakeNode("n1", 4)).ok());
  EXPECT_EQ(l.FindNode("n1")->gpus[1].core_used_milli, 500);
  Status rm = l.RemoveNode("n1");
  EXPECT_EQ(rm.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(rm.message().find("a"), std::string::npos);
  ASSERT_TRUE(l.Forget("a").ok());
  EXPECT_TRUE(l.RemoveNode("n1").ok());
  EXPECT_EQ(l.FindNode("n1"), nullptr);
}

// Property: over long random sequences of operations, (1) no GPU, CPU or
// memory is ever over-committed, (2) the books equal the sum of held pods, and
// (3) a failed operation changes nothing.
TEST(LedgerProperty, RandomOperationSequencesNeverOverCommit) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Ledger l;
    std::vector<std::string> names;
    for (int n = 0; n < 4; ++n) {
      names.push_back("n" + std::to_string(n));
      ASSERT_TRUE(l.AddNode(MakeNode(names.back(), 1 + n % 4)).ok());
    }
    std::map<std::string, std::pair<PodRequest, Assignment>> held;
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    for (int step = 0; step < 3000; ++step) {
      const auto before = l.nodes();
      const size_t pods_before = l.pod_count();
      Status s;
      const int op = pick(10);
      if (op < 6) {
        const std::string node = names[pick(4)];
        const int ngpu = static_cast<int>(l.FindNode(node)->gpus.size());
        const int count = 1 + pick(2);
        const int64_t core = count > 1 ? 1000 : 50 * (1 + pick(20));
        const int64_t mem = 1024 * pick(10);
        std::vector<int> idx;
        for (int k = 0; k < count; ++k) idx.push_back(pick(ngpu + 1));  // may be invalid
        const std::string key = "p" + std::to_string(pick(60));
        auto pod = Pod(key, count, mem, core, 1000 * pick(12));
        auto a = On(node, idx, mem, core);
        s = l.Assume(pod, a);
        if (s.ok()) held[key] = {pod, a};
      } else if (op < 9) {
        const std::string key = "p" + std::to_string(pick(60));
        s = l.Forget(key);
        if (s.ok()) held.erase(key);
      } else {
        s = l.Confirm("p" + std::to_string(pick(60)));
      }
      if (!s.ok()) {
        ASSERT_EQ(l.pod_count(), pods_before);
        for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(l.nodes()[i].gpus, before[i].gpus);
      }
      // Recompute books from held pods.
      for (const NodeState& n : l.nodes()) {
        int64_t cpu = 0;
        std::vector<int64_t> core(n.gpus.size()), mem(n.gpus.size());
        for (const auto& [k, pa] : held) {
          if (pa.second.node != n.info.name) continue;
          cpu += pa.first.cpu_milli;
          for (const auto& sh : pa.second.containers[0].gpus) {
            core[sh.index] += sh.core_milli;
            mem[sh.index] += sh.mem_mib;
          }
        }
        ASSERT_EQ(n.cpu_used_milli, cpu);
        ASSERT_LE(n.cpu_used_milli, n.info.cpu_milli);
        ASSERT_LE(n.mem_used_mib, n.info.memory_mib);
        for (size_t g = 0; g < n.gpus.size(); ++g) {
          ASSERT_EQ(n.gpus[g].core_used_milli, core[g]);
          ASSERT_EQ(n.gpus[g].mem_used_mib, mem[g]);
          ASSERT_LE(n.gpus[g].core_used_milli, kCoreMilliPerGpu);
          ASSERT_LE(n.gpus[g].mem_used_mib, n.info.gpus[g].memory_mib);
          ASSERT_GE(n.GpuCoreFree(static_cast<int>(g)), 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::core
