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

// Other pods of the node are the GpuBook's to check (gpu_book_test.cc).
Status Check(const json& pod) { return node::CheckHandOut(*View(pod), Gpus()); }

TEST(HandOutTest, TheSchedulersAssignmentIsHandedOut) {
  const json pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  EXPECT_TRUE(Check(pod).ok()) << Check(pod).ToString();
}

TEST(HandOutTest, AnAssignmentLargerThanTheRequestIsRefused) {
  // The hole this closes: 1024 MiB / 5 % asked, 15360 MiB / 100 % written by hand.
  const Status st = Check(Pod("forged", 1024, 5, {{0, 15360, 1000}}));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("pod ns/forged"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("is given 15360 MiB and 100 percent of GPU 0, but asks for 1024 MiB and 5 percent"),
            std::string::npos)
      << st.message();
  // Smaller than asked is not the scheduler's either.
  EXPECT_EQ(Check(Pod("small", 4096, 30, {{0, 1024, 300}})).code(), StatusCode::kPermissionDenied);
}

TEST(HandOutTest, AssignmentsOnPodsThatAskForNoGpuAreRefused) {
  json pod = Pod("plain", 1024, 5, {{0, 1024, 50}});
  pod["spec"]["containers"][0].erase("resources");
  const Status st = Check(pod);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("asks for none"), std::string::npos) << st.message();
}

TEST(HandOutTest, GpusMustBeThisNodesAndEachOnce) {
  EXPECT_EQ(Check(Pod("far", 1024, 10, {{7, 1024, 100}})).code(), StatusCode::kPermissionDenied);
  json wrong_uuid = Pod("wrong", 1024, 10, {{0, 1024, 100}});
  core::ContainerAssignment ca{"main", {{0, "GPU-elsewhere", 1024, 100}}};
  wrong_uuid["metadata"]["annotations"]["tessera.io/assignment"] = *core::EncodeAssignment(core::Assignment{"n1", {ca}});
  const Status st = Check(wrong_uuid);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("as GPU-elsewhere, but GPU 0 is GPU-0"), std::string::npos) << st.message();
}

TEST(HandOutTest, ContainersMayNotSetTheVariablesTheAgentGives) {
  // A pod that sets its own limit beside the scheduler's assignment: the
  // runtime might let it win, so no share is handed out.
  json pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "HOME"}, {"value", "/root"}},
                                                     {{"name", "TESSERA_GPU_MEM_LIMIT_MIB_0"}, {"value", "16384"}}});
  Status st = Check(pod);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("pod ns/p: no GPU share is handed out: its container \"main\" sets "
                              "TESSERA_GPU_MEM_LIMIT_MIB_0 in its spec"),
            std::string::npos)
      << st.message();
  // An init container counts too; so do the GPU list and the front ends' names.
  pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  pod["spec"]["initContainers"] = json::array({{{"name", "setup"}, {"env", json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}})}}});
  st = Check(pod);
  EXPECT_NE(st.message().find("container \"setup\" sets NVIDIA_VISIBLE_DEVICES"), std::string::npos) << st.message();
  // Other variables are the pod's own business.
  pod = Pod("p", 4096, 30, {{0, 4096, 300}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "CUDA_VISIBLE_DEVICES"}, {"value", "0"}},
                                                     {{"name", "TESSERA"}, {"value", "x"}}});
  EXPECT_TRUE(Check(pod).ok()) << Check(pod).ToString();
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
  EXPECT_TRUE(Check(whole).ok()) << Check(whole).ToString();
}

}  // namespace
}  // namespace tessera::node
