#include "core/dra_allocator.h"

#include <gtest/gtest.h>

#include "core/random.h"

namespace tessera::core {
namespace {

NodeInfo Node(int gpus, int64_t gpu_mem = 0) {
  NodeInfo n{"n", 64000, 262144, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "", "T4", gpu_mem});
  return n;
}

PodRequest Pod(const std::string& key, int gpus, int64_t core, int64_t mem = 0) {
  return PodRequest{key, 1000, 1024, {{"main", gpus, mem, core, {}}}};
}

// Books a share of `core` milli (and `mem` MiB) on GPU `gpu`.
void Take(Ledger& l, const std::string& key, int gpu, int64_t core, int64_t mem = 0) {
  ASSERT_TRUE(l.Assume(Pod(key, 1, core, mem), {"n", {{"main", {{gpu, "", mem, core}}}}}).ok()) << key;
}

std::vector<int> Picked(const GpuPick& p) { return {p.index.begin(), p.index.begin() + p.count}; }

TEST(SliceDeviceOrder, IndexOrderOrLeastFreeFirstWithoutUnhealthyGpus) {
  NodeInfo info = Node(4, 16384);
  info.gpus[3].healthy = false;
  Ledger l;
  ASSERT_TRUE(l.AddNode(info).ok());
  Take(l, "a", 0, 300);
  Take(l, "b", 1, 600);
  Take(l, "c", 2, 600, 8192);
  const NodeState& n = *l.FindNode("n");
  EXPECT_EQ(SliceDeviceOrder(n, SliceOrder::kGpuIndex), (std::vector<int>{0, 1, 2}));
  // GPUs 1 and 2 both have 400 free; 2 has less memory free.
  EXPECT_EQ(SliceDeviceOrder(n, SliceOrder::kLeastFreeFirst), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(SliceOrderName(SliceOrder::kLeastFreeFirst), "least-free-first");
}

TEST(AllocatorPick, FirstFitInSliceOrderNotBestFit) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node(4)).ok());
  Take(l, "a", 0, 300);  // 700 free
  Take(l, "b", 1, 600);  // 400 free
  const NodeState& n = *l.FindNode("n");
  GpuPick pick;
  ASSERT_TRUE(AllocatorPick(Pod("x", 1, 300), n, SliceDeviceOrder(n, SliceOrder::kGpuIndex), &pick));
  EXPECT_EQ(Picked(pick), std::vector<int>{0});  // the first with room
  ASSERT_TRUE(AllocatorPick(Pod("x", 1, 300), n, SliceDeviceOrder(n, SliceOrder::kLeastFreeFirst), &pick));
  EXPECT_EQ(Picked(pick), std::vector<int>{1});  // the tightest fit
  ASSERT_TRUE(AllocatorPick(Pod("y", 1, 500), n, SliceDeviceOrder(n, SliceOrder::kLeastFreeFirst), &pick));
  EXPECT_EQ(Picked(pick), std::vector<int>{0});  // 400 is too small
  // Whole GPUs: fully free ones only, distinct, in slice order.
  ASSERT_TRUE(AllocatorPick(Pod("w", 2, 1000), n, {3, 0, 1, 2}, &pick));
  EXPECT_EQ(Picked(pick), (std::vector<int>{3, 2}));
  EXPECT_FALSE(AllocatorPick(Pod("w3", 3, 1000), n, SliceDeviceOrder(n, SliceOrder::kGpuIndex), &pick));
  EXPECT_FALSE(AllocatorPick(Pod("big", 1, 800), n, {0, 1}, &pick));  // GPUs left out of the slice are not tried
}

TEST(AllocatorPick, HonoursMemoryModelAndMps) {
  NodeInfo info = Node(3, 16384);
  info.gpus[0].model = "P100";
  info.gpus[2].mps = true;
  Ledger l;
  ASSERT_TRUE(l.AddNode(info).ok());
  Take(l, "a", 1, 100, 12288);  // GPU 1: 900 milli but only 4096 MiB free
  const NodeState& n = *l.FindNode("n");
  const std::vector<int> order = SliceDeviceOrder(n, SliceOrder::kGpuIndex);
  PodRequest t4 = Pod("x", 1, 200, 8192);
  t4.containers[0].models.allowed = {"T4"};
  GpuPick pick;
  ASSERT_TRUE(AllocatorPick(t4, n, order, &pick));
  EXPECT_EQ(Picked(pick), std::vector<int>{2});  // 0 is a P100, 1 lacks memory
  PodRequest mps = Pod("m", 1, 200);
  mps.isolation = Isolation::kMps;
  ASSERT_TRUE(AllocatorPick(mps, n, order, &pick));
  EXPECT_EQ(Picked(pick), std::vector<int>{2});
}

TEST(AllocatorPick, BacktracksAcrossContainersAsTheAllocatorDoes) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node(2)).ok());
  Take(l, "a", 1, 400);  // GPU 0: 1000 free, GPU 1: 600
  const NodeState& n = *l.FindNode("n");
  PodRequest pod{"two", 1000, 1024, {{"share", 1, 0, 500, {}}, {"whole", 1, 0, 1000, {}}}};
  // First fit puts the 500 share on GPU 0, and then no GPU is whole: the
  // share moves on to GPU 1.
  GpuPick pick;
  ASSERT_TRUE(AllocatorPick(pod, n, SliceDeviceOrder(n, SliceOrder::kGpuIndex), &pick));
  EXPECT_EQ(Picked(pick), (std::vector<int>{1, 0}));
}

TEST(AllocatorPick, LeastFreeFirstIsBestFitForOneShare) {
  // On random node states, first fit over the least-free-first slice takes
  // the GPU PickGpus(kBestFit) takes, for every share size.
  Rng rng(7);
  for (int round = 0; round < 200; ++round) {
    Ledger l;
    ASSERT_TRUE(l.AddNode(Node(8, 32768)).ok());
    for (int k = 0; k < 12; ++k) {
      const int gpu = static_cast<int>(rng.Below(8));
      const int64_t core = 50 * static_cast<int64_t>(1 + rng.Below(12));
      const int64_t mem = 2048 * static_cast<int64_t>(rng.Below(6));
      PodRequest p = Pod("p" + std::to_string(k), 1, core, mem);
      (void)l.Assume(p, {"n", {{"main", {{gpu, "", mem, core}}}}});  // refused when it does not fit: fine
    }
    const NodeState& n = *l.FindNode("n");
    const std::vector<int> order = SliceDeviceOrder(n, SliceOrder::kLeastFreeFirst);
    for (int64_t core = 50; core <= 1000; core += 50) {
      for (int64_t mem : {0, 4096, 16384}) {
        const PodRequest pod = Pod("x", 1, core, mem);
        GpuPick ours, best;
        const bool fits = PickGpus(pod, n, GpuSelect::kBestFit, nullptr, &best);
        ASSERT_EQ(AllocatorPick(pod, n, order, &ours), fits) << core << " " << mem;
        if (fits) {
          EXPECT_EQ(Picked(ours), Picked(best)) << "round " << round << " core " << core << " mem " << mem;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::core
