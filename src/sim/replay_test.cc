#include "sim/replay.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(run->end.other_sliver_milli, 700);
  EXPECT_EQ(run->end.whole_idle_milli, 1000);
}

}  // namespace
}  // namespace tessera::sim
