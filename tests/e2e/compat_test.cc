// End-to-end for the compatibility front ends: manifests written for Alibaba
// gpushare and for HAMi, applied unchanged (the shipped examples in
// examples/compat/), go through the real kube-scheduler, tessera-scheduler
// (with --gpushare and --hami) and per simulated node a real tessera-node
// serving aliyun.com/gpu-mem and nvidia.com/gpu beside tessera.io/gpu, with a
// kubelet stand-in per resource. Each pod must reach Running with the
// variables its own project would have given it, and Tessera's limits.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "core/codec.h"
#include "kube/paths.h"
#include "node/slots.h"
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

  // The shipped example at `path`, as it is, placed in this test's namespace
  // and on this test's node (a nodeSelector; its resources stay untouched).
  Result<json> Apply(const std::string& path) {
    TESSERA_ASSIGN_OR_RETURN(json pod, LoadManifest(path));
    pod["metadata"]["namespace"] = ns_;
    pod["spec"]["nodeSelector"] = GroupSelector();
    pod["spec"]["terminationGracePeriodSeconds"] = 0;
    TESSERA_RETURN_IF_ERROR(client_->Create(kube::PodsPath(ns_), pod).status());
    return pod;
  }

  // Waits for Running; the pod, its assignment and the env the kubelet
  // stand-in recorded for `container`.
  struct Admitted {
    json pod;
    core::Assignment assignment;
    json allocation;  // deviceIDs, envs, mounts
  };
  Result<Admitted> RunningPod(const std::string& name, const std::string& container) {
    TESSERA_ASSIGN_OR_RETURN(json pod, Settled(name));
    if (Phase(pod) != "Running") return FailedPrecondition(name + " did not run: " + pod["status"].dump());
    Admitted out;
    out.pod = pod;
    TESSERA_ASSIGN_OR_RETURN(out.assignment, core::DecodeAssignment(Annotation(pod, std::string(core::kAssignmentAnnotation))));
    const std::string recorded = Annotation(pod, kSimAllocationsAnnotation);
    if (recorded.empty()) return FailedPrecondition(name + ": the kubelet recorded no allocation");
    const json all = json::parse(recorded);
    if (!all.contains(container)) return FailedPrecondition(name + ": nothing allocated to " + container);
    out.allocation = all[container];
    return out;
  }
};

std::string Env(const json& allocation, const std::string& name) {
  const json& envs = allocation["envs"];
  return envs.contains(name) ? envs[name].get<std::string>() : "<unset>";
}

TEST_F(CompatTest, GpushareManifestRunsWithAliyunVariables) {
  StartFarm(2);
  // The Node advertises gpushare's unit, GiB, so kube-scheduler and the
  // kubelet count aliyun.com/gpu-mem as under gpushare.
  auto node = client_->Get(kube::NodePath(farm_->node(0).info.name));
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ((*node)["status"]["capacity"].value("aliyun.com/gpu-mem", ""), "32");

  ASSERT_TRUE(Apply("examples/compat/gpushare-pod.yaml").ok());
  auto admitted = RunningPod("gpushare-tf", "tf");
  ASSERT_TRUE(admitted.ok()) << admitted.status().ToString() << "; see " << farm_->AgentLog(0);
  ASSERT_EQ(admitted->assignment.containers.size(), 1u);
  const auto& gpus = admitted->assignment.containers[0].gpus;
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].mem_mib, 3 * 1024);

  const json& a = admitted->allocation;
  EXPECT_EQ(Env(a, "ALIYUN_COM_GPU_MEM_DEV"), "16");
  EXPECT_EQ(Env(a, "ALIYUN_COM_GPU_MEM_CONTAINER"), "3");
  EXPECT_EQ(Env(a, "ALIYUN_COM_GPU_MEM_POD"), "3");
  EXPECT_EQ(Env(a, "ALIYUN_COM_GPU_MEM_IDX"), std::to_string(gpus[0].index));
  // Tessera's own limits and GPU as well.
  EXPECT_EQ(Env(a, "NVIDIA_VISIBLE_DEVICES"), gpus[0].uuid);
  EXPECT_EQ(Env(a, "TESSERA_GPU_MEM_LIMIT_MIB_0"), "3072");
  EXPECT_EQ(Env(a, "TESSERA_GPU_MEM_FRACTION"), "0.1875");
  // Memory queries show the card's total, so CONTAINER / DEV of it is the share.
  EXPECT_EQ(Env(a, "TESSERA_GPU_MEM_VIEW"), "device");
  // The kubelet handed over 3 GiB units, all on the assigned GPU.
  ASSERT_EQ(a["deviceIDs"].size(), 3u);
  for (const auto& id : a["deviceIDs"]) {
    auto gpu = node::SlotGpu(id.get<std::string>());
    ASSERT_TRUE(gpu.ok());
    EXPECT_EQ(*gpu, gpus[0].uuid) << id;
  }
  EXPECT_EQ(Annotation(admitted->pod, "tessera.io/allocated"), "tf");
}

TEST_F(CompatTest, HamiManifestRunsWithItsLimits) {
  StartFarm(2);
  ASSERT_TRUE(Apply("examples/compat/hami-pod.yaml").ok());
  auto admitted = RunningPod("hami-infer", "infer");
  ASSERT_TRUE(admitted.ok()) << admitted.status().ToString() << "; see " << farm_->AgentLog(0);
  const auto& gpus = admitted->assignment.containers.at(0).gpus;
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].mem_mib, 3000);
  EXPECT_EQ(gpus[0].core_milli, 300);

  const json& a = admitted->allocation;
  EXPECT_EQ(Env(a, "NVIDIA_VISIBLE_DEVICES"), gpus[0].uuid);
  EXPECT_EQ(Env(a, "TESSERA_GPU_MEM_LIMIT_MIB_0"), "3000");
  EXPECT_EQ(Env(a, "TESSERA_GPU_CORE_PERCENT_0"), "30");
  EXPECT_EQ(Env(a, "CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(Env(a, "CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(Env(a, "ALIYUN_COM_GPU_MEM_DEV"), "<unset>");
  EXPECT_EQ(Env(a, "TESSERA_GPU_MEM_VIEW"), "<unset>");
  ASSERT_EQ(a["deviceIDs"].size(), 1u);
  auto gpu = node::SlotGpu(a["deviceIDs"][0].get<std::string>());
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ(*gpu, gpus[0].uuid);
}

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
