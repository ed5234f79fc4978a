#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/sinks/null_sink.h>

#include "metrics/text_format.h"
#include "node/metrics_server.h"
#include "node/node_metrics.h"

namespace tessera::node {
namespace {

TEST(NodeMetricsTest, RegistersTheAgentsCountersWithHelpAndType) {
  metrics::Registry registry;
  auto m = NodeMetrics::Register(registry, "n1");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  m->allocations->Increment(3);
  m->reconcile_runs->Increment();
  const std::string text = registry.Render();
  for (const char* line : {"# HELP tessera_node_allocations_total Allocate calls answered with a container's GPUs.",
                           "# TYPE tessera_node_allocations_total counter", "tessera_node_allocations_total{node=\"n1\"} 3",
                           "tessera_node_allocate_failures_total{node=\"n1\"} 0",
                           "tessera_node_assignments_refused_total{node=\"n1\"} 0",
                           "tessera_node_allocation_mismatches_total{node=\"n1\"} 0",
                           "tessera_node_reconcile_runs_total{node=\"n1\"} 1",
                           "# TYPE tessera_node_region_folders_removed_total counter",
                           "tessera_node_region_folders_removed_total{node=\"n1\"} 0"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(NodeMetrics::Register(registry, "n1").status().code(), StatusCode::kAlreadyExists);
}

TEST(BindAddressTest, Parses) {
  EXPECT_EQ(*ParseBindAddress(":9410"), (BindAddress{"0.0.0.0", 9410}));
  EXPECT_EQ(*ParseBindAddress("127.0.0.1:0"), (BindAddress{"127.0.0.1", 0}));
  EXPECT_EQ(*ParseBindAddress("[::1]:80"), (BindAddress{"::1", 80}));
  for (const char* bad : {"9410", ":", ":x", ":70000", "h:-1", ":94 10"}) {
    EXPECT_FALSE(ParseBindAddress(bad).ok()) << bad;
  }
}

TEST(MetricsServerTest, ServesTheRenderedText) {
  auto log = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  metrics::Registry registry;
  metrics::Counter& renders = registry.AddCounter("x_total", "X.").value()->Get();
  MetricsServer server([&] {
    renders.Increment();
    return registry.Render();
  }, log);
  auto port = server.Start({"127.0.0.1", 0});
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  httplib::Client client("127.0.0.1", *port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), metrics::kContentType);
  EXPECT_NE(res->body.find("x_total 1\n"), std::string::npos) << res->body;
  EXPECT_EQ(client.Get("/nope")->status, 404);
  EXPECT_FALSE(server.Start({"127.0.0.1", 0}).ok());  // already started
  // A second server on the same port says why it cannot listen.
  MetricsServer other([] { return std::string(); }, log);
  const auto taken = other.Start({"127.0.0.1", *port});
  EXPECT_EQ(taken.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(taken.status().message().find("for /metrics: Address already in use"), std::string::npos)
      << taken.status().ToString();
  server.Stop();
  server.Stop();
}

}  // namespace
}  // namespace tessera::node
