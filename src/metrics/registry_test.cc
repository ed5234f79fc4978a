#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>

namespace tessera::metrics {
namespace {

TEST(RegistryTest, RendersFamiliesSortedByNameAndSeriesByLabels) {
  Registry r;
  auto* decisions = r.AddCounter("t_decisions_total", "Decisions.", {"verb", "outcome"}).value();
  auto* temp = r.AddGauge("t_temperature_celsius", "Temperature.").value();
  auto* latency = r.AddHistogram("t_duration_seconds", "Latency.", {"verb"}, {0.001, 0.01}).value();
  decisions->WithLabels({"filter", "no_fit"}).Increment();
  decisions->WithLabels({"bind", "bound"}).Increment(2);
  decisions->WithLabels({"filter", "fit"}).Increment(3);
  temp->Get().Set(41.5);
  latency->WithLabels({"filter"}).Observe(0.002);
  EXPECT_EQ(r.Render(),
            "# HELP t_decisions_total Decisions.\n"
            "# TYPE t_decisions_total counter\n"
            "t_decisions_total{verb=\"bind\",outcome=\"bound\"} 2\n"
            "t_decisions_total{verb=\"filter\",outcome=\"fit\"} 3\n"
            "t_decisions_total{verb=\"filter\",outcome=\"no_fit\"} 1\n"
            "# HELP t_duration_seconds Latency.\n"
            "# TYPE t_duration_seconds histogram\n"
            "t_duration_seconds_bucket{verb=\"filter\",le=\"0.001\"} 0\n"
            "t_duration_seconds_bucket{verb=\"filter\",le=\"0.01\"} 1\n"
            "t_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 1\n"
            "t_duration_seconds_sum{verb=\"filter\"} 0.002\n"
            "t_duration_seconds_count{verb=\"filter\"} 1\n"
            "# HELP t_temperature_celsius Temperature.\n"
            "# TYPE t_temperature_celsius gauge\n"
            "t_temperature_celsius 41.5\n");
}

TEST(RegistryTest, SameLabelsGiveTheSameSeries) {
  Registry r;
  auto* c = r.AddCounter("x_total", "X.", {"a"}).value();
  Counter& one = c->WithLabels({"v"});
  Counter& again = c->WithLabels({"v"});
  EXPECT_EQ(&one, &again);
  EXPECT_NE(&one, &c->WithLabels({"w"}));
  EXPECT_TRUE(c->Remove({"w"}));
  EXPECT_FALSE(c->Remove({"w"}));
  one.Increment();
  EXPECT_EQ(r.Render(), "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"v\"} 1\n");
}

TEST(RegistryTest, EscapesHelpAndLabelValues) {
  Registry r;
  auto* g = r.AddGauge("pods", "Line one\nback\\slash \"quoted\".", {"pod"}).value();
  g->WithLabels({"we\"ird\\na\nme"}).Set(1);
  EXPECT_EQ(r.Render(),
            "# HELP pods Line one\\nback\\\\slash \"quoted\".\n"
            "# TYPE pods gauge\n"
            "pods{pod=\"we\\\"ird\\\\na\\nme\"} 1\n");
}

TEST(RegistryTest, FamilyWithoutSeriesRendersHelpAndTypeOnly) {
  Registry r;
  ASSERT_TRUE(r.AddCounter("x_total", "X.", {"a"}).ok());
  EXPECT_EQ(r.Render(), "# HELP x_total X.\n# TYPE x_total counter\n");
}

TEST(RegistryTest, CallbackFamiliesAreCollectedAtEachRender) {
  Registry r;
  double allocated = 1024;
  ASSERT_TRUE(r.AddCallback(MetricType::kGauge, "mem_bytes", "Memory.", {"model", "state"}, [&] {
                 return std::vector<Sample>{{{"B", "total"}, 4096},
                                            {{"A", "total"}, 2048},
                                            {{"A", "allocated"}, allocated},
                                            {{"A", "total"}, 1},  // repeated: dropped
                                            {{"too", "many", "values"}, 9}};
               }).ok());
  const std::string want_head = "# HELP mem_bytes Memory.\n# TYPE mem_bytes gauge\n";
  EXPECT_EQ(r.Render(), want_head +
                            "mem_bytes{model=\"A\",state=\"allocated\"} 1024\n"
                            "mem_bytes{model=\"A\",state=\"total\"} 2048\n"
                            "mem_bytes{model=\"B\",state=\"total\"} 4096\n");
  allocated = 0.5;
  EXPECT_NE(r.Render().find("mem_bytes{model=\"A\",state=\"allocated\"} 0.5\n"), std::string::npos);
  ASSERT_TRUE(r.AddCallback(MetricType::kCounter, "ext_total", "Kept elsewhere.", {}, [] {
                 return std::vector<Sample>{{{}, 7}};
               }).ok());
  EXPECT_NE(r.Render().find("# TYPE ext_total counter\next_total 7\n"), std::string::npos);
}

TEST(RegistryTest, RejectsBadOrUnconventionalFamilies) {
  Registry r;
  EXPECT_EQ(r.AddCounter("runs", "No _total.").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("runs_total", "Gauge with _total.").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("x_count", "Reserved suffix.").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("x-y", "Bad name.").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("x", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("x", "Bad label.", {"a-b"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("x", "Reserved label.", {"__name__"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("x", "Repeated label.", {"a", "a"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h_seconds", "le label.", {"le"}, {1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h_seconds", "Unsorted.", {}, {1, 0.5}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h_seconds", "Repeated.", {}, {1, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h_seconds", "Inf.", {}, {1, std::numeric_limits<double>::infinity()}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCallback(MetricType::kHistogram, "h2_seconds", "No.", {}, [] { return std::vector<Sample>{}; })
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCallback(MetricType::kGauge, "g", "No function.", {}, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.AddGauge("x", "X.").ok());
  EXPECT_EQ(r.AddCounter("x", "Taken.").status().code(), StatusCode::kInvalidArgument);  // not _total first
  EXPECT_EQ(r.AddGauge("x", "Taken.").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Render(), "# HELP x X.\n# TYPE x gauge\nx 0\n");  // what failed left nothing behind
}

TEST(RegistryTest, WrongNumberOfLabelValuesAborts) {
  Registry r;
  auto* c = r.AddCounter("x_total", "X.", {"a", "b"}).value();
  EXPECT_DEATH(c->WithLabels({"only one"}), "x_total has 2 label names but was given 1 values");
}

TEST(RegistryTest, RenderRunsBesideUpdatesAndRegistrations) {
  Registry r;
  auto* c = r.AddCounter("x_total", "X.", {"t"}).value();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      Counter& mine = c->WithLabels({std::to_string(t)});
      for (int i = 0; i < 20000; ++i) mine.Increment();
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 50; ++i) (void)r.AddGauge("g" + std::to_string(i), "G.");
  });
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(r.Render().empty());
  for (auto& t : threads) t.join();
  const std::string out = r.Render();
  for (int t = 0; t < 3; ++t) {
    EXPECT_NE(out.find("x_total{t=\"" + std::to_string(t) + "\"} 20000\n"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace tessera::metrics
