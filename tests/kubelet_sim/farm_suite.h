// A gtest fixture for e2e suites that run pods through the whole hand-over:
// ExtenderSuite (one tessera-scheduler per suite, a namespace per test) plus
// the test's own simulated nodes, each with a real tessera-node and a kubelet
// stand-in (NodeFarm), wired to the fixture's cluster: tessera-node from its
// bin dir, logs in its logs/, pid files in its pids/ (cluster-down.sh reaps
// what a crashed test leaves). Every node is labelled kGroupLabel=group_, so
// a pod reaches this test's nodes only with GroupSelector(). TearDown deletes
// the namespace, then stops every farm and deletes its Node objects. What a
// suite adds (agent flags such as --mps or --gpushare, further device-plugin
// resources, node labels) goes in through ClusterFarmOptions and the nodes.
// Thread-safety: the test's thread only, as any fixture.
//
//   class MyTest : public FarmSuite {
//     static void SetUpTestSuite() { StartExtender("e2e-mine"); }
//     static void TearDownTestSuite() { StopExtender(); }
//     void SetUp() override { OpenNamespace("mine", 20); }
//   };
//   TEST_F(MyTest, Runs) { StartFarm(UniformSimNodes(group_, 1, 2, "A100", 40960, 4)); ... }
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "tests/kubelet_sim/node_farm.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {

class FarmSuite : public ExtenderSuite {
 protected:
  // The label that ties a test's nodes to its pods.
  static constexpr const char* kGroupLabel = "tessera.io/e2e-group";

  // Options for a farm on the fixture's cluster: `agent_flags` appended to
  // every tessera-node's, `extra_resources` as in NodeFarmOptions.
  static NodeFarmOptions ClusterFarmOptions(std::vector<std::string> agent_flags = {},
                                            std::vector<std::string> extra_resources = {}) {
    NodeFarmOptions options;
    options.bin_dir = env_->bin_dir;
    options.kubeconfig = env_->kubeconfig;
    options.log_dir = env_->dir + "/logs";
    options.pid_dir = env_->dir + "/pids";
    options.agent_flags = std::move(agent_flags);
    options.extra_resources = std::move(extra_resources);
    return options;
  }

  // Starts `nodes`, each labelled with the group, as a farm the fixture owns
  // until TearDown. nullptr, with a test failure saying why, when it did not
  // start. A test may start several (e.g. nodes whose agents differ in flags).
  NodeFarm* AddFarm(std::vector<SimNode> nodes, NodeFarmOptions options) {
    for (auto& n : nodes) n.labels[kGroupLabel] = group_;
    auto farm = NodeFarm::Start(*client_, std::move(nodes), std::move(options));
    if (!farm.ok()) {
      ADD_FAILURE() << farm.status().ToString();
      return nullptr;
    }
    farms_.push_back(std::move(farm).value());
    return farms_.back().get();
  }
  // AddFarm into farm_, the test's main farm; a fatal failure when it did not start.
  void StartFarm(std::vector<SimNode> nodes, NodeFarmOptions options = ClusterFarmOptions()) {
    farm_ = AddFarm(std::move(nodes), std::move(options));
    ASSERT_NE(farm_, nullptr);
  }

  void TearDown() override {
    if (!client_) return;
    CloseNamespace();
    farm_ = nullptr;
    for (auto& farm : farms_) StopFarm(*client_, farm);
    farms_.clear();
  }

  // The nodeSelector that holds a pod to this test's nodes.
  std::map<std::string, std::string> GroupSelector() const { return {{kGroupLabel, group_}}; }

  // Pauses (or resumes) admission on every node of every farm.
  void PauseKubelets(bool paused) {
    for (auto& farm : farms_) {
      for (size_t i = 0; i < farm->size(); ++i) farm->Kubelet(i).SetPaused(paused);
    }
  }

  // Waits until pod `name` of the test's namespace is Running or Failed (the
  // stand-in admitted it, or refused it); the last pod seen, or the timeout.
  Result<nlohmann::json> Settled(const std::string& name, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    return WaitForPod(*client_, ns_, name, [](const nlohmann::json& p) {
      return Phase(p) == "Running" || Phase(p) == "Failed";
    }, timeout);
  }

  // Polls the messages of pod `name`'s Events with `reason` until one
  // satisfies `match` (by default: any) or `timeout` passes; the last list
  // read either way (empty when there was none).
  std::vector<std::string> WaitForEvents(const std::string& name, const std::string& reason,
                                         std::chrono::seconds timeout,
                                         const std::function<bool(const std::string&)>& match = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      std::vector<std::string> events = PodEvents(*client_, ns_, name, reason);
      for (const auto& e : events) {
        if (!match || match(e)) return events;
      }
      if (std::chrono::steady_clock::now() >= deadline) return events;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  NodeFarm* farm_ = nullptr;  // StartFarm's; owned by farms_

 private:
  std::vector<std::unique_ptr<NodeFarm>> farms_;
};

}  // namespace tessera::testing
