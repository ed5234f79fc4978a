#include "cuda/compute_gate.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <thread>
#include <vector>

namespace tessera::cuda {
namespace {

// A zeroed ComputeShare, as in a fresh region.
std::unique_ptr<region::ComputeShare> Share(uint32_t ppm, uint32_t window_us = 100'000,
                                            uint32_t policy = region::kPolicyHard) {
  auto s = std::make_unique<region::ComputeShare>();
  ComputeBucket::Configure(*s, ppm, window_us, policy);
  return s;
}

TEST(ComputeBucketTest, NoShareOrWholeGpuIsUnlimited) {
  EXPECT_FALSE(ComputeBucket(*Share(0)).Limited());
  EXPECT_FALSE(ComputeBucket(*Share(kPpm)).Limited());
  EXPECT_TRUE(ComputeBucket(*Share(250'000)).Limited());
}

TEST(ComputeBucketTest, FirstValueWins) {
  auto s = Share(250'000, 50'000);
  ComputeBucket::Configure(*s, 500'000, 100'000);
  EXPECT_EQ(s->share_ppm.load(), 250'000u);
  EXPECT_EQ(ComputeBucket(*s).WindowUs(), 50'000u);
  EXPECT_EQ(ComputeBucket(*s).RefillUs(), 12'500u);
}

TEST(ComputeBucketTest, RefillsOncePerWindowUpToOneWindow) {
  auto s = Share(250'000);
  ComputeBucket b(*s);
  b.Refill(1'000'000);  // first sight: a full window
  EXPECT_EQ(b.Balance(), 25'000);
  b.Charge(10'000);
  b.Refill(1'099'999);  // same window: nothing
  EXPECT_EQ(b.Balance(), 15'000);
  b.Refill(1'100'000);  // boundary: refilled, capped at one window
  EXPECT_EQ(b.Balance(), 25'000);
  b.Refill(5'000'000);  // idle for seconds: still one window's burst
  EXPECT_EQ(b.Balance(), 25'000);
  EXPECT_EQ(s->used_us.load(), 10'000u);
}

TEST(ComputeBucketTest, DebtCarriesOverAndIsPaidByLaterWindows) {
  auto s = Share(100'000);  // 10 ms per 100 ms window
  ComputeBucket b(*s);
  b.Refill(0);
  b.Refill(100'000);
  EXPECT_EQ(b.Balance(), 10'000);
  b.Charge(500'000);  // one 500 ms kernel (a graph, a cooperative kernel): one unit
  EXPECT_EQ(b.Balance(), -490'000);
  EXPECT_FALSE(b.Admits(0));
  // 49 refills pay the debt; the 50th window admits again.
  EXPECT_EQ(b.NextAdmitUs(150'000, 0), 100'000u + 50 * 100'000u);
  b.Refill(100'000 + 49 * 100'000);
  EXPECT_EQ(b.Balance(), 0);
  EXPECT_FALSE(b.Admits(0));
  b.Refill(100'000 + 50 * 100'000);
  EXPECT_EQ(b.Balance(), 10'000);
  EXPECT_TRUE(b.Admits(0));
}

TEST(ComputeBucketTest, SkippedWindowsPayDebtAllAtOnce) {
  auto s = Share(100'000);
  ComputeBucket b(*s);
  b.Refill(0);
  b.Charge(35'000);  // -25 ms
  b.Refill(300'000);  // three windows later: -25 + 30 = 5 ms
  EXPECT_EQ(b.Balance(), 5'000);
}

TEST(ComputeBucketTest, InflightEstimateHoldsTheGate) {
  auto s = Share(500'000);
  ComputeBucket b(*s);
  b.Refill(0);
  EXPECT_TRUE(b.Admits(49'999));
  EXPECT_FALSE(b.Admits(50'000));
  EXPECT_EQ(b.NextAdmitUs(10, 50'000), 100'000u);
}

TEST(ComputeBucketTest, WindowBoundariesAreAligned) {
  auto s = Share(250'000);
  ComputeBucket b(*s);
  b.Refill(99'999);
  b.Charge(25'000);
  EXPECT_EQ(b.NextAdmitUs(99'999, 0), 100'000u);  // the very next microsecond
  b.Refill(100'000);
  EXPECT_EQ(b.Balance(), 25'000);
}

// Processes of one container share the bucket: racing refills add each
// window once, and charges from all of them add up.
TEST(ComputeBucketTest, ConcurrentRefillsAddEachWindowOnce) {
  auto s = Share(100'000);  // 10 ms per window
  ComputeBucket(*s).Refill(0);
  ComputeBucket(*s).Charge(1'010'000);  // 1 s of debt
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      ComputeBucket b(*s);
      for (uint64_t w = 1; w <= 50; ++w) b.Refill(w * 100'000 + 7);
    });
  }
  for (auto& t : threads) t.join();
  // 50 windows, each added once by whichever thread got there first.
  EXPECT_EQ(ComputeBucket(*s).Balance(), -1'000'000 + 50 * 10'000);
  EXPECT_EQ(s->window_index.load(), 51u);
}

// The arbiter's grant, its lease, and the fall-back to the static share.
TEST(ComputeBucketTest, FollowsTheGrantWhileTheArbiterIsAlive) {
  auto s = Share(300'000, 100'000, region::kPolicyShare);
  region::ArbiterState a{};
  ComputeBucket b(*s, &a);
  EXPECT_TRUE(b.Limited());
  EXPECT_TRUE(b.PassThrough());  // `share`, no arbiter ever: ungated
  EXPECT_EQ(b.RatePpm(1'000'000), 300'000u);
  s->grant_ppm = 1'000'000;
  a.lease_us = 300'000;
  a.heartbeat_us = 1'000'000;
  EXPECT_FALSE(b.PassThrough());
  EXPECT_TRUE(b.ArbiterAlive(1'200'000));
  EXPECT_EQ(b.RatePpm(1'200'000), kPpm);
  b.Refill(1'200'000);
  EXPECT_EQ(b.Balance(), 100'000);
  // The lease ran out: the static share, and the balance cut to its refill.
  EXPECT_FALSE(b.ArbiterAlive(1'300'000));
  EXPECT_EQ(b.RatePpm(1'300'000), 300'000u);
  b.Refill(1'300'000);
  EXPECT_EQ(b.Balance(), 30'000);
  // A heartbeat from far in the future is not trusted.
  a.heartbeat_us = 9'000'000;
  EXPECT_FALSE(b.ArbiterAlive(1'300'000));
}

TEST(ComputeBucketTest, AHardShareIsNeverGrantedMore) {
  auto s = Share(300'000, 100'000, region::kPolicyHard);
  region::ArbiterState a{};
  a.lease_us = 300'000;
  a.heartbeat_us = 1'000'000;
  s->grant_ppm = 900'000;
  ComputeBucket b(*s, &a);
  EXPECT_FALSE(b.PassThrough());
  EXPECT_EQ(b.RatePpm(1'000'000), 300'000u);
}

TEST(ComputeBucketTest, AHoldAppliesAtOnceAndAReleaseWithinTheWindow) {
  auto s = Share(500'000, 100'000, region::kPolicyShare);
  region::ArbiterState a{};
  a.lease_us = 1'000'000'000;
  a.heartbeat_us = 1;
  s->grant_ppm = 500'000;
  ComputeBucket b(*s, &a);
  b.Refill(1'000'000);
  EXPECT_EQ(b.Balance(), 50'000);
  s->grant_ppm = 0;  // held
  b.Refill(1'010'000);
  EXPECT_EQ(b.Balance(), 0);
  EXPECT_FALSE(b.Admits(0));
  EXPECT_EQ(b.NextAdmitUs(1'010'000, 0), 1'010'000 + kArbiterPollUs);
  b.Refill(1'150'000);  // a held window adds nothing
  EXPECT_EQ(b.Balance(), 0);
  s->grant_ppm = 1'000'000;  // released 3/4 into the window: the last quarter's refill
  b.Refill(1'175'000);
  EXPECT_EQ(b.Balance(), 25'000);
  EXPECT_TRUE(b.Admits(0));
}

TEST(LaunchEstimateTest, StartsAtDefaultThenFollowsMeasurements) {
  LaunchEstimate e;
  EXPECT_EQ(e.Us(), LaunchEstimate::kDefaultUs);
  e.Observe(1000);
  EXPECT_EQ(e.Us(), 1000u);
  for (int i = 0; i < 40; ++i) e.Observe(200);
  EXPECT_NEAR(static_cast<double>(e.Us()), 200.0, 2.0);
}

TEST(ParseSharePercentTest, PercentsAsTheNodeAgentWritesThem) {
  uint32_t ppm = 0;
  EXPECT_TRUE(ParseSharePercent("30", &ppm));
  EXPECT_EQ(ppm, 300'000u);
  EXPECT_TRUE(ParseSharePercent("12.5", &ppm));
  EXPECT_EQ(ppm, 125'000u);
  EXPECT_TRUE(ParseSharePercent("0.0001", &ppm));
  EXPECT_EQ(ppm, 1u);
  EXPECT_TRUE(ParseSharePercent("100", &ppm));
  EXPECT_EQ(ppm, kPpm);
  for (const char* bad : {"", "101", "100.5", "-1", "1.", ".5", "5%", "1.23456", "abc"}) {
    EXPECT_FALSE(ParseSharePercent(bad, &ppm)) << bad;
  }
}

// A saturating program against the bucket alone, on a simulated clock: one
// stream, kernels of `kernel_us`, measured when they end. The GPU time each
// window lets through averages the share.
double SimulatedShare(uint32_t ppm, uint64_t kernel_us, int windows) {
  auto s = Share(ppm);
  ComputeBucket b(*s);
  LaunchEstimate est;
  constexpr uint64_t kStart = 1'000'000, kWindow = 100'000;
  uint64_t now = kStart, tail = kStart, inflight = 0, busy_in_run = 0;
  const uint64_t end = kStart + windows * kWindow;
  struct Pending {
    uint64_t start, end, est;
  };
  std::deque<Pending> pending;
  auto drain = [&] {
    while (!pending.empty() && pending.front().end <= now) {
      const Pending p = pending.front();
      pending.pop_front();
      b.Charge(p.end - p.start);
      est.Observe(p.end - p.start);
      inflight -= p.est;
    }
  };
  while (now < end) {
    drain();
    b.Refill(now);
    if (b.Admits(inflight)) {
      const uint64_t start = std::max(now, tail);
      tail = start + kernel_us;
      pending.push_back({start, tail, est.Us()});
      inflight += est.Us();
      if (start < end) busy_in_run += std::min(tail, end) - start;
      now += 1;  // host cost of a launch
      if (pending.size() >= 64) now = std::max(now, pending.front().end);  // queue full
    } else {
      uint64_t wake = b.NextAdmitUs(now, inflight);
      if (!pending.empty()) wake = std::min(wake, std::max(now + 1, pending.front().end));
      now = wake;
    }
  }
  return static_cast<double>(busy_in_run) / static_cast<double>(end - kStart);
}

TEST(ComputeBucketTest, SaturatingProgramGetsItsShare) {
  for (uint32_t pct : {10u, 25u, 50u, 75u}) {
    for (uint64_t kernel_us : {50u, 1000u, 7000u}) {
      const double got = SimulatedShare(pct * 10'000, kernel_us, 200);
      EXPECT_NEAR(got, pct / 100.0, 0.03) << pct << "% with " << kernel_us << " us kernels";
    }
  }
}

}  // namespace
}  // namespace tessera::cuda
