// ClusterState's DRA part: slices and claims booked beside pods.
#include <gtest/gtest.h>

#include "scheduler/cluster_state.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BoundPodJson;
using testing::ClaimJson;
using testing::GpuUuid;
using testing::NodeJson;
using testing::PodJson;
using testing::SliceJson;

core::GpuUsage Use(const ClusterState& state, const std::string& node, int gpu) {
  return state.Read([&](const ClusterView& v) {
    const core::NodeState* n = v.ledger().FindNode(node);
    return n == nullptr ? core::GpuUsage{} : n->gpus[static_cast<size_t>(gpu)];
  });
}

class ClusterStateDraTest : public ::testing::Test {
 protected:
  ClusterState state_{testing::QuietStateOptions()};
};

TEST_F(ClusterStateDraTest, AllocatedClaimIsBookedOnTheGpuItsDeviceIs) {
  state_.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  json slice = SliceJson("n1", {0, 1});
  // Device names are not indexes: "gpu-0" is listed as GPU 1 here.
  slice["spec"]["devices"][0]["attributes"]["index"]["int"] = 1;
  slice["spec"]["devices"][1]["attributes"]["index"]["int"] = 0;
  state_.UpsertSlice(slice);
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}, "n1", {{0, 8192, 30}}));
  EXPECT_EQ(Use(state_, "n1", 1), (core::GpuUsage{8192, 300, 0}));  // no sharer slot taken
  EXPECT_EQ(Use(state_, "n1", 0), core::GpuUsage{});
  EXPECT_EQ(state_.Summary().claims_held, 1);
  state_.Read([](const ClusterView& v) {
    EXPECT_EQ(*v.DraDeviceOrder("n1"), (std::vector<int>{1, 0}));
    EXPECT_EQ(v.ledger().PodsOn("n1"), std::vector<std::string>{"claim:ns/c"});
    ASSERT_NE(v.Claim("ns/c"), nullptr);
    EXPECT_TRUE(v.Claim("ns/c")->allocated);
    EXPECT_EQ(v.HeldPodsOn("n1").size(), 0u);  // claims are no preemption victims
  });
  state_.DeleteClaim(ClaimJson("ns", "c", {}));
  EXPECT_EQ(Use(state_, "n1", 1), core::GpuUsage{});
  EXPECT_EQ(state_.Summary().claims_held, 0);
}

TEST_F(ClusterStateDraTest, ExclusiveAndDefaultSharesHoldTheWholeCard) {
  state_.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  state_.UpsertSlice(SliceJson("n1", {0, 1}));
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 2}}, "n1", {{0, 0, 0, /*consumed=*/false}, {1, 0, 20}}));
  EXPECT_EQ(Use(state_, "n1", 0), (core::GpuUsage{40960, 1000, 0}));
  EXPECT_EQ(Use(state_, "n1", 1), (core::GpuUsage{40960, 200, 0}));
}

TEST_F(ClusterStateDraTest, ClaimWaitsForItsSliceAndNode) {
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}, "n1", {{0, 8192, 30}}));
  EXPECT_EQ(state_.Summary().claims_waiting, 1);
  ASSERT_EQ(state_.Problems().size(), 1u);
  EXPECT_NE(state_.Problems()[0].find("claim ns/c: no ResourceSlice of pool n1"), std::string::npos)
      << state_.Problems()[0];
  state_.UpsertSlice(SliceJson("n1", {0}));
  EXPECT_NE(state_.Problems()[0].find("node n1 is not a GPU node"), std::string::npos) << state_.Problems()[0];
  state_.UpsertNode(NodeJson("n1", 1, "A100", 40960));
  EXPECT_TRUE(state_.Problems().empty());
  EXPECT_EQ(Use(state_, "n1", 0).mem_used_mib, 8192);
  // A kubelet deletes its node's slices as it starts: the claim still holds its GPU.
  state_.DeleteSlice(SliceJson("n1", {0}));
  EXPECT_EQ(Use(state_, "n1", 0).mem_used_mib, 8192);
  state_.Read([](const ClusterView& v) { EXPECT_EQ(v.DraDeviceOrder("n1"), nullptr); });
  // The node deleted and back: held again.
  state_.DeleteNode("n1");
  EXPECT_EQ(state_.Summary().claims_waiting, 1);
  state_.UpsertNode(NodeJson("n1", 1, "A100", 40960));
  EXPECT_EQ(Use(state_, "n1", 0).mem_used_mib, 8192);
  EXPECT_EQ(state_.Summary().claims_waiting, 0);
}

TEST_F(ClusterStateDraTest, ReallocatedClaimMovesAndUnallocatedHoldsNothing) {
  state_.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  state_.UpsertSlice(SliceJson("n1", {0, 1}));
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}));
  EXPECT_EQ(state_.Summary().claims_held, 0);
  EXPECT_EQ(state_.Summary().claims_waiting, 0);
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}, "n1", {{0, 8192, 30}}));
  EXPECT_EQ(Use(state_, "n1", 0).mem_used_mib, 8192);
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}, "n1", {{1, 8192, 30}}));
  EXPECT_EQ(Use(state_, "n1", 0).mem_used_mib, 0);
  EXPECT_EQ(Use(state_, "n1", 1).mem_used_mib, 8192);
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}));  // deallocated
  EXPECT_EQ(Use(state_, "n1", 1).mem_used_mib, 0);
}

TEST_F(ClusterStateDraTest, ClaimThatDoesNotFitWaitsForTheRoom) {
  state_.UpsertNode(NodeJson("n1", 1, "A100", 40960));
  state_.UpsertSlice(SliceJson("n1", {0}));
  const core::Assignment held{"n1", {{"main", {{0, GpuUuid("n1", 0), 36864, 300}}}}};
  state_.UpsertPod(BoundPodJson(PodJson("ns", "dp", {{"main", 1, 36864, 30}}), held));
  state_.UpsertClaim(ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}, "n1", {{0, 8192, 30}}));
  ASSERT_EQ(state_.Summary().claims_waiting, 1);
  EXPECT_NE(state_.Problems()[0].find("do not fit"), std::string::npos) << state_.Problems()[0];
  state_.DeletePod(BoundPodJson(PodJson("ns", "dp", {{"main", 1, 36864, 30}}), held));
  EXPECT_EQ(state_.Summary().claims_waiting, 0);
  EXPECT_EQ(Use(state_, "n1", 0).mem_used_mib, 8192);
}

TEST_F(ClusterStateDraTest, DeviceOrderFollowsPoolsAndSlicesByName) {
  state_.UpsertNode(NodeJson("n1", 4, "A100", 40960));
  json b = SliceJson("n1", {0, 1});
  b["metadata"]["name"] = "b";
  json a = SliceJson("n1", {3, 2});
  a["metadata"]["name"] = "a";
  state_.UpsertSlice(b);
  state_.UpsertSlice(a);
  state_.Read([](const ClusterView& v) { EXPECT_EQ(*v.DraDeviceOrder("n1"), (std::vector<int>{3, 2, 0, 1})); });
  json other = SliceJson("n1", {0});
  other["spec"]["driver"] = "gpu.nvidia.com";
  other["metadata"]["name"] = "0";
  state_.UpsertSlice(other);  // another driver's: ignored
  state_.Read([](const ClusterView& v) { EXPECT_EQ(v.DraDeviceOrder("n1")->size(), 4u); });
}

}  // namespace
}  // namespace tessera::scheduler
