#include "sim/timed.h"

#include <gtest/gtest.h>

#include "core/random.h"

namespace tessera::sim {
namespace {

core::NodeInfo Node(const std::string& name, int gpus) {
  TraceNode t;
  t.name = name;
  t.cpu_milli = 64000;
  t.memory_mib = 262144;
  t.gpu_count = gpus;
  t.model = "T4";
  return ToNodeInfo(t);
}

TracePod Trace(const std::string& name, int64_t milli, int64_t created, int64_t deleted, int gpus = 1) {
  TracePod p;
  p.name = name;
  p.cpu_milli = 1000;
  p.memory_mib = 1024;
  p.num_gpu = gpus;
  p.gpu_milli = milli;
  p.qos = "LS";
  p.creation_time = created;
  p.deletion_time = deleted;
  return p;
}

// Every pod keeps exactly `factor` of its request busy.
TimeOptions Fixed(const std::string& policy, double factor) {
  TimeOptions o;
  o.policy = policy;
  o.utilization.mean_low = factor;
  o.utilization.mean_high = factor;
  o.utilization.jitter = 0;
  return o;
}

TEST(TimedArrivals, OrdersByCreationCompressesGapsAndKeepsLifetimes) {
  auto pods = TimedArrivals({Trace("b", 500, 100, 150), Trace("a", 500, 100, 400), Trace("c", 500, 300, 310)}, 2.0);
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_EQ((*pods)[0].request.key, "a");  // same second: by name
  EXPECT_EQ((*pods)[0].arrival_s, 100);
  EXPECT_EQ((*pods)[0].departure_s, 400);
  EXPECT_EQ((*pods)[2].request.key, "c");
  EXPECT_EQ((*pods)[2].arrival_s, 200);  // 100 + (300 - 100) / 2
  EXPECT_EQ((*pods)[2].departure_s, 210);
  EXPECT_EQ((*pods)[0].workload, "shape/1000/1024/1/500/LS");
  EXPECT_EQ((*pods)[0].workload, (*pods)[1].workload);
  EXPECT_FALSE(TimedArrivals({Trace("x", 500, 1, -1)}, 1.0).ok());
  EXPECT_FALSE(TimedArrivals({Trace("x", 500, 1, 2)}, 0).ok());
}

TEST(Slowdown, FlatToTheKneeThenLinearToOnePlusSlope) {
  InterferenceModel m;  // knee 0.7, slope 1
  EXPECT_DOUBLE_EQ(Slowdown(m, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Slowdown(m, 0.7), 1.0);
  EXPECT_NEAR(Slowdown(m, 0.85), 1.5, 1e-12);
  EXPECT_NEAR(Slowdown(m, 1.0), 2.0, 1e-12);
  EXPECT_NEAR(Slowdown(m, 1.2), 2.4, 1e-12);  // oversubscribed: x 1.2 on top
}

TEST(ReplayTimed, ReleasesOnDeletionAndFailsWhatDoesNotFitOnArrival) {
  auto pods = TimedArrivals({Trace("a", 1000, 0, 10), Trace("c", 1000, 5, 20), Trace("b", 1000, 10, 20)}, 1.0);
  ASSERT_TRUE(pods.ok());
  auto r = ReplayTimed({Node("n", 1)}, *pods, Fixed("tessera", 0.5));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->placed, 2);  // a, then b in the second a leaves
  EXPECT_EQ(r->failed, 1);  // c arrives while a holds the GPU
  EXPECT_NEAR(r->failed_gpu_pct, 100.0 / 3, 1e-9);
  EXPECT_NEAR(r->alloc_pct, 100.0, 1e-9);  // the GPU is held over the whole window [0, 10]
  EXPECT_EQ(r->window_s, 10);
}

TEST(ReplayTimed, SlowdownIsTimeWeightedOverEachJobsLife) {
  // One GPU. a (50 %) alone for 50 s, then with b (50 %) for 50 s; every pod
  // keeps 80 % of its request busy: 0.4 alone, 0.8 together.
  auto pods = TimedArrivals({Trace("a", 500, 0, 100), Trace("b", 500, 50, 100), Trace("c", 100, 100, 100)}, 1.0);
  ASSERT_TRUE(pods.ok());
  auto r = ReplayTimed({Node("n", 1)}, *pods, Fixed("tessera", 0.8));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->placed, 3);
  const double together = 1 + (0.8 - 0.7) / 0.3;  // 1.333...
  // a: half its life alone, half together; b: all together; c: no life, alone.
  EXPECT_NEAR(r->mean_slowdown, ((1 + together) / 2 + together + 1) / 3, 1e-9);
  EXPECT_NEAR(r->p95_slowdown, together, 1e-9);
  EXPECT_NEAR(r->slowed_pct, 200.0 / 3, 1e-9);
  EXPECT_NEAR(r->alloc_pct, 75.0, 1e-9);                    // 50 % then 100 % over [0, 100]
  EXPECT_NEAR(r->high_util_gpu_hours, 50.0 / 3600, 1e-12);  // above 0.7 for 50 s
  EXPECT_NEAR(r->busy_gpu_hours, (0.4 * 50 + 0.8 * 50) / 3600, 1e-12);
  ASSERT_EQ(r->series.size(), 1u);  // hourly, over [0, 100 s]
  EXPECT_EQ(r->series.front().t, 0);
  EXPECT_NEAR(r->series.front().alloc_pct, 50.0, 1e-9);
  EXPECT_EQ(r->series.front().high_gpus, 0);
}

TEST(ReplayTimed, TheInterferencePolicyKeepsGpusUnderTheKneeWhereTesseraPacks) {
  // Two GPUs, two long 50 % pods at 80 % busy: packed they make one GPU 0.8 busy.
  auto pods = TimedArrivals({Trace("a", 500, 0, 1000), Trace("b", 500, 10, 1000), Trace("z", 100, 3610, 3620)}, 1.0);
  ASSERT_TRUE(pods.ok());
  auto packed = ReplayTimed({Node("n", 2)}, *pods, Fixed("tessera", 0.8));
  auto spread = ReplayTimed({Node("n", 2)}, *pods, Fixed("tessera-interference", 0.8));
  ASSERT_TRUE(packed.ok() && spread.ok());
  EXPECT_NEAR(packed->high_util_gpu_hours, 990.0 / 3600, 1e-12);
  EXPECT_EQ(spread->high_util_gpu_hours, 0);
  EXPECT_GT(packed->mean_slowdown, 1.0);
  EXPECT_EQ(spread->mean_slowdown, 1.0);
  EXPECT_EQ(spread->shared_high_gpu_hours, 0);
  EXPECT_NEAR(packed->shared_high_gpu_hours, 990.0 / 3600, 1e-12);
  EXPECT_DOUBLE_EQ(packed->alloc_pct, spread->alloc_pct);
}

TEST(ReplayTimed, HistoryCorrectsAnOptimisticDefaultFactor) {
  // 40 % shares that keep all of it busy. Predicted at 30 % of the request
  // (0.12 each) two look fine on one GPU; once the first is measured (300 s
  // in), the second is predicted at 0.4 and goes to the other GPU.
  auto pods = TimedArrivals({Trace("a", 400, 0, 5000), Trace("b", 400, 400, 5000), Trace("z", 100, 4000, 4001)}, 1.0);
  ASSERT_TRUE(pods.ok());
  TimeOptions o = Fixed("tessera-interference", 1.0);
  o.interference.default_factor = 0.3;
  o.history = false;
  auto blind = ReplayTimed({Node("n", 2)}, *pods, o);
  o.history = true;
  auto seen = ReplayTimed({Node("n", 2)}, *pods, o);
  ASSERT_TRUE(blind.ok() && seen.ok());
  EXPECT_NEAR(blind->high_util_gpu_hours, 3600.0 / 3600, 1e-12);  // 0.8 busy from 400 s to 4000 s
  EXPECT_EQ(seen->high_util_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(blind->alloc_pct, seen->alloc_pct);
}

TEST(ReplayTimed, AJobAloneIsNotSlowedByItsOwnLoad) {
  // A whole GPU at 95 % busy, alone: above the knee (counted as highly
  // utilized) but not shared, and not slowed by interference.
  auto pods = TimedArrivals({Trace("w", 1000, 0, 100), Trace("z", 100, 100, 100)}, 1.0);
  ASSERT_TRUE(pods.ok());
  auto r = ReplayTimed({Node("n", 1)}, *pods, Fixed("tessera", 0.95));
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->high_util_gpu_hours, 100.0 / 3600, 1e-12);
  EXPECT_EQ(r->shared_high_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(r->mean_slowdown, 1.0);
}

TEST(ReplayTimed, DeterministicPerSeed) {
  std::vector<TracePod> trace;
  core::Rng rng(9);
  const int64_t shares[] = {100, 250, 470, 500, 810, 1000};
  for (int i = 0; i < 300; ++i) {
    const int64_t t = static_cast<int64_t>(rng.Below(20000));
    trace.push_back(Trace("p" + std::to_string(i), shares[rng.Below(6)], t, t + 1 + static_cast<int64_t>(rng.Below(5000))));
  }
  auto pods = TimedArrivals(trace, 1.0);
  ASSERT_TRUE(pods.ok());
  std::vector<core::NodeInfo> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(Node("n" + std::to_string(i), 4));
  TimeOptions o;
  o.policy = "tessera-interference";
  auto a = ReplayTimed(nodes, *pods, o);
  auto b = ReplayTimed(nodes, *pods, o);
  o.seed = 43;
  auto c = ReplayTimed(nodes, *pods, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->placed, b->placed);
  EXPECT_EQ(a->high_util_gpu_hours, b->high_util_gpu_hours);
  EXPECT_EQ(a->mean_slowdown, b->mean_slowdown);
  EXPECT_EQ(a->busy_gpu_hours, b->busy_gpu_hours);
  EXPECT_NE(a->busy_gpu_hours, c->busy_gpu_hours);  // another seed draws other busy factors
  EXPECT_EQ(BusyFactor({}, 42, "w", "p"), BusyFactor({}, 42, "w", "p"));
  EXPECT_NE(BusyFactor({}, 42, "w", "p"), BusyFactor({}, 43, "w", "p"));
}

}  // namespace
}  // namespace tessera::sim
