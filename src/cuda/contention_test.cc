#include "cuda/contention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <vector>

#include "cuda/compute_gate.h"
#include "region/board.h"

namespace tessera::cuda {
namespace {

TEST(ShareClockTest, AloneTheChargeIsTheMeasurement) {
  ShareClock c;
  c.Sample(1'000, 0);
  const ShareClock::Mark from = c.Now();
  c.Sample(3'000, 0);
  EXPECT_EQ(c.Charge(2'000, from, c.Now()), 2'000u);
}

TEST(ShareClockTest, BusyNeighboursDivideTheSpan) {
  ShareClock c;
  c.Sample(0, 1);
  const ShareClock::Mark from = c.Now();
  c.Sample(4'000, 1);  // one other context busy throughout
  EXPECT_EQ(c.Charge(4'000, from, c.Now()), 2'000u);
  const ShareClock::Mark from3 = c.Now();
  c.Sample(7'000, 2);  // two others: a third
  EXPECT_EQ(c.Charge(3'000, from3, c.Now()), 1'000u);
}

TEST(ShareClockTest, AnIntervalSweepOverChangingNeighbours) {
  // 2 ms alone, then 2 ms beside one other: the mean share is 3/4.
  ShareClock c;
  c.Sample(10'000, 0);
  const ShareClock::Mark from = c.Now();
  c.Sample(12'000, 0);
  c.Sample(14'000, 1);
  EXPECT_EQ(c.Charge(4'000, from, c.Now()), 3'000u);
}

TEST(ShareClockTest, MarksBetweenSamplesProjectTheLastCount) {
  ShareClock c;
  c.Sample(0, 1);
  const ShareClock::Mark at = c.At(1'000);  // no sample taken
  EXPECT_EQ(at.t_us, 1'000u);
  EXPECT_DOUBLE_EQ(at.v_us, 500.0);
  c.Sample(3'000, 1);
  EXPECT_EQ(c.Charge(2'000, at, c.Now()), 1'000u);
  EXPECT_EQ(c.At(2'000).t_us, 3'000u);  // before the last sample: the last sample
}

TEST(ShareClockTest, NoTimeBetweenMarksUsesTheLastCount) {
  ShareClock c;
  c.Sample(5'000, 3);
  EXPECT_EQ(c.Charge(800, c.Now(), c.Now()), 200u);
}

TEST(ShareClockTest, ClampsAndNeverChargesNothingForWork) {
  ShareClock c;
  c.Sample(100, 0);
  c.Sample(50, 5);  // a clock that went back: ignored
  EXPECT_EQ(c.Now().t_us, 100u);
  EXPECT_EQ(c.Others(), 0u);
  c.Sample(100'100, 1'000'000);
  EXPECT_EQ(c.Charge(1, ShareClock::Mark{100, 0}, c.Now()), 1u);  // at least 1 us
  EXPECT_EQ(c.Charge(0, ShareClock::Mark{100, 0}, c.Now()), 0u);
  // A mark of another clock (v going back) falls back to the last count.
  EXPECT_LE(c.Charge(1'000, ShareClock::Mark{0, 1e12}, c.Now()), 1'000u);
}

// Two contexts saturating one GPU that the driver time-slices between them
// (a processor-sharing model: each busy context progresses at 1 / busy),
// each gated by a hard bucket of its own container, as the launch gate
// does: a kernel is admitted while Admits(in-flight estimates), its span
// runs from when it reaches the head of its queue (the start event behind
// the previous kernel) to its end, so it covers the other's slices, and it
// is charged at its end, as measured (`correct` false, the gate before the
// board) or corrected by the ShareClock over the busy board.
struct SimResult {
  double got[2];  // fraction of the GPU each context really got
};

SimResult SimulateTwoContexts(uint32_t ppm_a, uint32_t ppm_b, bool correct) {
  constexpr uint64_t kDt = 10;          // us per step
  constexpr double kKernelUs = 1'000;   // fixed work per kernel
  constexpr uint64_t kWindows = 200;
  constexpr uint64_t kWindowUs = 100'000;
  constexpr size_t kDepth = 4;          // kernels queued per context at most
  struct Kernel {
    double left_us;
    uint64_t head_at = 0;  // when it reached the head of its queue
    ShareClock::Mark from;
  };
  struct Ctx {
    std::unique_ptr<region::ComputeShare> share = std::make_unique<region::ComputeShare>();
    std::deque<Kernel> queue;
    uint64_t inflight_us = 0;
    ShareClock clock;
    double real_us = 0;
    int slot = -1;
  };
  auto board = std::make_unique<region::Board>();
  Ctx ctx[2];
  const uint32_t ppm[2] = {ppm_a, ppm_b};
  for (int i = 0; i < 2; ++i) {
    ComputeBucket::Configure(*ctx[i].share, ppm[i], kWindowUs, region::kPolicyHard);
    ctx[i].slot = region::ClaimBoardSlot(*board, 100 + i, 1);
  }
  const uint64_t t0 = kWindowUs, t1 = t0 + kWindows * kWindowUs;
  for (uint64_t now = t0; now < t1; now += kDt) {
    for (Ctx& c : ctx) {
      ComputeBucket b(*c.share);
      b.Refill(now);
      if (!c.clock.Started()) c.clock.Sample(now, region::OthersBusy(*board, c.slot, now));
      if (now % 1'000 == 0) c.clock.Sample(now, region::OthersBusy(*board, c.slot, now));  // the helper
      while (c.queue.size() < kDepth && b.Admits(c.inflight_us)) {
        c.queue.push_back(Kernel{kKernelUs, c.queue.empty() ? now : 0, c.clock.At(now)});
        c.inflight_us += static_cast<uint64_t>(kKernelUs);
        region::MarkBusy(*board, c.slot, now);
      }
    }
    const int busy = !ctx[0].queue.empty() + !ctx[1].queue.empty();
    for (Ctx& c : ctx) {
      if (c.queue.empty()) continue;
      const double step = static_cast<double>(kDt) / busy;
      c.real_us += step;
      Kernel& k = c.queue.front();
      k.left_us -= step;
      if (k.left_us > 1e-9) continue;
      const uint64_t end = now + kDt;
      const uint64_t span = end - k.head_at;
      uint64_t charge = span;
      if (correct) {
        c.clock.Sample(end, region::OthersBusy(*board, c.slot, end));
        charge = c.clock.Charge(span, k.from, c.clock.Now());
      }
      ComputeBucket(*c.share).Charge(charge);
      c.inflight_us -= static_cast<uint64_t>(kKernelUs);
      c.queue.pop_front();
      if (!c.queue.empty()) c.queue.front().head_at = end;
      if (c.queue.empty()) region::MarkIdle(*board, c.slot, end);
    }
  }
  SimResult r;
  for (int i = 0; i < 2; ++i) r.got[i] = ctx[i].real_us / static_cast<double>(t1 - t0);
  return r;
}

void ExpectShares(uint32_t ppm_a, uint32_t ppm_b) {
  const double asked = static_cast<double>(ppm_a) / ppm_b;
  const SimResult old_way = SimulateTwoContexts(ppm_a, ppm_b, /*correct=*/false);
  const SimResult fixed = SimulateTwoContexts(ppm_a, ppm_b, /*correct=*/true);
  const double old_ratio = old_way.got[0] / old_way.got[1];
  const double ratio = fixed.got[0] / fixed.got[1];
  std::printf("  %u/%u: as measured %.3f and %.3f (ratio %.3f); corrected %.3f and %.3f (ratio %.3f, asked %.3f)\n",
              ppm_a / 10'000, ppm_b / 10'000, old_way.got[0], old_way.got[1], old_ratio, fixed.got[0],
              fixed.got[1], ratio, asked);
  // Charged as measured, the small share misses its ratio (the H200 gave
  // 0.153 and 0.553 for 30/70): the old charging fails the check.
  EXPECT_GT(std::abs(old_ratio / asked - 1), 0.10);
  // Corrected: within +-10 % of the ratio, each within 3 points of its share.
  EXPECT_NEAR(ratio / asked, 1.0, 0.10);
  EXPECT_NEAR(fixed.got[0], ppm_a / 1e6, 0.03);
  EXPECT_NEAR(fixed.got[1], ppm_b / 1e6, 0.03);
}

TEST(ShareClockTest, TwoTimeSlicedContextsGetTheirSharesOnlyWhenCorrected_30_70) {
  ExpectShares(300'000, 700'000);
}

TEST(ShareClockTest, TwoTimeSlicedContextsGetTheirSharesOnlyWhenCorrected_10_90) {
  ExpectShares(100'000, 900'000);
}

}  // namespace
}  // namespace tessera::cuda
