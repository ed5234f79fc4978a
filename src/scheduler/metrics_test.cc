// /metrics of the extender: verb latency and decisions recorded by the
// server, ledger and leader gauges read from the state.
#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "scheduler/server.h"
#include "scheduler/state_metrics.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using testing::BindBody;
using testing::FilterBody;
using testing::NodeJson;
using testing::PodJson;

using testing::QuietLogger;

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::make_unique<ClusterState>(testing::QuietStateOptions());
    state_->UpsertNode(NodeJson("n1", 2, "A100", 40960));
    state_->UpsertNode(NodeJson("n2", 1, "T4", 15360));
    ExtenderOptions eo;
    eo.logger = QuietLogger();
    eo.may_bind = [this]() -> Status { return may_bind_; };
    extender_ = Extender::Create(*state_, binder_, eo).value();
    ASSERT_TRUE(RegisterStateMetrics(registry_, *state_, [this] { return leader_; }).ok());
    ServerOptions o;
    o.logger = QuietLogger();
    o.metrics = &registry_;
    server_ = std::make_unique<ExtenderServer>(*extender_, o);
    auto port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
  }
  std::string Post(const std::string& path, const std::string& body) {
    auto res = client_->Post(path, body, "application/json");
    return res ? res->body : "";
  }
  std::string Scrape() {
    auto res = client_->Get("/metrics");
    EXPECT_TRUE(res);
    if (!res) return "";
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), metrics::kContentType);
    return res->body;
  }

  std::unique_ptr<ClusterState> state_;
  testing::FakeBinder binder_;
  Status may_bind_;
  bool leader_ = true;
  std::unique_ptr<Extender> extender_;
  metrics::Registry registry_;
  std::unique_ptr<ExtenderServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(MetricsTest, EveryOutcomeStartsAtZero) {
  const std::string m = Scrape();
  for (const char* line : {R"(tessera_scheduler_decisions_total{verb="filter",outcome="fit"} 0)",
                           R"(tessera_scheduler_decisions_total{verb="filter",outcome="bad_request"} 0)",
                           R"(tessera_scheduler_decisions_total{verb="prioritize",outcome="scored"} 0)",
                           R"(tessera_scheduler_decisions_total{verb="bind",outcome="api_error"} 0)",
                           R"(tessera_scheduler_decisions_total{verb="dra_filter",outcome="fit"} 0)",
                           R"(tessera_scheduler_decisions_total{verb="dra_prioritize",outcome="scored"} 0)",
                           R"(tessera_scheduler_decisions_total{verb="dra_prioritize",outcome="no_fit"} 0)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="dra_prioritize"} 0)",
                           R"(tessera_scheduler_extender_request_duration_seconds_bucket{verb="bind",le="0.0001"} 0)",
                           R"(tessera_scheduler_extender_request_duration_seconds_bucket{verb="bind",le="1"} 0)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="filter"} 0)",
                           "# TYPE tessera_scheduler_extender_request_duration_seconds histogram",
                           "# TYPE tessera_scheduler_decisions_total counter", "tessera_scheduler_leader 1"}) {
    EXPECT_TRUE(Has(m, line)) << line << "\n" << m;
  }
  EXPECT_FALSE(Has(m, R"(tessera_scheduler_decisions_total{verb="filter",outcome="bound"} 0)"));
  EXPECT_FALSE(Has(m, R"(tessera_scheduler_decisions_total{verb="dra_prioritize",outcome="unschedulable"} 0)"));
}

// The second extenders entry's verbs (claim pods, under /dra) are counted
// apart from the first's.
TEST_F(MetricsTest, ClaimPodVerbsAreCountedUnderTheirOwnLabels) {
  const auto pod = PodJson("ns", "p", {{"main", 1, 8192, 30}});
  Post("/dra/prioritize", FilterBody(pod, {"n1", "n2"}));   // scored: no claim, no opinion
  Post("/dra/prioritize", R"({"resourceClaims": )");        // bad_request
  Post("/dra/filter", FilterBody(pod, {"n1", "n2"}));       // fit: every node passes
  const std::string m = Scrape();
  for (const char* line : {R"(tessera_scheduler_decisions_total{verb="dra_prioritize",outcome="scored"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="dra_prioritize",outcome="bad_request"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="dra_filter",outcome="fit"} 1)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="dra_prioritize"} 2)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="dra_filter"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="prioritize",outcome="scored"} 0)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="filter"} 0)"}) {
    EXPECT_TRUE(Has(m, line)) << line << "\n" << m;
  }
}

TEST_F(MetricsTest, CountsDecisionsAndTimesEachCall) {
  const auto pod = PodJson("ns", "p", {{"main", 1, 8192, 30}});
  Post("/filter", FilterBody(pod, {"n1", "n2"}));                                           // fit (n1)
  Post("/filter", FilterBody(PodJson("ns", "big", {{"main", 1, 30000, 10}}), {"n2"}));      // no_fit
  Post("/filter", FilterBody(PodJson("ns", "bad", {{"main", 1, 1024, 150}}), {"n1"}));      // unschedulable
  Post("/filter", "{not json");                                                            // bad_request
  Post("/prioritize", FilterBody(pod, {"n1", "n2"}));                                       // scored
  Post("/prioritize", FilterBody(PodJson("ns", "big", {{"main", 1, 30000, 10}}), {"n2"}));  // no_fit
  may_bind_ = Status(StatusCode::kUnavailable, "caches not synced yet");
  Post("/bind", BindBody("ns", "p", "uid-ns-p", "n1"));  // refused
  may_bind_ = Status();
  Post("/bind", BindBody("ns", "p", "uid-ns-p", "n1"));        // bound
  Post("/bind", BindBody("ns", "p", "uid-ns-p", "n1"));        // conflict: holds a share already
  Post("/bind", BindBody("ns", "ghost", "uid-ghost", "n1"));   // error: never seen
  Post("/filter", FilterBody(PodJson("ns", "q", {{"main", 1, 1024, 10}}), {"n1"}));
  binder_.FailWith(Status(StatusCode::kUnavailable, "apiserver away"));
  Post("/bind", BindBody("ns", "q", "uid-ns-q", "n1"));  // api_error
  const std::string m = Scrape();
  for (const char* line : {R"(tessera_scheduler_decisions_total{verb="filter",outcome="fit"} 2)",
                           R"(tessera_scheduler_decisions_total{verb="filter",outcome="no_fit"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="filter",outcome="unschedulable"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="filter",outcome="bad_request"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="prioritize",outcome="scored"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="prioritize",outcome="no_fit"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="bind",outcome="refused"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="bind",outcome="bound"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="bind",outcome="conflict"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="bind",outcome="error"} 1)",
                           R"(tessera_scheduler_decisions_total{verb="bind",outcome="api_error"} 1)",
                           R"(tessera_scheduler_extender_request_duration_seconds_bucket{verb="filter",le="+Inf"} 5)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="filter"} 5)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="prioritize"} 2)",
                           R"(tessera_scheduler_extender_request_duration_seconds_count{verb="bind"} 5)"}) {
    EXPECT_TRUE(Has(m, line)) << line << "\n" << m;
  }
  // The one bound pod's share, as assumed (no pod watch here).
  for (const char* line : {R"(tessera_scheduler_gpus{model="A100"} 2)", R"(tessera_scheduler_gpus{model="T4"} 1)",
                           R"(tessera_scheduler_gpu_memory_bytes{model="A100",state="allocated"} 8589934592)",
                           R"(tessera_scheduler_gpu_memory_bytes{model="A100",state="total"} 85899345920)",
                           R"(tessera_scheduler_gpu_memory_bytes{model="T4",state="allocated"} 0)",
                           R"(tessera_scheduler_gpu_core_ratio{model="A100",state="allocated"} 0.3)",
                           R"(tessera_scheduler_gpu_core_ratio{model="A100",state="total"} 2)",
                           R"(tessera_scheduler_pods_held{state="assumed"} 1)",
                           R"(tessera_scheduler_pods_held{state="confirmed"} 0)",
                           R"(tessera_scheduler_nodes{kind="gpu"} 2)"}) {
    EXPECT_TRUE(Has(m, line)) << line << "\n" << m;
  }
}

TEST_F(MetricsTest, LeaderGaugeFollowsTheElector) {
  leader_ = false;
  EXPECT_TRUE(Has(Scrape(), "tessera_scheduler_leader 0"));
}

TEST_F(MetricsTest, ConfirmedPodsAndTotalsByModel) {
  core::Assignment a;
  a.node = "n1";
  a.containers.push_back({"main", {{1, testing::GpuUuid("n1", 1), 4096, 250}}});
  state_->UpsertPod(testing::BoundPodJson(PodJson("ns", "w", {{"main", 1, 4096, 25}}), a));
  const auto totals = TotalsByModel(*state_);
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals.at("A100"), (ModelTotals{2, 81920, 4096, 250, 250}));  // predicted at its request
  EXPECT_EQ(totals.at("T4"), (ModelTotals{1, 15360, 0, 0, 0}));
  EXPECT_TRUE(Has(Scrape(), R"(tessera_scheduler_pods_held{state="confirmed"} 1)"));
}

TEST_F(MetricsTest, RegisteringTwiceFails) {
  EXPECT_EQ(RegisterStateMetrics(registry_, *state_, nullptr).code(), StatusCode::kAlreadyExists);
  ServerOptions o;
  o.logger = QuietLogger();
  o.metrics = &registry_;
  ExtenderServer second(*extender_, o);
  EXPECT_EQ(second.Start("127.0.0.1", 0).status().code(), StatusCode::kAlreadyExists);
}

TEST(MetricsEndpointTest, AbsentWithoutARegistry) {
  ClusterState state;
  testing::FakeBinder binder;
  ExtenderOptions eo;
  eo.logger = QuietLogger();
  auto extender = Extender::Create(state, binder, eo).value();
  ServerOptions o;
  o.logger = QuietLogger();
  ExtenderServer server(*extender, o);
  auto port = server.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  httplib::Client client("127.0.0.1", *port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

}  // namespace
}  // namespace tessera::scheduler
