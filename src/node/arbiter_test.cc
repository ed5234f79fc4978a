#include "node/arbiter.h"

#include <gtest/gtest.h>

#include <numeric>

namespace tessera::node {
namespace {

using core::Priority;

GrantEntry E(uint32_t share_ppm, bool active, Priority p = Priority::kNormal,
             CorePolicy policy = CorePolicy::kShare) {
  GrantEntry e;
  e.share_ppm = share_ppm;
  e.active = active;
  e.priority = p;
  e.policy = policy;
  return e;
}

uint64_t Sum(const std::vector<Grant>& g) {
  uint64_t s = 0;
  for (const Grant& x : g) s += x.ppm;
  return s;
}

TEST(ArbiterTest, BothActiveGetTheirShares) {
  auto g = ComputeGrants({E(300'000, true), E(700'000, true)}, {});
  EXPECT_EQ(g[0].ppm, 300'000u);
  EXPECT_EQ(g[1].ppm, 700'000u);
  EXPECT_FALSE(g[0].held || g[1].held);
}

TEST(ArbiterTest, UnassignedCapacityGoesToTheActiveInProportion) {
  auto g = ComputeGrants({E(200'000, true), E(400'000, true)}, {});
  // 400'000 left over, split 1:2.
  EXPECT_EQ(g[0].ppm, 200'000u + 133'333u);
  EXPECT_EQ(g[1].ppm, 400'000u + 266'666u);
  EXPECT_LE(Sum(g), kGrantPpm);
}

TEST(ArbiterTest, AnIdleContainersShareIsRedistributed) {
  auto g = ComputeGrants({E(300'000, true), E(700'000, false)}, {});
  EXPECT_EQ(g[0].ppm, kGrantPpm);
  EXPECT_EQ(g[1].ppm, 0u);
  g = ComputeGrants({E(100'000, true), E(300'000, true), E(600'000, false)}, {});
  EXPECT_EQ(g[0].ppm, 250'000u);
  EXPECT_EQ(g[1].ppm, 750'000u);
  EXPECT_EQ(g[2].ppm, 0u);
}

TEST(ArbiterTest, NobodyActiveEveryoneHoldsTheirShare) {
  auto g = ComputeGrants({E(300'000, false), E(700'000, false, Priority::kLow)}, {});
  EXPECT_EQ(g[0].ppm, 300'000u);
  EXPECT_EQ(g[1].ppm, 700'000u);
  EXPECT_FALSE(g[1].held);
}

TEST(ArbiterTest, AHardContainerNeverGetsMoreThanItsShare) {
  auto g = ComputeGrants({E(300'000, true, Priority::kNormal, CorePolicy::kHard), E(700'000, false)}, {});
  EXPECT_EQ(g[0].ppm, 300'000u);
  // A hard and a share container: the spare goes to the share one only.
  g = ComputeGrants({E(300'000, true, Priority::kNormal, CorePolicy::kHard), E(200'000, true)}, {});
  EXPECT_EQ(g[0].ppm, 300'000u);
  EXPECT_EQ(g[1].ppm, 700'000u);
}

GrantEntry Burst(uint32_t share_ppm, uint32_t limit_ppm, bool active) {
  GrantEntry e = E(share_ppm, active);
  e.limit_ppm = limit_ppm;
  return e;
}

TEST(ArbiterTest, ABurstContainerAloneGetsItsCeiling) {
  // gpu-core 20 %, tessera.io/gpu-core-limit 60 %: idle neighbour of 80 %.
  auto g = ComputeGrants({Burst(200'000, 600'000, true), E(800'000, false)}, {});
  EXPECT_EQ(g[0].ppm, 600'000u);
  EXPECT_EQ(g[1].ppm, 0u);
}

TEST(ArbiterTest, ABurstContainerFallsBackToItsRequestWhenTheOwnerIsActive) {
  auto g = ComputeGrants({Burst(200'000, 600'000, true), E(800'000, true)}, {});
  EXPECT_EQ(g[0].ppm, 200'000u);
  EXPECT_EQ(g[1].ppm, 800'000u);
}

TEST(ArbiterTest, WhatACappedContainerCannotTakeGoesToTheOthers) {
  // 500'000 left over: split 1:1 would give each 250'000, but the burst
  // container stops at 300'000 (50'000 more); the rest goes to the other.
  auto g = ComputeGrants({Burst(250'000, 300'000, true), E(250'000, true)}, {});
  EXPECT_EQ(g[0].ppm, 300'000u);
  EXPECT_GE(g[1].ppm, 699'999u);
  EXPECT_LE(Sum(g), kGrantPpm);
  // Two capped containers leave the rest of the GPU unassigned.
  auto both = ComputeGrants({Burst(100'000, 300'000, true), Burst(100'000, 200'000, true)}, {});
  EXPECT_EQ(both[0].ppm, 300'000u);
  EXPECT_EQ(both[1].ppm, 200'000u);
}

TEST(ArbiterTest, ACeilingBelowTheShareIsTheShare) {
  auto g = ComputeGrants({Burst(400'000, 100'000, true)}, {});
  EXPECT_EQ(g[0].ppm, 400'000u);
}

TEST(ArbiterTest, AHeldBurstContainerKeepsOnlyItsFloor) {
  GrantEntry high = E(500'000, true, Priority::kHigh);
  GrantEntry low = Burst(200'000, 600'000, true);
  low.priority = Priority::kLow;
  GrantOptions o;
  o.min_share_percent = 10;
  auto g = ComputeGrants({high, low}, o);
  EXPECT_TRUE(g[1].held);
  EXPECT_EQ(g[1].ppm, 20'000u);
}

TEST(ArbiterTest, AnActiveHighPriorityContainerHoldsTheLowerOnes) {
  auto g = ComputeGrants({E(300'000, true, Priority::kHigh), E(400'000, true, Priority::kNormal),
                          E(300'000, true, Priority::kLow)},
                         {});
  EXPECT_EQ(g[0].ppm, kGrantPpm);
  EXPECT_FALSE(g[0].held);
  EXPECT_EQ(g[1].ppm, 0u);
  EXPECT_TRUE(g[1].held);
  EXPECT_EQ(g[2].ppm, 0u);
  EXPECT_TRUE(g[2].held);
  // Normal over low alike, when no high is active.
  g = ComputeGrants({E(300'000, false, Priority::kHigh), E(400'000, true, Priority::kNormal),
                     E(300'000, true, Priority::kLow)},
                    {});
  EXPECT_EQ(g[0].ppm, 0u);
  EXPECT_FALSE(g[0].held);
  EXPECT_EQ(g[1].ppm, kGrantPpm);
  EXPECT_TRUE(g[2].held);
}

TEST(ArbiterTest, ContainersBelowTheHighestPresentPriorityArePreemptible) {
  auto g = ComputeGrants({E(300'000, false, Priority::kHigh), E(400'000, true, Priority::kNormal),
                          E(300'000, true, Priority::kLow)},
                         {});
  EXPECT_FALSE(g[0].preemptible);
  EXPECT_TRUE(g[1].preemptible);  // the high one is idle, but present
  EXPECT_FALSE(g[1].held);
  EXPECT_TRUE(g[2].preemptible);
  g = ComputeGrants({E(300'000, true), E(700'000, true)}, {});
  EXPECT_FALSE(g[0].preemptible || g[1].preemptible);
}

TEST(ArbiterTest, TheHoldIsReleasedWhenTheHighContainerGoesIdle) {
  std::vector<GrantEntry> e = {E(500'000, true, Priority::kHigh), E(500'000, true, Priority::kLow)};
  EXPECT_TRUE(ComputeGrants(e, {})[1].held);
  e[0].active = false;
  auto g = ComputeGrants(e, {});
  EXPECT_FALSE(g[1].held);
  EXPECT_EQ(g[1].ppm, kGrantPpm);
  EXPECT_EQ(g[0].ppm, 0u);
}

TEST(ArbiterTest, TheMinimumShareBoundsStarvation) {
  GrantOptions o;
  o.min_share_percent = 10;
  auto g = ComputeGrants({E(500'000, true, Priority::kHigh), E(500'000, true, Priority::kLow)}, o);
  EXPECT_TRUE(g[1].held);
  EXPECT_EQ(g[1].ppm, 50'000u);  // 10 % of its 50 %
  EXPECT_EQ(g[0].ppm, 950'000u);
  // A hard high-priority container leaves the rest unused; the floor stays.
  g = ComputeGrants({E(500'000, true, Priority::kHigh, CorePolicy::kHard), E(500'000, true, Priority::kLow)}, o);
  EXPECT_EQ(g[0].ppm, 500'000u);
  EXPECT_EQ(g[1].ppm, 50'000u);
  o.min_share_percent = 250;  // capped at the whole share
  g = ComputeGrants({E(500'000, true, Priority::kHigh), E(500'000, true, Priority::kLow)}, o);
  EXPECT_EQ(g[1].ppm, 500'000u);
}

TEST(ArbiterTest, OversubscribedSharesAreScaledDown) {
  auto g = ComputeGrants({E(600'000, true), E(600'000, true)}, {});
  EXPECT_EQ(g[0].ppm, 500'000u);
  EXPECT_EQ(g[1].ppm, 500'000u);
}

// Grants never sum above the GPU, whatever the mix.
TEST(ArbiterTest, GrantsNeverExceedTheGpu) {
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 8); };
  for (int round = 0; round < 2000; ++round) {
    std::vector<GrantEntry> e;
    const int n = 1 + static_cast<int>(next() % 8);
    for (int i = 0; i < n; ++i) {
      e.push_back(E(next() % 700'001, next() % 2 == 0, static_cast<Priority>(next() % 3),
                    next() % 3 == 0 ? CorePolicy::kHard : CorePolicy::kShare));
    }
    GrantOptions o;
    o.min_share_percent = next() % 30;
    auto g = ComputeGrants(e, o);
    ASSERT_LE(Sum(g), kGrantPpm);
    for (size_t i = 0; i < e.size(); ++i) {
      if (e[i].policy == CorePolicy::kHard) {
        ASSERT_LE(g[i].ppm, e[i].share_ppm);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::node
