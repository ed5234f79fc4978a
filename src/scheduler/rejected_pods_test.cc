#include "scheduler/rejected_pods.h"

#include <gtest/gtest.h>

namespace tessera::scheduler {
namespace {

using std::chrono::seconds;

TEST(RejectedPodsTest, TakesOnlyRecentRejectionsOnce) {
  RejectedPods rejected;
  const auto t0 = RejectedPods::Clock::time_point{} + seconds(100);
  rejected.Note("ns/old", "u1", t0);
  rejected.Note("ns/new", "u2", t0 + seconds(4));
  auto taken = rejected.TakeSince(t0 + seconds(2));
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].key, "ns/new");
  EXPECT_EQ(taken[0].uid, "u2");
  EXPECT_TRUE(rejected.TakeSince(t0 + seconds(2)).empty()) << "a pod is woken once per rejection";
  EXPECT_EQ(rejected.size(), 1u);
}

TEST(RejectedPodsTest, TakesAtMostMaxOldestFirst) {
  RejectedPods rejected;
  const auto t0 = RejectedPods::Clock::time_point{} + seconds(100);
  for (int i = 0; i < 5; ++i) rejected.Note("ns/p" + std::to_string(i), "u", t0 + seconds(i));
  auto first = rejected.TakeSince(t0, 2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].key, "ns/p0");
  EXPECT_EQ(first[1].key, "ns/p1");
  EXPECT_EQ(rejected.TakeSince(t0).size(), 3u);
}

TEST(RejectedPodsTest, ANewerNoteReplacesTheOlder) {
  RejectedPods rejected;
  const auto t0 = RejectedPods::Clock::time_point{} + seconds(100);
  rejected.Note("ns/p", "u1", t0);
  rejected.Note("ns/p", "u1", t0 + seconds(3));
  EXPECT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected.TakeSince(t0 + seconds(1)).size(), 1u);
}

TEST(RejectedPodsTest, APodThatFitsLaterIsNotWoken) {
  RejectedPods rejected;
  const auto t0 = RejectedPods::Clock::time_point{} + seconds(100);
  rejected.Note("ns/p", "u1", t0);
  rejected.Forget("ns/p");
  EXPECT_TRUE(rejected.TakeSince(t0).empty());
}

TEST(RejectedPodsTest, ForgetsOldAndBoundsItsSize) {
  RejectedPods rejected(/*capacity=*/3, /*keep=*/seconds(10));
  const auto t0 = RejectedPods::Clock::time_point{} + seconds(100);
  rejected.Note("ns/a", "a", t0);
  rejected.Note("ns/b", "b", t0 + seconds(11));
  EXPECT_EQ(rejected.size(), 1u) << "ns/a was older than keep";
  for (int i = 0; i < 5; ++i) rejected.Note("ns/p" + std::to_string(i), "u", t0 + seconds(12));
  EXPECT_EQ(rejected.size(), 3u);
  auto taken = rejected.TakeSince(t0);
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken.back().key, "ns/p4");
}

}  // namespace
}  // namespace tessera::scheduler
