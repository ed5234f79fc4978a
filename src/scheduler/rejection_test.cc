#include "scheduler/rejection.h"

#include <gtest/gtest.h>

namespace tessera::scheduler {
namespace {

core::NodeState Node(int gpus, const std::string& model, int64_t mem) {
  core::NodeState n;
  n.info.name = "n1";
  n.info.cpu_milli = 8000;
  n.info.memory_mib = 65536;
  for (int i = 0; i < gpus; ++i) {
    core::GpuInfo g;
    g.index = i;
    g.model = model;
    g.memory_mib = mem;
    n.info.gpus.push_back(g);
  }
  n.gpus.resize(static_cast<size_t>(gpus));
  return n;
}

core::PodRequest Pod(int gpus, int64_t mem, int64_t core_milli) {
  core::PodRequest p;
  p.key = "ns/p";
  p.cpu_milli = 1000;
  p.memory_mib = 1024;
  p.containers.push_back({"main", gpus, mem, core_milli, {}});
  return p;
}

Rejection Explain(const core::PodRequest& pod, const core::NodeState& node, bool detailed = true) {
  const core::FitFailure why = core::FitsNode(pod, node);
  EXPECT_NE(why, core::FitFailure::kNone);
  return ExplainMisfit(pod, node, why, detailed);
}

TEST(RejectionTest, CpuAndMemory) {
  core::NodeState node = Node(1, "T4", 15360);
  node.cpu_used_milli = 7500;
  Rejection r = Explain(Pod(1, 1024, 100), node);
  EXPECT_EQ(r.reason, "node n1: not enough CPU for 1000m (500m of 8000m left after GPU pods)");
  EXPECT_FALSE(r.unresolvable);
  core::PodRequest huge = Pod(1, 1024, 100);
  huge.memory_mib = 1 << 20;
  r = Explain(huge, Node(1, "T4", 15360), /*detailed=*/false);
  EXPECT_EQ(r.reason, "not enough memory for 1048576 MiB");
  EXPECT_TRUE(r.unresolvable);
}

TEST(RejectionTest, SharesNameTheClosestGpu) {
  core::NodeState node = Node(2, "A100", 40960);
  node.gpus[0] = {30000, 200, 1};
  node.gpus[1] = {1000, 900, 1};
  Rejection r = Explain(Pod(1, 16384, 300), node);
  EXPECT_EQ(r.reason,
            "node n1: no GPU with 16384 MiB and 30 percent free; largest free share is 10960 MiB and 80 percent on GPU 0 (A100)");
  EXPECT_FALSE(r.unresolvable);
  r = Explain(Pod(1, 4096, 900), node);
  EXPECT_EQ(r.reason, "node n1: no GPU with 4096 MiB and 90 percent free; largest free share is 10960 MiB and 80 percent on GPU 0 (A100)");
  r = Explain(Pod(1, 40000, 0), node);
  EXPECT_EQ(r.reason, "node n1: no GPU with 40000 MiB free; largest free share is 39960 MiB and 10 percent on GPU 1 (A100)");
  r = Explain(Pod(1, 4096, 900), node, /*detailed=*/false);
  EXPECT_EQ(r.reason, "no GPU with 4096 MiB and 90 percent free");
}

// Every slot of the GPU is taken while its share would fit: the reason says
// slots, not "no GPU with the share free" beside a GPU that has it.
TEST(RejectionTest, FullSlotsAreNamedAsSuch) {
  core::NodeState node = Node(1, "A100", 81920);
  node.info.gpus[0].max_sharers = 4;
  node.gpus[0] = {16384, 800, 4};  // 4 containers: 64 GiB and 20 percent left
  Rejection r = Explain(Pod(1, 2048, 100), node);
  EXPECT_EQ(r.reason,
            "node n1: no free sharing slot on a GPU with 2048 MiB and 10 percent free (each GPU takes at most as many "
            "containers as tessera-node's slots per GPU); GPU 0 (A100) has 65536 MiB and 20 percent free but all 4 "
            "slots taken");
  EXPECT_FALSE(r.unresolvable);  // a container leaving frees a slot
  r = Explain(Pod(1, 2048, 100), node, /*detailed=*/false);
  EXPECT_EQ(r.reason,
            "no free sharing slot on a GPU with 2048 MiB and 10 percent free (each GPU takes at most as many "
            "containers as tessera-node's slots per GPU)");
  // One slot free again: it fits.
  node.gpus[0].sharers = 3;
  EXPECT_EQ(core::FitsNode(Pod(1, 2048, 100), node), core::FitFailure::kNone);
}

// kube-scheduler uses each reason as a format string: none may hold a '%'.
TEST(RejectionTest, NoReasonHoldsAPercentSign) {
  core::NodeState node = Node(2, "A100", 40960);
  node.gpus[0] = {30000, 200, 1};
  node.gpus[1] = {1000, 900, 1};
  for (const core::PodRequest& pod : {Pod(1, 16384, 300), Pod(1, 4096, 855), Pod(1, 40000, 0), Pod(4, 0, 1000)}) {
    for (bool detailed : {true, false}) {
      const Rejection r = Explain(pod, node, detailed);
      EXPECT_EQ(r.reason.find('%'), std::string::npos) << r.reason;
    }
  }
  EXPECT_EQ(DescribeShare({"c", 1, 8192, 255, {}}).find('%'), std::string::npos);
}

TEST(RejectionTest, MpsPodOnANodeWithoutMps) {
  core::NodeState node = Node(2, "A100", 40960);
  core::PodRequest pod = Pod(1, 4096, 300);
  pod.isolation = core::Isolation::kMps;
  Rejection r = Explain(pod, node);
  EXPECT_EQ(r.reason,
            "node n1: none of its GPUs runs MPS, which tessera.io/isolation: mps needs (tessera-node --mps on a node "
            "with the MPS control daemon)");
  EXPECT_TRUE(r.unresolvable);  // evicting pods would not give it MPS
  // With MPS on a full GPU, the usual share explanation names that GPU.
  node.info.gpus[1].mps = true;
  node.gpus[1] = {40000, 900, 1};
  r = Explain(pod, node);
  EXPECT_EQ(r.reason.rfind("node n1: no GPU with 4096 MiB and 30 percent free; largest free share is 960 MiB and 10 percent on GPU 1", 0),
            0u)
      << r.reason;
}

TEST(RejectionTest, WholeGpusAndModels) {
  core::NodeState node = Node(4, "H100", 81559);
  node.gpus[1] = {0, 100, 1};
  Rejection r = Explain(Pod(4, 0, 1000), node);
  EXPECT_EQ(r.reason, "node n1: needs 4 whole GPUs, 3 of 4 fully free");
  EXPECT_FALSE(r.unresolvable);
  r = Explain(Pod(8, 0, 1000), node);
  EXPECT_TRUE(r.unresolvable);
  core::PodRequest picky = Pod(1, 1024, 100);
  picky.containers[0].models.allowed = {"A100"};
  r = Explain(picky, node);
  EXPECT_EQ(r.reason, "node n1: GPU model H100 not allowed (wants A100)");
  EXPECT_TRUE(r.unresolvable);
  node.info.gpus[0].healthy = node.info.gpus[1].healthy = node.info.gpus[2].healthy = node.info.gpus[3].healthy = false;
  r = Explain(Pod(1, 1024, 100), node);
  EXPECT_EQ(r.reason, "node n1: its allowed GPUs are unhealthy");
  r = Explain(Pod(1, 1024, 100), Node(0, "", 0));
  EXPECT_EQ(r.reason, "node n1: its tessera.io/gpu-inventory lists no GPUs");
}

TEST(RejectionTest, ClusterWideProblems) {
  std::map<std::string, int64_t, std::less<>> models = {{"A100", 40960}, {"T4", 15360}};
  core::PodRequest pod = Pod(1, 1024, 100);
  EXPECT_EQ(ClusterWideProblem(pod, models), "");
  EXPECT_EQ(ClusterWideProblem(pod, {}), "");
  pod.containers[0].models.allowed = {"V100", "H100"};
  EXPECT_EQ(ClusterWideProblem(pod, models),
            "GPU model V100|H100 (tessera.io/gpu-model) is not on any node in the cluster; its GPU models are A100, T4");
  pod.containers[0].models = {{}, {"A100", "T4"}};
  EXPECT_NE(ClusterWideProblem(pod, models).find("every GPU model in the cluster is avoided"), std::string::npos);
  pod.containers[0].models = {{"T4"}, {}};
  pod.containers[0].mem_mib_per_gpu = 20000;
  EXPECT_EQ(ClusterWideProblem(pod, models),
            "container \"main\": asks for 20000 MiB per GPU, more than any allowed GPU in the cluster has (largest: "
            "15360 MiB)");
}

TEST(RejectionTest, Descriptions) {
  EXPECT_EQ(DescribeShare({"c", 1, 8192, 300, {}}), "8192 MiB and 30 percent");
  EXPECT_EQ(DescribeShare({"c", 1, 0, 255, {}}), "25.5 percent");
  EXPECT_EQ(DescribeShare({"c", 2, 0, 1000, {}}), "a whole GPU");
  EXPECT_EQ(DescribeShare({"c", 1, 512, 0, {}}), "512 MiB");
  core::Assignment one{"n1", {{"main", {{0, "", 8192, 300}}}}};
  EXPECT_EQ(DescribeAssignment(one), "[0:8192MiB/30%]");
  core::Assignment many{"n1", {{"trainer", {{0, "", 0, 1000}, {1, "", 0, 1000}}}, {"sidecar", {{2, "", 4096, 200}}},
                               {"log", {}}}};
  EXPECT_EQ(DescribeAssignment(many), "[trainer 0:whole 1:whole; sidecar 2:4096MiB/20%; log -]");
}

}  // namespace
}  // namespace tessera::scheduler
