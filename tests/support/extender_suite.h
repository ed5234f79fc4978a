// A gtest fixture for e2e suites on the loopback cluster: one tessera-scheduler
// (kube-scheduler's extender) for the whole suite, and per test an API client
// and a namespace named after the test, so tests do not see each other's pods.
//
//   class MyTest : public ExtenderSuite {
//     static void SetUpTestSuite() { StartExtender("e2e-mine"); }
//     static void TearDownTestSuite() { StopExtender(); }
//     void SetUp() override { OpenNamespace("e2e-mine", 20); }
//     void TearDown() override { CloseNamespace(); }
//   };
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include <map>

#include "core/codec.h"
#include "kube/client.h"
#include "tests/support/cluster_env.h"
#include "tests/support/process.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {

class ExtenderSuite : public ::testing::Test {
 protected:
  // Reads the cluster from the environment and starts tessera-scheduler with
  // leader-election identity `identity` (and `flags`) on the extender port.
  static void StartExtender(const std::string& identity, std::vector<std::string> flags = {}) {
    auto env = ClusterEnv::FromEnvironment();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_ = new ClusterEnv(env.value());
    flags.insert(flags.begin(), {"--identity", identity});
    auto extender = env_->StartExtender(flags);
    ASSERT_TRUE(extender.ok()) << extender.status().ToString();
    extender_ = new ChildProcess(std::move(extender).value());
  }
  static void StopExtender() {
    delete extender_;
    extender_ = nullptr;
    delete env_;
    env_ = nullptr;
  }

  // The client, and group_ = ns_ = "<prefix>-<first name_chars of the test
  // name>-<pid>" in lower case (a valid namespace and label value), created.
  void OpenNamespace(const std::string& prefix, size_t name_chars) {
    ASSERT_NE(env_, nullptr);
    auto client = env_->MakeClient();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(std::move(client).value());
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    group_ = prefix + "-" + std::string(info->name()).substr(0, name_chars) + "-" + std::to_string(::getpid());
    for (auto& c : group_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ns_ = group_;
    ASSERT_TRUE(CreateNamespace(*client_, ns_).ok());
  }
  void CloseNamespace() {
    if (client_) (void)DeleteNamespace(*client_, ns_);
  }

  // The workload tessera's policy learns from (it scores nodes alike until
  // it has seen 32 arrivals): 32 device-plugin pods in ns_, bound to a new
  // node of 16 GPUs outside the group (appended to `nodes`, for the test to
  // delete), a 60 % and a 40 % one per GPU, each asking for 100m CPU, as the
  // pod watch shows them (tessera's own tests' workload: 30 % of a GPU left
  // free is room no pod of it takes).
  void SeedLearnedWorkload(std::vector<SimNode>* nodes) {
    auto seed = UniformSimNodes(group_ + "-seed", 1, 16, "A100", 40960);
    ASSERT_TRUE(CreateSimNodes(*client_, seed).ok());
    nodes->push_back(seed[0]);
    const std::string& node = seed[0].info.name;
    for (int i = 0; i < 32; ++i) {
      const int gpu = i / 2;
      const int percent = i % 2 == 0 ? 60 : 40;
      core::Assignment a{node, {{"main", {{gpu, SimGpuUuid(node, gpu), 1024, percent * 10}}}}};
      nlohmann::json pod = GpuPod(ns_, "seed-" + std::to_string(i), {{"main", 1, 1024, percent}}, {},
                                  {{std::string(core::kAssignmentAnnotation), core::EncodeAssignment(a).value()}});
      pod["spec"]["nodeName"] = node;
      auto made = client_->Create("/api/v1/namespaces/" + ns_ + "/pods", pod);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
    }
  }

  // The extender's /dra/prioritize (the entry asked about every pod) for
  // `pod` over `nodes`, as kube-scheduler asks it: node -> score; empty when
  // it answered no opinion or failed.
  static std::map<std::string, int64_t> EveryPodScores(const nlohmann::json& pod,
                                                       const std::vector<std::string>& nodes) {
    httplib::Client http("127.0.0.1", env_->extender_port);
    const nlohmann::json body = {{"Pod", pod}, {"NodeNames", nodes}};
    auto res = http.Post("/dra/prioritize", body.dump(), "application/json");
    std::map<std::string, int64_t> out;
    if (!res || res->status != 200) return out;
    for (const auto& hp : nlohmann::json::parse(res->body)) out[hp["Host"]] = hp["Score"];
    return out;
  }

  static inline ClusterEnv* env_ = nullptr;
  static inline ChildProcess* extender_ = nullptr;
  std::optional<kube::Client> client_;
  std::string group_, ns_;
};

}  // namespace tessera::testing
