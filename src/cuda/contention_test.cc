#include "cuda/contention.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Two contexts saturating one GPU, each gated by a hard bucket of its own
// container as the launch gate does: a kernel is admitted while
// Admits(in-flight estimates) and charged at its end, as measured
// (`kAsMeasured`, the gate before the board) or corrected by the ShareClock
// over the busy board (`kCorrected`, the gate now), or, under contention,
// no more than the shortest span seen lately (`kMinSpan`, a candidate).
// Two models of the GPU:
// - processor sharing: each busy context progresses at 1 / busy; a
//   kernel's span runs from when it reaches the head of its queue (its start
//   event, behind the previous kernel) to its end, so it covers the other's
//   slices;
// - time slices (`slice_us`): one context runs at a time, until its queue
//   is empty or its slice is over while the other has work. A kernel
//   admitted to an empty queue is *fresh*: its start event is stamped only
//   when its context next runs, so the wait for the other's slice is not in
//   its span. A kernel queued behind another starts at that one's end. This
//   is what the H200 showed: a process paced to 30 % beside a saturating
//   one had spans equal to its GPU time (tests/gpu/RESULTS.md, 2026-11-27).
// `batch` 0: each context keeps kDepth kernels queued; else it launches
// `batch` kernels and waits until they are done, as the GPU tests' workers
// synchronize every 4 (arbiter tests) or 20 (compute_ratios).
enum class Gpu { kProcessorSharing, kTimeSlices };
enum class Charging { kAsMeasured, kCorrected, kMinSpan };

struct SimOptions {
  Gpu gpu = Gpu::kProcessorSharing;
  uint64_t slice_us = 2'000;
  size_t batch = 0;
  Charging charging = Charging::kCorrected;
};

struct SimResult {
  double got[2];  // fraction of the GPU each context really got
};

SimResult SimulateTwoContexts(uint32_t ppm_a, uint32_t ppm_b, const SimOptions& o) {
  constexpr uint64_t kDt = 10;          // us per step
  constexpr double kKernelUs = 1'000;   // fixed work per kernel
  constexpr uint64_t kWindows = 200;
  constexpr uint64_t kWindowUs = 100'000;
  constexpr size_t kDepth = 4;          // kernels queued per context at most (batch 0)
  constexpr uint64_t kUnset = ~0ull;
  struct Kernel {
    double left_us;
    bool fresh = false;
    uint64_t head_at = kUnset;  // its start event's stamp
    ShareClock::Mark from;
  };
  struct Ctx {
    std::unique_ptr<region::ComputeShare> share = std::make_unique<region::ComputeShare>();
    std::deque<Kernel> queue;
    uint64_t inflight_us = 0;
    size_t batch_left = 0;
    ShareClock clock;
    double real_us = 0;
    int slot = -1;
    double min_span = 0;  // kMinSpan: a running minimum of spans, drifting up
  };
  auto board = std::make_unique<region::Board>();
  Ctx ctx[2];
  const uint32_t ppm[2] = {ppm_a, ppm_b};
  for (int i = 0; i < 2; ++i) {
    ComputeBucket::Configure(*ctx[i].share, ppm[i], kWindowUs, region::kPolicyHard);
    ctx[i].slot = region::ClaimBoardSlot(*board, 100 + i, 1);
  }
  int holder = -1;  // time slices: the context running, and until when
  uint64_t slice_end = 0;
  const uint64_t t0 = kWindowUs, t1 = t0 + kWindows * kWindowUs;
  for (uint64_t now = t0; now < t1; now += kDt) {
    for (Ctx& c : ctx) {
      ComputeBucket b(*c.share);
      b.Refill(now);
      if (!c.clock.Started()) c.clock.Sample(now, region::OthersBusy(*board, c.slot, now));
      if (now % 1'000 == 0) c.clock.Sample(now, region::OthersBusy(*board, c.slot, now));  // the helper
      if (o.batch > 0 && c.queue.empty() && c.batch_left == 0) c.batch_left = o.batch;  // synchronized: next batch
      while ((o.batch > 0 ? c.batch_left > 0 : c.queue.size() < kDepth) && b.Admits(c.inflight_us)) {
        Kernel k{kKernelUs, c.queue.empty(), kUnset, c.clock.At(now)};
        if (o.gpu == Gpu::kProcessorSharing && k.fresh) k.head_at = now;
        c.queue.push_back(k);
        c.inflight_us += static_cast<uint64_t>(kKernelUs);
        if (o.batch > 0) --c.batch_left;
        region::MarkBusy(*board, c.slot, now);
      }
    }
    // Who progresses this step, and how fast.
    double rate[2] = {0, 0};
    if (o.gpu == Gpu::kProcessorSharing) {
      const int busy = !ctx[0].queue.empty() + !ctx[1].queue.empty();
      for (int i = 0; i < 2; ++i) rate[i] = ctx[i].queue.empty() ? 0 : 1.0 / busy;
    } else {
      const int other = holder < 0 ? 0 : 1 - holder;
      const bool holder_done = holder < 0 || ctx[holder].queue.empty() || now >= slice_end;
      if (holder_done && !ctx[other].queue.empty()) {
        holder = other;
        slice_end = now + o.slice_us;
      } else if (holder_done && (holder < 0 || ctx[holder].queue.empty())) {
        holder = -1;
      } else if (holder_done) {
        slice_end = now + o.slice_us;  // the other has nothing: this one runs on
      }
      if (holder >= 0) {
        rate[holder] = 1.0;
        Kernel& k = ctx[holder].queue.front();
        if (k.head_at == kUnset) k.head_at = now;  // a fresh kernel's start, stamped when its context runs
      }
    }
    for (int i = 0; i < 2; ++i) {
      Ctx& c = ctx[i];
      if (rate[i] == 0) continue;
      const double step = static_cast<double>(kDt) * rate[i];
      c.real_us += step;
      Kernel& k = c.queue.front();
      k.left_us -= step;
      if (k.left_us > 1e-9) continue;
      const uint64_t end = now + kDt;
      const uint64_t span = end - k.head_at;
      uint64_t charge = span;
      if (o.charging != Charging::kAsMeasured) {
        c.clock.Sample(end, region::OthersBusy(*board, c.slot, end));
        if (o.charging == Charging::kMinSpan) {
          const uint64_t shared = c.clock.Charge(span, k.from, c.clock.Now());
          c.min_span = c.min_span == 0 || span < c.min_span ? span : c.min_span + (span - c.min_span) / 64;
          charge = shared < span ? std::min<uint64_t>(span, static_cast<uint64_t>(c.min_span)) : span;
        } else {
          charge = c.clock.Charge(span, k.from, c.clock.Now());
        }
      }
      ComputeBucket(*c.share).Charge(charge);
      c.inflight_us -= static_cast<uint64_t>(kKernelUs);
      c.queue.pop_front();
      if (!c.queue.empty()) c.queue.front().head_at = end;  // queued behind: starts at this end
      if (c.queue.empty()) region::MarkIdle(*board, c.slot, end);
    }
  }
  SimResult r;
  for (int i = 0; i < 2; ++i) r.got[i] = ctx[i].real_us / static_cast<double>(t1 - t0);
  return r;
}

SimResult Simulate(uint32_t ppm_a, uint32_t ppm_b, Gpu gpu, size_t batch, Charging charging) {
  SimOptions o;
  o.gpu = gpu;
  o.batch = batch;
  o.charging = charging;
  return SimulateTwoContexts(ppm_a, ppm_b, o);
}

void ExpectShares(uint32_t ppm_a, uint32_t ppm_b) {
  const double asked = static_cast<double>(ppm_a) / ppm_b;
  const SimResult old_way = Simulate(ppm_a, ppm_b, Gpu::kProcessorSharing, 0, Charging::kAsMeasured);
  const SimResult fixed = Simulate(ppm_a, ppm_b, Gpu::kProcessorSharing, 0, Charging::kCorrected);
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

// The H200's miss under the arbiter (2026-11-27), in the time-slice model
// (slices of 2 ms, kernels of 1 ms): the correction assumes every busy
// context progresses at once, but on a time-sliced GPU a fresh kernel
// (started on an idle stream) is not stretched at all, and a kernel queued
// behind one that ended as the slice did is stretched by the neighbour's
// whole slice, however little of the GPU its own context had. So the small
// share runs over or under depending on how its work is batched: about
// +5 % and +16 % with 4 kernels per synchronize, -12 % and +1 % with 20, in
// this model (the H200 gave +19 % and +20 % with 4, under the arbiter's
// share policy, and +0.3 % and +6 % with 20, hard caps; its slice's length
// is not known yet: driver_costs reads it in the next GPU run). A candidate that holds every case of this model: under
// contention, charge a span no more than the shortest span seen lately
// (kMinSpan: a kernel's uninterrupted time; a running minimum that drifts
// up by 1/64 of the gap per kernel).
TEST(ShareClockTest, TimeSlicedGpuMisleadsTheCorrectionAndTheShortestSpanDoesNot) {
  for (uint32_t a : {300'000u, 100'000u}) {
    const uint32_t b = 1'000'000 - a;
    const double share = a / 1e6;
    double worst = 0;
    for (size_t batch : {4, 20}) {
      const SimResult now = Simulate(a, b, Gpu::kTimeSlices, batch, Charging::kCorrected);
      const SimResult cand = Simulate(a, b, Gpu::kTimeSlices, batch, Charging::kMinSpan);
      std::printf("  %u/%u time slices, %zu per batch: corrected %.3f and %.3f; shortest span %.3f and %.3f\n",
                  a / 10'000, b / 10'000, batch, now.got[0], now.got[1], cand.got[0], cand.got[1]);
      worst = std::max(worst, std::abs(now.got[0] / share - 1));
      EXPECT_NEAR(cand.got[0], share, 0.04 * share);
      EXPECT_NEAR(cand.got[1], b / 1e6, 0.04 * (b / 1e6));
    }
    EXPECT_GT(worst, 0.08);  // the correction misses the small share by more than 8 % in some batching
  }
}

// Why the shortest span is not used as it stands: on a GPU that interleaves
// contexts finely (processor sharing) a context whose neighbour never
// pauses has no uninterrupted span to learn from, and is charged its whole
// span, as before the board. The GPU runs decide which model holds.
TEST(ShareClockTest, TheShortestSpanFailsWhereNoKernelRunsAlone) {
  const SimResult ps = Simulate(300'000, 700'000, Gpu::kProcessorSharing, 0, Charging::kMinSpan);
  const SimResult as_measured = Simulate(300'000, 700'000, Gpu::kProcessorSharing, 0, Charging::kAsMeasured);
  std::printf("  30/70 processor sharing: shortest span %.3f and %.3f; as measured %.3f and %.3f\n", ps.got[0],
              ps.got[1], as_measured.got[0], as_measured.got[1]);
  EXPECT_NEAR(ps.got[0], as_measured.got[0], 0.01);
}

}  // namespace
}  // namespace tessera::cuda
