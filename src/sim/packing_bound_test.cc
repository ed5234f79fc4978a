#include "sim/packing_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <vector>

namespace tessera::sim {
namespace {

PackingBound Bound(const std::map<int64_t, int64_t>& shares) {
  Result<PackingBound> b = SharePackingBound(shares);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : PackingBound{};
}

TEST(SharePackingBound, NothingToPackLeavesNothing) {
  const PackingBound b = Bound({});
  EXPECT_EQ(b.gpus, 0);
  EXPECT_EQ(b.free_milli, 0);
  EXPECT_EQ(b.fit_gpus, 0);
}

TEST(SharePackingBound, WhatTheSizesForceStaysFree) {
  // Two 470s share a GPU and leave 60; an 810 leaves 190 beside it.
  PackingBound b = Bound({{470, 2}, {810, 1}});
  EXPECT_EQ(b.gpus, 2);
  EXPECT_EQ(b.free_milli, 60 + 190);
  // Three 320s leave 40 on each of three GPUs.
  b = Bound({{320, 9}});
  EXPECT_EQ(b.gpus, 3);
  EXPECT_EQ(b.free_milli, 120);
}

TEST(SharePackingBound, SharesThatCompleteEachOtherLeaveNothing) {
  EXPECT_EQ(Bound({{550, 2}, {220, 2}, {230, 2}}).free_milli, 0);
  EXPECT_EQ(Bound({{600, 3}, {400, 3}}).free_milli, 0);
  // A 160 fills most of what an 810 leaves.
  const PackingBound b = Bound({{810, 10}, {160, 10}});
  EXPECT_EQ(b.gpus, 10);
  EXPECT_EQ(b.free_milli, 300);
}

TEST(SharePackingBound, AFractionalOptimumIsRoundedUp) {
  // Three 400s: the LP uses one and a half GPUs of two 400s each; no packing
  // uses fewer than two GPUs.
  const PackingBound b = Bound({{400, 3}});
  EXPECT_NEAR(b.lp_gpus, 1.5, 1e-9);
  EXPECT_EQ(b.gpus, 2);
  EXPECT_EQ(b.free_milli, 800);
  EXPECT_EQ(b.fit_gpus, 2);
}

TEST(SharePackingBound, BestFitPutsEachShareWhereItFitsTightest) {
  // Largest first: the 600 opens a GPU, the 500s share a second, and the
  // 400 fits only beside the 600: two GPUs, none free.
  const PackingBound b = Bound({{600, 1}, {500, 2}, {400, 1}});
  EXPECT_EQ(b.fit_gpus, 2);
  EXPECT_EQ(b.fit_free_milli, 0);
  EXPECT_EQ(b.gpus, 2);
}

TEST(SharePackingBound, RefusesWhatIsNotAShare) {
  for (const auto& bad : std::vector<std::map<int64_t, int64_t>>{{{0, 1}}, {{1000, 1}}, {{-5, 1}}, {{500, 0}}}) {
    const Result<PackingBound> b = SharePackingBound(bad);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << b.status().ToString();
  }
}

// The fewest GPUs that hold `items`, by trying every placement (small sets only).
int64_t FewestGpus(std::vector<int64_t> items) {
  std::sort(items.rbegin(), items.rend());
  std::vector<int64_t> free;
  int64_t best = static_cast<int64_t>(items.size());
  std::function<void(size_t)> place = [&](size_t i) {
    if (static_cast<int64_t>(free.size()) >= best) return;
    if (i == items.size()) {
      best = static_cast<int64_t>(free.size());
      return;
    }
    for (size_t g = 0; g < free.size(); ++g) {
      if (free[g] < items[i]) continue;
      free[g] -= items[i];
      place(i + 1);
      free[g] += items[i];
    }
    free.push_back(1000 - items[i]);
    place(i + 1);
    free.pop_back();
  };
  place(0);
  return best;
}

TEST(SharePackingBound, NeverAboveTheBestPackingNorBelowTheTotal) {
  // Random sets of up to 9 shares from the openb traces' sizes: the bound
  // is at most what the best packing needs, and at least the total's GPUs.
  const int64_t sizes[] = {50, 110, 160, 220, 230, 320, 370, 460, 470, 550, 590, 650, 810};
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::map<int64_t, int64_t> shares;
    std::vector<int64_t> items;
    const int n = 1 + static_cast<int>(rng() % 9);
    for (int k = 0; k < n; ++k) {
      const int64_t s = sizes[rng() % std::size(sizes)];
      ++shares[s];
      items.push_back(s);
    }
    int64_t total = 0;
    for (int64_t s : items) total += s;
    const PackingBound b = Bound(shares);
    const int64_t fewest = FewestGpus(items);
    EXPECT_LE(b.gpus, fewest) << "round " << round;
    EXPECT_GE(b.fit_gpus, fewest) << "round " << round;
    EXPECT_EQ(b.fit_free_milli, b.fit_gpus * 1000 - total);
    EXPECT_GE(b.gpus, (total + 999) / 1000) << "round " << round;
    EXPECT_EQ(b.free_milli, b.gpus * 1000 - total);
  }
}

}  // namespace
}  // namespace tessera::sim
