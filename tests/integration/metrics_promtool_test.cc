// `promtool check metrics` on what a running tessera-scheduler and
// tessera-node serve on /metrics, against the loopback cluster: the
// scheduler after kube-scheduler has filtered, scored and bound a pod
// through it (and one malformed call), the node agent in simulated mode.
// promtool comes from Debian's `prometheus` package (scripts/setup.sh); its
// path arrives in TESSERA_PROMTOOL.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "node/inventory.h"
#include "tests/support/cluster_env.h"
#include "tests/support/http_probe.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

struct CheckResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `promtool check metrics` on `page`.
CheckResult PromtoolCheck(const std::string& promtool, const std::string& page, const std::string& dir) {
  const std::string file = dir + "/page.txt";
  std::ofstream(file) << page;
  CheckResult r;
  FILE* pipe = ::popen(("'" + promtool + "' check metrics < '" + file + "' 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class MetricsPromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* promtool = std::getenv("TESSERA_PROMTOOL");
    ASSERT_TRUE(promtool != nullptr && *promtool != '\0') << "TESSERA_PROMTOOL is not set; run through ctest";
    promtool_ = promtool;
    auto env = ClusterEnv::FromEnvironment();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_ = env.value();
    auto client = env_.MakeClient();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(std::move(client).value());
    id_ = "promtool-" + std::to_string(::getpid());
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-promtool-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(CreateNamespace(*client_, id_).ok());
    nodes_ = UniformSimNodes(id_, 1, 2, "PromGPU", 24576);
    nodes_[0].labels["tessera.io/e2e-group"] = id_;
    ASSERT_TRUE(CreateSimNodes(*client_, nodes_).ok());
  }
  void TearDown() override {
    if (client_) {
      (void)DeleteNamespace(*client_, id_);
      (void)DeleteSimNodes(*client_, nodes_);
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  void ExpectClean(const std::string& who, const std::string& page) {
    const CheckResult r = PromtoolCheck(promtool_, page, dir_);
    EXPECT_EQ(r.exit_code, 0) << who << ": promtool check metrics failed:\n" << r.output << "\n--- page:\n" << page;
    EXPECT_EQ(r.output, "") << who << ": promtool reported problems:\n" << r.output << "\n--- page:\n" << page;
  }

  std::string promtool_;
  ClusterEnv env_;
  std::optional<kube::Client> client_;
  std::string id_, dir_;
  std::vector<SimNode> nodes_;
};

TEST_F(MetricsPromtoolTest, SchedulerMetricsPassPromtool) {
  auto extender = env_.StartExtender({"--identity", id_});
  ASSERT_TRUE(extender.ok()) << extender.status().ToString();
  // kube-scheduler filters, scores and binds this pod through the extender.
  ASSERT_TRUE(client_->Create("/api/v1/namespaces/" + id_ + "/pods",
                              GpuPod(id_, "p0", {{"main", 1, 4096, 25}}, {{"tessera.io/e2e-group", id_}}))
                  .ok());
  auto pod = WaitForPod(*client_, id_, "p0", IsBound, seconds(60));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  // And one call kube-scheduler would never make, so the error series has a sample.
  httplib::Client http("127.0.0.1", env_.extender_port);
  auto bad = http.Post("/filter", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);

  auto page = FetchMetrics(env_.extender_port);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_NE(page->find(R"(tessera_scheduler_decisions_total{verb="bind",outcome="bound"} )"), std::string::npos)
      << *page;
  EXPECT_NE(page->find(R"(tessera_scheduler_decisions_total{verb="filter",outcome="bad_request"} 1)"),
            std::string::npos)
      << *page;
  ExpectClean("tessera-scheduler", *page);
}

TEST_F(MetricsPromtoolTest, NodeMetricsPassPromtool) {
  const std::string gpu_file = dir_ + "/gpus.yaml";
  std::ofstream(gpu_file) << node::FormatGpuFile(nodes_[0].info.gpus);
  const int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  std::filesystem::create_directories(dir_ + "/dp");
  std::filesystem::create_directories(env_.dir + "/logs");
  // No kubelet: the agent serves its socket, retries registering, and serves /metrics all the same.
  auto agent = ChildProcess::Start({env_.bin_dir + "/tessera-node", "--node-name", nodes_[0].info.name,
                                    "--kubeconfig", env_.kubeconfig, "--device-plugin-dir", dir_ + "/dp",
                                    "--simulated-gpus", gpu_file, "--pod-resources-socket", dir_ + "/absent.sock",
                                    "--metrics-bind-address", "127.0.0.1:" + std::to_string(port)},
                                   env_.dir + "/logs/tessera-node-" + id_ + ".log");
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  Result<std::string> page = Status(StatusCode::kUnavailable, "not scraped");
  for (int i = 0; i < 100 && !page.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    page = FetchMetrics(port);
  }
  ASSERT_TRUE(page.ok()) << page.status().ToString() << "; see " << env_.dir << "/logs/tessera-node-" << id_ << ".log";
  EXPECT_NE(page->find("tessera_node_allocations_total 0\n"), std::string::npos) << *page;
  ExpectClean("tessera-node", *page);
  agent->Stop(SIGTERM);
}

}  // namespace
}  // namespace tessera::testing
