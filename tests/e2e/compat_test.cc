// End-to-end for the compatibility front ends where no kubelet is needed: a
// pod mixing gpushare's and Tessera's vocabularies is refused at scheduling,
// naming both, on a simulated node whose tessera-node serves both front ends
// (kubelet stand-ins). The unchanged gpushare and HAMi manifests run on a real
// node, with their variables and limits checked inside the containers, in
// e2e_real_node_examples_test.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "kube/paths.h"
#include "tests/kubelet_sim/farm_suite.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr int64_t kGpuMemMiB = 16384;  // 16 GiB per simulated GPU

// A YAML node as JSON: integers stay numbers (as kubectl sends them), other
// scalars become strings.
json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string text = node.Scalar();
      if (node.Tag() != "!" && !text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
        return std::stoll(text);
      }
      return text;
    }
    default:
      return nullptr;
  }
}

Result<json> LoadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return ToJson(YAML::Load(text.str()));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": " + e.what());
  }
}

class CompatTest : public FarmSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-compat", {"--gpushare", "true", "--hami", "true"}); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override { OpenNamespace("compat", 24); }

  // One node of `gpus` 16 GiB GPUs whose tessera-node serves both front ends.
  void StartFarm(int gpus) {
    FarmSuite::StartFarm(UniformSimNodes(group_, 1, gpus, "A100", kGpuMemMiB, 4),
                         ClusterFarmOptions({"--gpushare", "true", "--hami", "true"},
                                            {"aliyun.com/gpu-mem", "nvidia.com/gpu"}));
  }
};

TEST_F(CompatTest, MixedVocabulariesAreRejectedWithBothNames) {
  StartFarm(1);
  auto pod = LoadManifest("examples/compat/gpushare-pod.yaml");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  (*pod)["metadata"]["name"] = "mixed";
  (*pod)["metadata"]["namespace"] = ns_;
  (*pod)["spec"]["nodeSelector"] = GroupSelector();
  (*pod)["spec"]["containers"][0]["resources"]["limits"]["tessera.io/gpu-mem"] = "3072";
  ASSERT_TRUE(client_->Create(kube::PodsPath(ns_), *pod).ok());
  auto names_both = [](const std::string& e) {
    return e.find("aliyun.com/gpu-mem") != std::string::npos && e.find("tessera.io/gpu-mem") != std::string::npos;
  };
  const auto events = WaitForEvents("mixed", "FailedScheduling", seconds(30), names_both);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), names_both)) << ::testing::PrintToString(events);
  auto now = client_->Get(kube::PodPath(ns_, "mixed"));
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE(IsBound(*now));
}

}  // namespace
}  // namespace tessera::testing
