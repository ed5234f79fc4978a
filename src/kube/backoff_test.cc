#include "kube/backoff.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

using std::chrono::milliseconds;

TEST(BackoffDelayTest, DoublesFromBaseUpToCap) {
  const milliseconds base(100), cap(5000);
  const int64_t want[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(BackoffDelay(i, base, cap, 0.2, 0.0).count(), want[i]) << i;
  EXPECT_EQ(BackoffDelay(1000, base, cap, 0.2, 0.0).count(), 5000);  // no overflow
}

TEST(BackoffDelayTest, JitterStretchesUpToFraction) {
  const milliseconds base(100), cap(5000);
  EXPECT_EQ(BackoffDelay(0, base, cap, 0.2, 0.5).count(), 110);
  EXPECT_EQ(BackoffDelay(0, base, cap, 0.2, 0.999).count(), 119);
  EXPECT_EQ(BackoffDelay(10, base, cap, 0.2, 0.5).count(), 5500);  // jitter applies above the cap too
  EXPECT_EQ(BackoffDelay(2, base, cap, 0.0, 0.9).count(), 400);
}

TEST(BackoffTest, SequenceStaysInBandsAndResets) {
  Backoff b(milliseconds(100), milliseconds(1000), 0.2, /*seed=*/7);
  const int64_t nominal[] = {100, 200, 400, 800, 1000, 1000};
  for (int64_t n : nominal) {
    const auto d = b.Next().count();
    EXPECT_GE(d, n);
    EXPECT_LT(d, n + n / 5 + 1);
  }
  EXPECT_EQ(b.attempt(), 6);
  b.Reset();
  EXPECT_EQ(b.attempt(), 0);
  EXPECT_LT(b.Next().count(), 121);
}

}  // namespace
}  // namespace tessera::kube
