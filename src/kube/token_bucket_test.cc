#include "kube/token_bucket.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tessera::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  TokenBucket::Clock fn() {
    return [this] { return now; };
  }
};

TEST(TokenBucketTest, BurstThenPacedAtQps) {
  FakeClock clock;
  TokenBucket bucket(10, 3, clock.fn());  // 10 qps: one token per 100 ms
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.Reserve(), nanoseconds(0)) << i;
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(bucket.Reserve()), milliseconds(100));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(bucket.Reserve()), milliseconds(200));  // queued behind
}

TEST(TokenBucketTest, RefillsWithTimeUpToBurst) {
  FakeClock clock;
  TokenBucket bucket(10, 2, clock.fn());
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  clock.now += milliseconds(100);
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));  // one refilled
  EXPECT_GT(bucket.Reserve(), nanoseconds(0));
  clock.now += std::chrono::seconds(60);  // long idle: refills to burst, not beyond
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(bucket.Reserve()), milliseconds(100));
}

TEST(TokenBucketTest, DebtIsRepaidBeforeNewTokens) {
  FakeClock clock;
  TokenBucket bucket(1, 1, clock.fn());
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(bucket.Reserve()), milliseconds(1000));
  clock.now += milliseconds(1500);  // the reserved token came due at 1 s; half of the next is there
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(bucket.Reserve()), milliseconds(500));
}

TEST(TokenBucketTest, ZeroQpsIsUnlimitedAndBurstAtLeastOne) {
  FakeClock clock;
  TokenBucket unlimited(0, 0, clock.fn());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(unlimited.Reserve(), nanoseconds(0));
  TokenBucket one(5, 0, clock.fn());
  EXPECT_EQ(one.Reserve(), nanoseconds(0));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(one.Reserve()), milliseconds(200));
}

TEST(TokenBucketTest, ConcurrentReservationsAreAllCounted) {
  FakeClock clock;  // frozen: only the burst is free
  TokenBucket bucket(100, 10, clock.fn());
  std::vector<std::thread> threads;
  std::atomic<int> free_tokens{0};
  std::atomic<int64_t> max_wait_ms{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        const auto w = std::chrono::duration_cast<milliseconds>(bucket.Reserve()).count();
        if (w == 0) ++free_tokens;
        int64_t m = max_wait_ms.load();
        while (w > m && !max_wait_ms.compare_exchange_weak(m, w)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(free_tokens.load(), 10);
  EXPECT_EQ(max_wait_ms.load(), 900);  // the 100th request waits 90 tokens at 10 ms each
}

}  // namespace
}  // namespace tessera::kube
