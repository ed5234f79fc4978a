#include "scheduler/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BindBody;
using testing::FilterBody;
using testing::NodeJson;
using testing::PodJson;

using testing::QuietLogger;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::make_unique<ClusterState>(testing::QuietStateOptions());
    state_->UpsertNode(NodeJson("n1", 2, "A100", 40960));
    ExtenderOptions eo;
    eo.logger = QuietLogger();
    auto e = Extender::Create(*state_, binder_, eo);
    ASSERT_TRUE(e.ok());
    extender_ = std::move(e).value();
  }
  // Starts a server on a free port; `port_` is set.
  std::unique_ptr<ExtenderServer> Serve(ServerOptions o = {}) {
    o.logger = QuietLogger();
    auto server = std::make_unique<ExtenderServer>(*extender_, o);
    auto port = server->Start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    port_ = port.ok() ? *port : 0;
    return server;
  }
  std::unique_ptr<ClusterState> state_;
  testing::FakeBinder binder_;
  std::unique_ptr<Extender> extender_;
  int port_ = 0;
};

TEST_F(ServerTest, ClaimPodVerbsHaveAPrefixOfTheirOwn) {
  auto server = Serve();
  ASSERT_GT(port_, 0);
  httplib::Client client("127.0.0.1", port_);
  state_->UpsertSlice(testing::SliceJson("n1", {0, 1}));
  state_->UpsertClaim(testing::ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}));
  const json claim_pod = testing::WithClaims(PodJson("ns", "p", {{"main"}}), {"c"});
  auto scored = client.Post("/dra/prioritize", FilterBody(claim_pod, {"n1"}), "application/json");
  ASSERT_TRUE(scored);
  EXPECT_EQ(scored->status, 200);
  EXPECT_EQ(scored->body, R"([{"Host":"n1","Score":10}])");
  // A pod without claims: no opinion.
  auto other = client.Post("/dra/prioritize", FilterBody(PodJson("ns", "q", {{"main"}}), {"n1"}), "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->body, "[]");
  auto filtered = client.Post("/dra/filter", FilterBody(claim_pod, {"n1"}), "application/json");
  ASSERT_TRUE(filtered);
  EXPECT_EQ(json::parse(filtered->body)["NodeNames"], json({"n1"}));
  EXPECT_EQ(client.Post("/dra/bind", "{}", "application/json")->status, 404);
  // The two entries cannot share a prefix.
  ServerOptions same;
  same.prefix = "/dra";
  ExtenderServer clash(*extender_, same);
  EXPECT_EQ(clash.Start("127.0.0.1", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ServerTest, VerbsRoundTripOverHttp) {
  auto server = Serve();
  ASSERT_GT(port_, 0);
  EXPECT_EQ(server->port(), port_);
  httplib::Client client("127.0.0.1", port_);
  const json pod = PodJson("ns", "p", {{"main", 1, 8192, 30}});
  auto filter = client.Post("/filter", FilterBody(pod, {"n1", "n2"}), "application/json");
  ASSERT_TRUE(filter);
  EXPECT_EQ(filter->status, 200);
  EXPECT_EQ(filter->get_header_value("Content-Type"), "application/json");
  json f = json::parse(filter->body);
  EXPECT_EQ(f["NodeNames"], json({"n1"}));
  EXPECT_TRUE(f["FailedNodes"].contains("n2"));

  auto prioritize = client.Post("/prioritize", FilterBody(pod, {"n1"}), "application/json");
  ASSERT_TRUE(prioritize);
  EXPECT_EQ(prioritize->body, R"([{"Host":"n1","Score":10}])");

  auto bind = client.Post("/bind", BindBody("ns", "p", "uid-ns-p", "n1"), "application/json");
  ASSERT_TRUE(bind);
  EXPECT_EQ(bind->status, 200);
  EXPECT_EQ(bind->body, R"({"Error":""})");
  EXPECT_EQ(binder_.calls().size(), 1u);
}

TEST_F(ServerTest, PreemptVerbAnswersMetaVictimsByUid) {
  // n1's GPU 0 holds a pod of priority 0 with 90 %; the preemptor needs 50 %
  // of GPU 0 or 1, and GPU 1 is full with a pod of priority 10.
  auto hold = [&](const std::string& name, int gpu, int core, int priority) {
    json pod = PodJson("ns", name, {{"main", 1, 4096, core}});
    pod["spec"]["priority"] = priority;
    core::Assignment a;
    a.node = "n1";
    core::ContainerAssignment ca;
    ca.name = "main";
    core::GpuShare share;
    share.index = gpu;
    share.uuid = testing::GpuUuid("n1", gpu);
    share.mem_mib = 4096;
    share.core_milli = core * 10;
    ca.gpus.push_back(share);
    a.containers.push_back(ca);
    state_->UpsertPod(testing::BoundPodJson(pod, a));
  };
  hold("low", 0, 90, 0);
  hold("mid", 1, 100, 10);
  json preemptor = PodJson("ns", "p", {{"main", 1, 8192, 50}});
  preemptor["spec"]["priority"] = 5;
  auto server = Serve();
  httplib::Client client("127.0.0.1", port_);
  const json args = {{"Pod", preemptor},
                     {"NodeNameToMetaVictims", {{"n1", {{"Pods", json::array()}, {"NumPDBViolations", 2}}},
                                                {"gone", {{"Pods", json::array()}, {"NumPDBViolations", 0}}}}}};
  auto r = client.Post("/preempt", args.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(r->body, R"({"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"uid-ns-low"}],"NumPDBViolations":2}}})");
  // Full Pods (not nodeCacheCapable) are read by metadata.uid.
  json full = json::parse(R"({"NodeNameToVictims":{"n1":{"Pods":[{"metadata":{"uid":"uid-ns-low"}}]}}})");
  full["Pod"] = preemptor;
  r = client.Post("/preempt", full.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"uid-ns-low"}],"NumPDBViolations":0}}})");
  // Nothing of lower priority frees enough: no node.
  preemptor["spec"]["priority"] = 0;
  r = client.Post("/preempt", json({{"Pod", preemptor}, {"NodeNameToMetaVictims", {{"n1", nullptr}}}}).dump(),
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"NodeNameToMetaVictims":{}})");
  auto bad = client.Post("/preempt", R"({"Pod":{},"NodeNameToMetaVictims":{"n1":{"Pods":[{}]}}})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("without a UID"), std::string::npos) << bad->body;
}

TEST_F(ServerTest, ErrorsAndHealth) {
  auto server = Serve();
  httplib::Client client("127.0.0.1", port_);
  auto bad = client.Post("/filter", "not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("not valid JSON"), std::string::npos) << bad->body;
  auto missing = client.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto post_missing = client.Post("/filterx", "{}", "application/json");
  ASSERT_TRUE(post_missing);
  EXPECT_EQ(post_missing->status, 404);
  auto wrong = client.Get("/filter");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST");
  auto wrong2 = client.Post("/healthz", "", "text/plain");
  ASSERT_TRUE(wrong2);
  EXPECT_EQ(wrong2->status, 405);
  EXPECT_EQ(wrong2->get_header_value("Allow"), "GET");
  auto del = client.Delete("/bind");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
}

TEST_F(ServerTest, ReadyzFollowsTheInjectedCheck) {
  std::atomic<bool> synced{false};
  ServerOptions o;
  o.ready = [&]() -> Status {
    if (!synced.load()) return Status(StatusCode::kUnavailable, "pod informer has not synced");
    return Status();
  };
  auto server = Serve(o);
  httplib::Client client("127.0.0.1", port_);
  auto r = client.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "not ready: pod informer has not synced\n");
  synced = true;
  r = client.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, PrefixAndBodyLimit) {
  ServerOptions o;
  o.prefix = "/tessera/";
  o.max_body_bytes = 4096;
  auto server = Serve(o);
  httplib::Client client("127.0.0.1", port_);
  const std::string body = FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), {"n1"});
  auto r = client.Post("/tessera/filter", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = client.Post("/filter", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = client.Post("/tessera/filter", std::string(8192, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST_F(ServerTest, StartStopAndFixedPorts) {
  auto server = Serve();
  const int port = port_;
  EXPECT_EQ(server->Start("127.0.0.1", 0).status().code(), StatusCode::kFailedPrecondition);
  server->Stop();
  server->Stop();  // idempotent
  EXPECT_EQ(server->port(), 0);
  // The same port can be bound again, by a fixed number.
  auto again = server->Start("127.0.0.1", port);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, port);
  // A second server cannot take it.
  ServerOptions quiet;
  quiet.logger = QuietLogger();
  ExtenderServer other(*extender_, quiet);
  const auto taken = other.Start("127.0.0.1", port);
  EXPECT_EQ(taken.status().code(), StatusCode::kUnavailable);
  // The reason is the kernel's, not just "cannot listen".
  EXPECT_NE(taken.status().message().find("Address already in use"), std::string::npos) << taken.status().ToString();
  httplib::Client client("127.0.0.1", port);
  auto r = client.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, VerbRepliesAreNotCompressed) {
  // Go's HTTP client (kube-scheduler's) always accepts gzip; replies of a
  // few hundred bytes go as they are.
  auto server = Serve();
  httplib::Client client("127.0.0.1", port_);
  client.set_decompress(false);
  const httplib::Headers gzip = {{"Accept-Encoding", "gzip"}};
  auto filter = client.Post("/filter", gzip, FilterBody(PodJson("ns", "p", {{"main", 1, 8192, 30}}), {"n1"}),
                            "application/json");
  ASSERT_TRUE(filter);
  EXPECT_EQ(filter->status, 200);
  EXPECT_FALSE(filter->has_header("Content-Encoding"));
  EXPECT_EQ(filter->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(filter->body)["NodeNames"], json({"n1"}));
  auto bind = client.Post("/bind", gzip, BindBody("ns", "p", "uid-ns-p", "n1"), "application/json");
  ASSERT_TRUE(bind);
  EXPECT_FALSE(bind->has_header("Content-Encoding"));
  EXPECT_EQ(json::parse(bind->body)["Error"], "");
}

TEST_F(ServerTest, FilterIsAnsweredWhileBindsWaitOnTheApiServer) {
  // Binds that hang on the API server hold a connection and a thread each,
  // more of them than the threads kept ready: a filter call is still
  // answered at once, on a thread started for it.
  constexpr int kBinds = 12;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int waiting = 0;
  binder_.on_bind = [&](const testing::FakeBinder::Call&) {
    std::unique_lock lock(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  ServerOptions o;
  o.min_threads = 2;
  o.max_threads = 64;
  auto server = Serve(o);
  for (int i = 0; i < kBinds; ++i) state_->UpsertPod(PodJson("ns", "b" + std::to_string(i), {{"main", 1, 1024, 5}}));
  std::vector<std::thread> binds;
  for (int i = 0; i < kBinds; ++i) {
    binds.emplace_back([this, i] {
      httplib::Client client("127.0.0.1", port_);
      const std::string name = "b" + std::to_string(i);
      auto r = client.Post("/bind", BindBody("ns", name, "uid-ns-" + name, "n1"), "application/json");
      EXPECT_TRUE(r && r->status == 200 && json::parse(r->body)["Error"] == "") << name;
    });
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return waiting == kBinds; })) << waiting;
  }
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  auto filter = client.Post("/filter", FilterBody(PodJson("ns", "f", {{"main", 1, 1024, 5}}), {"n1"}),
                            "application/json");
  ASSERT_TRUE(filter) << "the filter call waited behind the binds";
  EXPECT_EQ(filter->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& t : binds) t.join();
  EXPECT_EQ(binder_.calls().size(), static_cast<size_t>(kBinds));
}

TEST_F(ServerTest, TlsNeedsLoadableFiles) {
  ServerOptions o;
  o.tls_cert_file = "/nonexistent/cert.pem";
  o.tls_key_file = "/nonexistent/key.pem";
  o.logger = QuietLogger();
  ExtenderServer server(*extender_, o);
  EXPECT_EQ(server.Start("127.0.0.1", 0).status().code(), StatusCode::kInvalidArgument);
}

#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
TEST_F(ServerTest, ServesHttpsWithACertificate) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera-server-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " + key +
                          " -out " + cert + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "openssl is not available to make a certificate";
  }
  ServerOptions o;
  o.tls_cert_file = cert;
  o.tls_key_file = key;
  auto server = Serve(o);
  httplib::SSLClient client("127.0.0.1", port_);
  client.enable_server_certificate_verification(false);
  auto r = client.Post("/filter", FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), {"n1"}), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["NodeNames"], json({"n1"}));
  server->Stop();
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace tessera::scheduler
