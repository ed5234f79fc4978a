#include "core/deployed_policy.h"

#include <gtest/gtest.h>

#include "core/placer.h"

namespace tessera::core {
namespace {

NodeInfo Node(const std::string& name) {
  NodeInfo n{name, 64000, 262144, {}};
  for (int i = 0; i < 2; ++i) n.gpus.push_back({i, "", "T4", 0});
  return n;
}

// "busy" (first in node order) holds a GPU pod with a quarter of its CPU;
// "idle" is empty.
Ledger TwoNodes() {
  Ledger l;
  EXPECT_TRUE(l.AddNode(Node("busy")).ok());
  EXPECT_TRUE(l.AddNode(Node("idle")).ok());
  EXPECT_TRUE(l.Assume(PodRequest{"gpu", 16000, 1024, {{"main", 1, 0, 500, {}}}},
                       {"busy", {{"main", {{0, "", 0, 500}}}}})
                  .ok());
  return l;
}

TEST(DeployedPolicy, PodsWithoutGpusArePlacedAsKubeSchedulerDoesAndGpuPodsByThePolicy) {
  auto made = MakePolicy("packing+kube", {});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ((*made)->name(), "packing+kube");
  Placer placer(**made, 1);
  Ledger l = TwoNodes();
  // kube-scheduler's LeastAllocated sends a CPU-only pod to the idle node,
  auto cpu = placer.Place(PodRequest{"web", 4000, 4096, {}}, l);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->node, "idle");
  // where packing alone would have put it beside the GPU pod,
  auto packing = MakePolicy("packing", {});
  ASSERT_TRUE(packing.ok());
  Placer alone(**packing, 1);
  EXPECT_EQ(alone.Place(PodRequest{"web", 4000, 4096, {}}, l)->node, "busy");
  // and a GPU pod still goes where packing puts it.
  auto gpu = placer.Place(PodRequest{"train", 1000, 1024, {{"main", 1, 0, 300, {}}}}, l);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ(gpu->node, "busy");
}

TEST(DeployedPolicy, TheInnerPolicyLearnsFromEveryPod) {
  auto made = MakePolicy("tessera+kube", {});
  ASSERT_TRUE(made.ok());
  Ledger l = TwoNodes();
  Placer placer(**made, 1);
  EXPECT_EQ((*made)->epoch(), 0u);
  // Only pods without GPUs, placed by kube-scheduler's scoring: tessera
  // still counts them, and derives its first workload after 32 arrivals.
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(placer.Place(PodRequest{"web" + std::to_string(i), 100, 128, {}}, l).ok());
  EXPECT_GT((*made)->epoch(), 0u);
}

TEST(DeployedPolicy, UnknownInnerPoliciesAreRefused) {
  EXPECT_EQ(MakePolicy("nope+kube", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePolicy("+kube", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(MakePolicy("nope", {}).status().message().find("NAME+kube"), std::string::npos);
}

}  // namespace
}  // namespace tessera::core
