#include "sim/replay.h"

#include <gtest/gtest.h>

#include <map>

#include "core/policy.h"

namespace tessera::sim {
namespace {

core::NodeInfo Node(const std::string& name, int gpus) {
  core::NodeInfo n{name, 32000, 262144, {}};
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({i, "", "T4", 0});
  return n;
}

core::PodRequest Pod(const std::string& key, int64_t core) {
  return core::PodRequest{key, 1000, 1024, {{"main", 1, 0, core, {}}}};
}

TEST(Replay, EndStateSaysWhereTheFreeGpuMilliSits) {
  // bestfit: 850 takes GPU 0, 300 does not fit beside it and takes GPU 1,
  // GPU 2 stays empty.
  ReplayStats st;
  auto run = Replay({Node("n", 3)}, {Pod("a", 850), Pod("b", 300)}, {"bestfit", 42, {}}, &st);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(st.placed, 2);
  EXPECT_EQ(run->end.large_share_milli, 150);
  EXPECT_EQ(run->end.small_sliver_milli, 0);
  EXPECT_EQ(run->end.other_sliver_milli, 700);
  EXPECT_EQ(run->end.whole_idle_milli, 1000);
  EXPECT_EQ(run->end.shares_placed, (std::map<int64_t, int64_t>{{300, 1}, {850, 1}}));
  EXPECT_EQ(run->end.cpu_milli, 32000);
  EXPECT_EQ(run->end.cpu_free_milli, 32000 - 2 * 1000);  // a core per pod
}

TEST(Replay, CountsSharesPlacedButNotWholeGpusNorPodsThatFailed) {
  // The 500 share takes GPU 0 and two whole GPUs the others, so the 600
  // share finds no room and is not counted; whole GPUs are not shares.
  ReplayStats st;
  auto run = Replay({Node("n", 3)}, {Pod("a", 500), Pod("b", 1000), Pod("c", 1000), Pod("d", 600)},
                    {"bestfit", 42, {}}, &st);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(st.placed, 3);
  EXPECT_EQ(run->end.shares_placed, (std::map<int64_t, int64_t>{{500, 1}}));
}

TEST(Replay, RunsTheDraVariantsWithTheAllocatorsFirstFit) {
  // dra-kube: the 100 share goes beside the 850 on GPU 0, the first with
  // room, where bestfit would too; a 200 then takes GPU 1 under first fit.
  ReplayStats st;
  auto run = Replay({Node("n", 3)}, {Pod("a", 850), Pod("b", 100), Pod("c", 200)}, {"dra-kube", 42, {}}, &st);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(st.placed, 3);
  EXPECT_EQ(run->end.small_sliver_milli, 50);
  EXPECT_EQ(run->end.other_sliver_milli, 800);
  EXPECT_EQ(run->end.whole_idle_milli, 1000);
}

TEST(ReplayPolicyNames, CorePoliciesThenDraVariants) {
  const auto names = ReplayPolicyNames();
  EXPECT_EQ(names.front(), core::PolicyNames().front());
  EXPECT_EQ(names.back(), "dra-tessera-sorted");
  for (const auto& n : names) EXPECT_TRUE(MakeReplayPolicy(n, {}).ok()) << n;
  auto bad = MakeReplayPolicy("dra-nope", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fgd"), std::string::npos);
  EXPECT_NE(bad.status().message().find("dra-kube"), std::string::npos);
}

}  // namespace
}  // namespace tessera::sim
