#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/sinks/null_sink.h>

#include "node/metrics_server.h"
#include "node/metrics_text.h"

namespace tessera::node {
namespace {

TEST(MetricsTextTest, FormatsCountersWithHelpAndType) {
  EXPECT_EQ(FormatCounters({{"a_total", "Things done.", 3}, {"b_total", "Back\\slash\nand newline.", 0}}),
            "# HELP a_total Things done.\n"
            "# TYPE a_total counter\n"
            "a_total 3\n"
            "# HELP b_total Back\\\\slash\\nand newline.\n"
            "# TYPE b_total counter\n"
            "b_total 0\n");
  EXPECT_EQ(FormatCounters({}), "");
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
  int renders = 0;
  MetricsServer server([&] { return FormatCounters({{"x_total", "X.", static_cast<uint64_t>(++renders)}}); }, log);
  auto port = server.Start({"127.0.0.1", 0});
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  httplib::Client client("127.0.0.1", *port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kPrometheusTextType);
  EXPECT_NE(res->body.find("x_total 1\n"), std::string::npos) << res->body;
  EXPECT_EQ(client.Get("/nope")->status, 404);
  EXPECT_FALSE(server.Start({"127.0.0.1", 0}).ok());  // already started
  server.Stop();
  server.Stop();
}

}  // namespace
}  // namespace tessera::node
