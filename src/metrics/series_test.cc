#include "metrics/series.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

namespace tessera::metrics {
namespace {

TEST(CounterTest, CountsAndRenders) {
  Counter c;
  c.Increment();
  c.Increment(4);
  EXPECT_EQ(c.Value(), 5u);
  std::string out;
  c.Append(out, "x_total", "{a=\"b\"}");
  EXPECT_EQ(out, "x_total{a=\"b\"} 5\n");
}

TEST(GaugeTest, SetsAddsAndRenders) {
  Gauge g;
  g.Set(2.5);
  g.Add(-1);
  EXPECT_EQ(g.Value(), 1.5);
  std::string out;
  g.Append(out, "x", "");
  EXPECT_EQ(out, "x 1.5\n");
}

TEST(HistogramTest, BucketBoundsAreInclusive) {
  const std::vector<double> bounds = {0.001, 0.01, 0.1};
  Histogram h(&bounds);
  for (double v : {0.0, 0.001, 0.0010000001, 0.01, 0.1, 0.1000001, 5.0, -1.0}) h.Observe(v);
  const Histogram::Snapshot s = h.Read();
  // <= 0.001: 0, 0.001, -1; <= 0.01: + 0.0010000001, 0.01; <= 0.1: + 0.1; +Inf: + 0.1000001, 5
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{3, 5, 6, 8}));
  EXPECT_EQ(s.count, 8u);
  EXPECT_NEAR(s.sum, 4.2120001001, 1e-9);
}

TEST(HistogramTest, NanAndInfinityLandInTheInfBucket) {
  const std::vector<double> bounds = {1};
  Histogram h(&bounds);
  h.Observe(std::numeric_limits<double>::infinity());
  EXPECT_EQ(h.Read().cumulative, (std::vector<uint64_t>{0, 1}));
  h.Observe(std::nan(""));
  EXPECT_EQ(h.Read().cumulative, (std::vector<uint64_t>{0, 2}));
  EXPECT_TRUE(std::isnan(h.Read().sum));
}

TEST(HistogramTest, WithoutBoundsHasOnlyInf) {
  const std::vector<double> bounds;
  Histogram h(&bounds);
  h.Observe(3);
  std::string out;
  h.Append(out, "d_seconds", "");
  EXPECT_EQ(out,
            "d_seconds_bucket{le=\"+Inf\"} 1\n"
            "d_seconds_sum 3\n"
            "d_seconds_count 1\n");
}

TEST(HistogramTest, RendersCumulativeBucketsWithLabelsAndLe) {
  const std::vector<double> bounds = {0.0001, 0.5, 1};
  Histogram h(&bounds);
  h.Observe(0.00006103515625);  // 2^-14: sums exactly
  h.Observe(0.75);
  h.Observe(0.75);
  std::string out;
  h.Append(out, "d_seconds", "{verb=\"filter\"}");
  EXPECT_EQ(out,
            "d_seconds_bucket{verb=\"filter\",le=\"0.0001\"} 1\n"
            "d_seconds_bucket{verb=\"filter\",le=\"0.5\"} 1\n"
            "d_seconds_bucket{verb=\"filter\",le=\"1\"} 3\n"
            "d_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 3\n"
            "d_seconds_sum{verb=\"filter\"} 1.50006103515625\n"
            "d_seconds_count{verb=\"filter\"} 3\n");
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  const std::vector<double> bounds = {0.5};
  Histogram h(&bounds);
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        h.Observe(i % 2 == 0 ? 0.25 : 1.0);
        c.Increment();
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto s = h.Read();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{200000, 400000}));
  EXPECT_EQ(s.sum, 250000.0);  // every partial sum is exact in binary
  EXPECT_EQ(c.Value(), 400000u);
}

}  // namespace
}  // namespace tessera::metrics
