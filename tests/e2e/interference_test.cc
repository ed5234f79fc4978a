// End-to-end interference-aware placement through the real kube-scheduler and
// kube-apiserver: tessera-scheduler runs policy tessera-interference, learns
// how busy each pod's workload is from the tessera.io/usage annotations on
// the pods (written here as tessera-node writes them, since simulated nodes
// run no agent), and places the next pod on the GPU that is idle in fact,
// not the one its requests make look equal.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "core/codec.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/http_probe.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

class InterferenceTest : public ExtenderSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-interference", {"--policy", "tessera-interference"}); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override { OpenNamespace("e2e-intf", 20); }
  void TearDown() override {
    if (!client_) return;
    CloseNamespace();
    (void)DeleteSimNodes(*client_, nodes_);
  }

  Status Submit(const std::string& name, int core) {
    return client_
        ->Create("/api/v1/namespaces/" + ns_ + "/pods",
                 GpuPod(ns_, name, {{"main", 1, 2048, core}}, {{"tessera.io/e2e-group", group_}}))
        .status();
  }
  // Writes pod `name`'s tessera.io/usage as the node agent would: one
  // container "main" on GPU 0 at `utilization`.
  Status Report(const std::string& name, double utilization) {
    core::PodUsage usage;
    usage.at = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
    usage.containers.push_back({"main", {{0, "", 512, utilization}}});
    TESSERA_ASSIGN_OR_RETURN(std::string text, core::EncodeUsage(usage));
    const nlohmann::json patch = {{"metadata", {{"annotations", {{std::string(core::kUsageAnnotation), text}}}}}};
    return client_->Patch("/api/v1/namespaces/" + ns_ + "/pods/" + name, kube::PatchType::kMerge, patch).status();
  }

  std::vector<SimNode> nodes_;
};

TEST_F(InterferenceTest, MeasuredUsageSteersTheNextPodToTheIdleGpu) {
  // Two one-GPU nodes; the first by name wins ties.
  nodes_ = UniformSimNodes(group_ + "-a100", 2, 1, "A100", 40960);
  for (auto& n : nodes_) n.labels["tessera.io/e2e-group"] = group_;
  ASSERT_TRUE(CreateSimNodes(*client_, nodes_).ok());

  // Two 60 % pods: one per GPU (both on one GPU would be 120 %).
  ASSERT_TRUE(Submit("first", 60).ok());
  ASSERT_TRUE(Submit("second", 60).ok());
  std::map<std::string, std::string> on;  // node -> pod
  for (const char* name : {"first", "second"}) {
    auto pod = WaitForPod(*client_, ns_, name, IsBound, std::chrono::seconds(60));
    ASSERT_TRUE(pod.ok()) << name << ": " << pod.status().ToString();
    on[pod.value()["spec"]["nodeName"].get<std::string>()] = name;
  }
  ASSERT_EQ(on.size(), 2u);
  const std::string busy_node = nodes_[0].info.name, idle_node = nodes_[1].info.name;

  // Equal requests, but the pod on the first node runs flat out and the one
  // on the second is nearly idle.
  ASSERT_TRUE(Report(on.at(busy_node), 0.60).ok());
  ASSERT_TRUE(Report(on.at(idle_node), 0.05).ok());
  // Both reports reach the extender through its pod watch.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  uint64_t learned = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto page = FetchMetrics(env_->extender_port);
    if (page.ok() && page.value().find("tessera_scheduler_usage_reports_total{result=\"learned\"} 2") != std::string::npos) {
      learned = 2;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(learned, 2u) << "the extender did not take both usage reports";

  // A 30 % pod: its request would push the busy GPU to 0.9 (over the 0.7
  // ceiling) but the idle one only to 0.35. By requests alone the two GPUs
  // look the same and the first node would win the tie.
  ASSERT_TRUE(Submit("third", 30).ok());
  auto third = WaitForPod(*client_, ns_, "third", IsBound, std::chrono::seconds(60));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third.value()["spec"]["nodeName"], idle_node);

  auto page = FetchMetrics(env_->extender_port);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_NE(page.value().find("tessera_scheduler_workloads_learned 2"), std::string::npos) << page.value();
  EXPECT_TRUE(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_).empty()) << ::testing::PrintToString(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_));
}

}  // namespace
}  // namespace tessera::testing
