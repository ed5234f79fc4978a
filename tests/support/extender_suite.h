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

#include "kube/client.h"
#include "tests/support/cluster_env.h"
#include "tests/support/process.h"

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

  static inline ClusterEnv* env_ = nullptr;
  static inline ChildProcess* extender_ = nullptr;
  std::optional<kube::Client> client_;
  std::string group_, ns_;
};

}  // namespace tessera::testing
