#include "node/handout.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/codec.h"
#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using nlohmann::json;

// Two 16 GiB GPUs, four slots each.
std::vector<core::GpuInfo> Gpus() { return testing::TwoGpus(); }

// A pod bound to n1 whose container "main" asks for `mem` MiB and `core`
// percent of one GPU and is assigned `shares` (index, MiB, core milli).
json Pod(const std::string& name, int64_t mem, int core, const std::vector<std::tuple<int, int64_t, int64_t>>& shares,
         const std::string& allocated = "") {
  core::ContainerAssignment ca{"main", {}};
  for (const auto& [i, m, c] : shares) ca.gpus.push_back({i, "GPU-" + std::to_string(i), m, c});
  json annotations = {{"tessera.io/assignment", *core::EncodeAssignment(core::Assignment{"n1", {ca}})}};
  if (!allocated.empty()) annotations["tessera.io/allocated"] = allocated;
  json limits = {{"tessera.io/gpu", "1"}};
  if (mem > 0) limits["tessera.io/gpu-mem"] = std::to_string(mem);
  if (core > 0) limits["tessera.io/gpu-core"] = std::to_string(core);
  return {{"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", "uid-" + name}, {"annotations", annotations}}},
          {"spec", {{"nodeName", "n1"}, {"containers", json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}},
          {"status", {{"phase", "Running"}}}};
}

// The pods as the node agent's pod cache hands them out: decoded once.
std::shared_ptr<const core::PodView> View(const json& pod) {
  return std::make_shared<const core::PodView>(core::DecodePod(pod, core::ResourceNames{}).value());
}

Status CheckHandOut(const json& pod, const std::vector<json>& node_pods, const std::string& node,
                    const std::vector<core::GpuInfo>& gpus, const core::ResourceNames&) {
  std::vector<std::shared_ptr<const core::PodView>> views;
  for (const json& p : node_pods) views.push_back(View(p));
  return node::CheckHandOut(*View(pod), views, node, gpus);
}

Status Check(const json& pod, const std::vector<json>& others) {
  std::vector<json> all = others;
  all.push_back(pod);
  return CheckHandOut(pod, all, "n1", Gpus(), core::ResourceNames{});
}

TEST(HandOutTest, TheSchedulersAssignmentIsHandedOut) {
  const json pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  EXPECT_TRUE(Check(pod, {}).ok()) << Check(pod, {}).ToString();
  // Beside others that leave room.
  EXPECT_TRUE(Check(pod, {Pod("a", 8192, 70, {{0, 8192, 700}}, "main")}).ok());
}

TEST(HandOutTest, AnAssignmentLargerThanTheRequestIsRefused) {
  // The hole this closes: 1024 MiB / 5 % asked, 15360 MiB / 100 % written by hand.
  const Status st = Check(Pod("forged", 1024, 5, {{0, 15360, 1000}}), {});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("pod ns/forged"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("is given 15360 MiB and 100 percent of GPU 0, but asks for 1024 MiB and 5 percent"),
            std::string::npos)
      << st.message();
  // Smaller than asked is not the scheduler's either.
  EXPECT_EQ(Check(Pod("small", 4096, 30, {{0, 1024, 300}}), {}).code(), StatusCode::kPermissionDenied);
}

TEST(HandOutTest, AssignmentsOnPodsThatAskForNoGpuAreRefused) {
  json pod = Pod("plain", 1024, 5, {{0, 1024, 50}});
  pod["spec"]["containers"][0].erase("resources");
  const Status st = Check(pod, {});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("asks for none"), std::string::npos) << st.message();
}

TEST(HandOutTest, ACopiedAssignmentThatOverbooksTheGpuIsRefused) {
  // Three pods of 12 GiB / 40 % copied onto one 16 GiB GPU: the first fits,
  // the second goes over the memory and the third over the compute.
  const json first = Pod("first", 12288, 40, {{1, 12288, 400}}, "main");
  const Status mem = Check(Pod("copy", 12288, 40, {{1, 12288, 400}}), {first});
  EXPECT_EQ(mem.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(mem.message().find("12288 MiB of GPU 1 (GPU-1), 12288 MiB of its 16384 MiB already handed to 1 container"),
            std::string::npos)
      << mem.message();
  const Status core = Check(Pod("copy", 1024, 40, {{1, 1024, 400}}),
                            {first, Pod("second", 1024, 40, {{1, 1024, 400}}, "main")});
  EXPECT_EQ(core.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(core.message().find("40 percent of GPU 1 (GPU-1)'s compute, 80 percent of it already handed"),
            std::string::npos)
      << core.message();
}

TEST(HandOutTest, SlotsAreCounted) {
  std::vector<json> four;
  for (int i = 0; i < 4; ++i) four.push_back(Pod("s" + std::to_string(i), 1024, 10, {{0, 1024, 100}}, "main"));
  const Status st = Check(Pod("fifth", 1024, 10, {{0, 1024, 100}}), four);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("its limit is 4 at once"), std::string::npos) << st.message();
}

TEST(HandOutTest, OnlyHandedOutLivePodsOfThisNodeCount) {
  const json full = Pod("full", 16384, 100, {{0, 16384, 1000}}, "main");
  const json pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  json finished = full;
  finished["status"]["phase"] = "Succeeded";
  json failed = full;
  failed["status"]["phase"] = "Failed";
  json not_yet = Pod("full", 16384, 100, {{0, 16384, 1000}});  // bound, not allocated: nothing handed out yet
  json elsewhere = full;
  elsewhere["spec"]["nodeName"] = "n2";
  EXPECT_TRUE(Check(pod, {finished, failed, not_yet, elsewhere}).ok());
  // Being deleted still counts: its containers may still run.
  json deleting = full;
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_EQ(Check(pod, {deleting}).code(), StatusCode::kPermissionDenied);
  // The pod itself is never counted twice (its later containers).
  json self_allocated = Pod("p", 4096, 30, {{0, 4096, 300}}, "main");
  EXPECT_TRUE(CheckHandOut(pod, {self_allocated}, "n1", Gpus(), core::ResourceNames{}).ok());
}

TEST(HandOutTest, GpusMustBeThisNodesAndEachOnce) {
  EXPECT_EQ(Check(Pod("far", 1024, 10, {{7, 1024, 100}}), {}).code(), StatusCode::kPermissionDenied);
  json wrong_uuid = Pod("wrong", 1024, 10, {{0, 1024, 100}});
  core::ContainerAssignment ca{"main", {{0, "GPU-elsewhere", 1024, 100}}};
  wrong_uuid["metadata"]["annotations"]["tessera.io/assignment"] = *core::EncodeAssignment(core::Assignment{"n1", {ca}});
  const Status st = Check(wrong_uuid, {});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("as GPU-elsewhere, but GPU 0 is GPU-0"), std::string::npos) << st.message();
}

TEST(HandOutTest, ContainersMayNotSetTheVariablesTheAgentGives) {
  // A pod that sets its own limit beside the scheduler's assignment: the
  // runtime might let it win, so no share is handed out.
  json pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "HOME"}, {"value", "/root"}},
                                                     {{"name", "TESSERA_GPU_MEM_LIMIT_MIB_0"}, {"value", "16384"}}});
  Status st = Check(pod, {});
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("pod ns/p: no GPU share is handed out: its container \"main\" sets "
                              "TESSERA_GPU_MEM_LIMIT_MIB_0 in its spec"),
            std::string::npos)
      << st.message();
  // An init container counts too; so do the GPU list and the front ends' names.
  pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  pod["spec"]["initContainers"] = json::array({{{"name", "setup"}, {"env", json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}})}}});
  st = Check(pod, {});
  EXPECT_NE(st.message().find("container \"setup\" sets NVIDIA_VISIBLE_DEVICES"), std::string::npos) << st.message();
  // Other variables are the pod's own business.
  pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "CUDA_VISIBLE_DEVICES"}, {"value", "0"}},
                                                     {{"name", "TESSERA"}, {"value", "x"}}});
  EXPECT_TRUE(Check(pod, {}).ok()) << Check(pod, {}).ToString();
}

TEST(HandOutTest, ReservedVariablesAreWhatAllocateGivesAndWhatEnforcementReads) {
  for (const char* name : {"TESSERA_GPU_MEM_LIMIT_MIB_0", "TESSERA_GPU_CORE_PERCENT", "TESSERA_REGION_DIR",
                           "TESSERA_CUDA_DISABLE", "TESSERA_MANAGED_MEMORY", "TESSERA_GPU_CONTEXT_MIB",
                           "NVIDIA_VISIBLE_DEVICES", "ALIYUN_COM_GPU_MEM_IDX", "CUDA_DEVICE_MEMORY_LIMIT_0",
                           "CUDA_DEVICE_SM_LIMIT", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_PIPE_DIRECTORY"}) {
    EXPECT_TRUE(IsReservedVariable(name)) << name;
  }
  // How much the library logs is the pod's own choice (docs/user-guide.md).
  for (const char* name : {"TESSERA_LOG_LEVEL", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "TESSERA", "PATH"}) {
    EXPECT_FALSE(IsReservedVariable(name)) << name;
  }
}

TEST(HandOutTest, AWholeGpuAskedWithoutASizeMayHoldTheCard) {
  json whole = Pod("whole", 0, 0, {{1, 16384, 1000}});
  EXPECT_TRUE(Check(whole, {}).ok()) << Check(whole, {}).ToString();
}

}  // namespace
}  // namespace tessera::node
