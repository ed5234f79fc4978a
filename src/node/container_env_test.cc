#include "node/container_env.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "node/handout.h"
#include "node/test_fixtures.h"
#include "region/board.h"

namespace tessera::node {
namespace {

std::vector<core::GpuInfo> Gpus() {
  return {{0, "GPU-a", "A100", 40960, 108, 0, true}, {1, "GPU-b", "A100", 81920, 108, 1, true}};
}

PendingPod Pod() {
  PendingPod p;
  p.ns = "ns";
  p.name = "p";
  p.uid = "uid-1";
  return p;
}

TEST(ContainerEnvTest, OneGpuShare) {
  PendingContainer c{"main", {{1, "GPU-b", 8192, 300}}};
  MountPaths paths;
  paths.library_host = "/lib.so";
  paths.preload_host = "/preload";
  paths.region_root_host = "/regions";
  auto env = BuildContainerEnv(Pod(), c, Gpus(), paths);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_COUNT"), "1");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_UUID_0"), "GPU-b");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "8192");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_0"), "30");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_FRACTION"), "0.1000");
  EXPECT_EQ(env->envs.at("TESSERA_POD"), "ns/p");
  EXPECT_EQ(env->envs.at("TESSERA_CONTAINER"), "main");
  EXPECT_EQ(env->region_host_dir, "/regions/uid-1/main");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_BOARD_DIR"), "/var/run/tessera/boards");
  ASSERT_EQ(env->mounts.size(), 4u);
  EXPECT_EQ(env->mounts[0], (MountSpec{"/usr/local/lib/tessera/libtessera-cuda.so", "/lib.so", true}));
  EXPECT_EQ(env->mounts[1], (MountSpec{"/etc/ld.so.preload", "/preload", true}));
  EXPECT_EQ(env->mounts[2], (MountSpec{"/var/run/tessera/region", "/regions/uid-1/main", false}));
  // One boards folder for the node, writable (processes mark themselves busy there).
  EXPECT_EQ(env->mounts[3], (MountSpec{"/var/run/tessera/boards", "/regions/boards", false}));
  paths.board_dir_host = "/boards";
  env = BuildContainerEnv(Pod(), c, Gpus(), paths);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->mounts.back(), (MountSpec{"/var/run/tessera/boards", "/boards", false}));
}

TEST(ContainerEnvTest, PrepareBoardsMakesTheFolderAndEachGpusBoardOnce) {
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/regions/boards";
  ASSERT_TRUE(PrepareBoards(dir, {"GPU-a", "GPU-b"}).ok());
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms(0755));
  for (const char* name : {"GPU-a.board", "GPU-b.board"}) {
    const fs::path board = fs::path(dir) / name;
    ASSERT_TRUE(fs::exists(board)) << board;
    EXPECT_EQ(fs::status(board).permissions() & fs::perms::all, fs::perms(0666));
    EXPECT_EQ(fs::file_size(board), sizeof(region::Board));
    auto opened = region::OpenBoard(board.string());  // valid: the library maps it
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  }
  // A board in use is left alone when the next container comes.
  auto mapped = region::OpenBoard(dir + "/GPU-a.board");
  ASSERT_TRUE(mapped.ok());
  const int slot = region::ClaimBoardSlot(**mapped, 42, 1000);
  ASSERT_GE(slot, 0);
  ASSERT_TRUE(PrepareBoards(dir, {"GPU-a"}).ok());
  EXPECT_EQ((*mapped)->slot[slot].owner.load(), 42u);
  // A uuid that would name a file elsewhere is refused.
  EXPECT_EQ(PrepareBoards(dir, {"../x"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PrepareBoards(dir, {""}).code(), StatusCode::kInvalidArgument);
}

TEST(ContainerEnvTest, AHardPolicyIsPassedOnAShareIsTheDefault) {
  PendingContainer c{"main", {{1, "GPU-b", 8192, 300}}};
  auto env = BuildContainerEnv(Pod(), c, Gpus(), MountPaths{});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->envs.count("TESSERA_GPU_CORE_POLICY"), 0u);
  PendingPod hard = Pod();
  hard.core_hard = true;
  env = BuildContainerEnv(hard, c, Gpus(), MountPaths{});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_POLICY"), "hard");
}

TEST(ContainerEnvTest, TwoGpusInAssignmentOrderAndTheSmallestFraction) {
  PendingContainer c{"main", {{1, "GPU-b", 40960, 1000}, {0, "GPU-a", 10240, 125}}};
  auto env = BuildContainerEnv(Pod(), c, Gpus(), MountPaths{});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b,GPU-a");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_UUID_1"), "GPU-a");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_0"), "100");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_1"), "12.5");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_FRACTION"), "0.2500");
}

TEST(ContainerEnvTest, NoMemorySizeMeansTheWholeCard) {
  PendingContainer c{"main", {{0, "GPU-a", 0, 1000}}};
  auto env = BuildContainerEnv(Pod(), c, Gpus(), MountPaths{});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "40960");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_FRACTION"), "1.0000");
}

TEST(ContainerEnvTest, UnknownGpuIsAnError) {
  PendingContainer c{"main", {{0, "GPU-zzz", 1024, 100}}};
  auto env = BuildContainerEnv(Pod(), c, Gpus(), MountPaths{});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("GPU-zzz"), std::string::npos);
  EXPECT_NE(env.status().message().find("ns/p"), std::string::npos);
}

// Both front ends on, default names.
MountPaths CompatPaths() {
  MountPaths paths;
  paths.resources.gpushare.enabled = true;
  paths.resources.hami.enabled = true;
  return paths;
}

// Container `name` asking with `limits`, decoded as the Allocator's pod
// cache decodes it: with the node agent's resource names (paths.resources).
core::PodView::Container Spec(const std::string& name, const nlohmann::json& limits,
                              const MountPaths& paths = CompatPaths()) {
  const nlohmann::json pod = {{"metadata", {{"name", "p"}}},
                              {"spec", {{"containers", {{{"name", name}, {"resources", {{"limits", limits}}}}}}}}};
  return testing::Decoded(pod, paths.resources)->containers.at(0);
}

TEST(ContainerEnvTest, GpushareContainerGetsAliyunVariables) {
  PendingPod pod = Pod();
  pod.specs["tf"] = Spec("tf", {{"aliyun.com/gpu-mem", "3"}});
  pod.specs["side"] = Spec("side", {{"aliyun.com/gpu-mem", "2"}});
  pod.specs["log"] = Spec("log", nlohmann::json::object());
  PendingContainer c{"tf", {{1, "GPU-b", 3072, 0}}};
  auto env = BuildContainerEnv(pod, c, Gpus(), CompatPaths());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("ALIYUN_COM_GPU_MEM_IDX"), "1");
  EXPECT_EQ(env->envs.at("ALIYUN_COM_GPU_MEM_DEV"), "80");
  EXPECT_EQ(env->envs.at("ALIYUN_COM_GPU_MEM_CONTAINER"), "3");
  EXPECT_EQ(env->envs.at("ALIYUN_COM_GPU_MEM_POD"), "5");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_VIEW"), "device");  // CONTAINER / DEV of the card's total
  // Tessera's own variables and limits as well.
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "3072");
  EXPECT_EQ(env->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b");
  EXPECT_EQ(env->envs.count("CUDA_DEVICE_SM_LIMIT"), 0u);
}

TEST(ContainerEnvTest, HamiContainerGetsHamiCoreVariables) {
  PendingPod pod = Pod();
  pod.specs["infer"] =
      Spec("infer", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}});
  PendingContainer c{"infer", {{0, "GPU-a", 3000, 300}}};
  auto env = BuildContainerEnv(pod, c, Gpus(), CompatPaths());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "3000");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_0"), "30");
  EXPECT_EQ(env->envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "3000m");
  EXPECT_EQ(env->envs.at("CUDA_DEVICE_SM_LIMIT"), "30");
  EXPECT_EQ(env->envs.count("ALIYUN_COM_GPU_MEM_DEV"), 0u);

  // Whole GPUs: the whole memory of each, compute 100 %.
  pod.specs["infer"] = Spec("infer", {{"nvidia.com/gpu", "2"}});
  PendingContainer two{"infer", {{0, "GPU-a", 40960, 1000}, {1, "GPU-b", 81920, 1000}}};
  env = BuildContainerEnv(pod, two, Gpus(), CompatPaths());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "40960m");
  EXPECT_EQ(env->envs.at("CUDA_DEVICE_MEMORY_LIMIT_1"), "81920m");
  EXPECT_EQ(env->envs.at("CUDA_DEVICE_SM_LIMIT"), "100");
}

TEST(ContainerEnvTest, FrontEndVariablesOnlyWhenEnabled) {
  PendingPod pod = Pod();
  pod.specs["tf"] = Spec("tf", {{"aliyun.com/gpu-mem", "3"}}, MountPaths{});
  PendingContainer c{"tf", {{1, "GPU-b", 3072, 0}}};
  auto env = BuildContainerEnv(pod, c, Gpus(), MountPaths{});
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.count("ALIYUN_COM_GPU_MEM_DEV"), 0u);
  // A Tessera-style container never gets them.
  pod.specs["tf"] = Spec("tf", {{"tessera.io/gpu-mem", "3072"}});
  env = BuildContainerEnv(pod, c, Gpus(), CompatPaths());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->envs.count("ALIYUN_COM_GPU_MEM_DEV"), 0u);
  EXPECT_EQ(env->envs.count("CUDA_DEVICE_SM_LIMIT"), 0u);
}

TEST(ContainerEnvTest, GpushareContainerOnTwoGpusIsAnError) {
  PendingPod pod = Pod();
  pod.specs["tf"] = Spec("tf", {{"aliyun.com/gpu-mem", "3"}});
  PendingContainer c{"tf", {{0, "GPU-a", 3072, 0}, {1, "GPU-b", 3072, 0}}};
  auto env = BuildContainerEnv(pod, c, Gpus(), CompatPaths());
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("gpushare gives one"), std::string::npos);
}

PendingPod MpsPod() {
  PendingPod p = Pod();
  p.isolation = core::Isolation::kMps;
  p.core_hard = true;  // no effect under MPS: its percentage is the limit
  return p;
}

std::vector<core::GpuInfo> MpsGpus() {
  std::vector<core::GpuInfo> gpus = Gpus();
  gpus[1].mps = true;  // GPU-b's daemon runs, GPU-a's does not
  return gpus;
}

MountPaths MpsPaths() {
  MountPaths paths;
  paths.mps_root = "/run/mps";
  paths.mps_shm = "/run/mps/shm";
  return paths;
}

TEST(ContainerEnvTest, MpsContainerGetsMpsLimitsItsGpusPipeFolderAndTheDaemonsShm) {
  PendingContainer c{"main", {{1, "GPU-b", 8192, 300}}};
  auto env = BuildContainerEnv(MpsPod(), c, MpsGpus(), MpsPaths());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  EXPECT_EQ(env->envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=8192M");
  EXPECT_EQ(env->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/var/run/tessera/mps");
  // The interception library keeps the memory limit; MPS alone limits compute.
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "8192");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_0"), "100");
  EXPECT_EQ(env->envs.count("TESSERA_GPU_CORE_POLICY"), 0u);
  EXPECT_EQ(env->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b");
  ASSERT_EQ(env->mounts.size(), 6u);
  EXPECT_EQ(env->mounts[3], (MountSpec{"/var/run/tessera/mps", "/run/mps/GPU-b/pipe", false}));
  // MPS's client and server share memory in /dev/shm: the daemons' folder replaces the pod's own.
  EXPECT_EQ(env->mounts[4], (MountSpec{"/dev/shm", "/run/mps/shm", false}));
  EXPECT_EQ(env->mounts[5].container_path, "/var/run/tessera/boards");  // still the last
}

TEST(ContainerEnvTest, OtherIsolationsGetNoMpsVariables) {
  PendingContainer c{"main", {{1, "GPU-b", 8192, 300}}};
  for (core::Isolation isolation : {core::Isolation::kHook, core::Isolation::kNone}) {
    PendingPod pod = Pod();
    pod.isolation = isolation;
    auto env = BuildContainerEnv(pod, c, MpsGpus(), MpsPaths());
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    EXPECT_EQ(env->envs.count("CUDA_MPS_PIPE_DIRECTORY"), 0u);
    EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_0"), "30");
    EXPECT_EQ(env->mounts.size(), isolation == core::Isolation::kHook ? 4u : 0u);
  }
}

// tessera.io/isolation: none: the GPU and the share's numbers for the
// container's own use, and nothing that enforces them.
TEST(ContainerEnvTest, UnenforcedContainerGetsItsGpusAndNoLibrary) {
  PendingContainer c{"main", {{1, "GPU-b", 8192, 300}}};
  PendingPod pod = Pod();
  pod.isolation = core::Isolation::kNone;
  pod.core_hard = true;  // nothing to apply it
  auto env = BuildContainerEnv(pod, c, Gpus(), MountPaths{});
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "8192");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_CORE_PERCENT_0"), "30");
  EXPECT_EQ(env->envs.at("TESSERA_POD"), "ns/p");
  for (const char* enforced : {"TESSERA_REGION_DIR", "TESSERA_GPU_BOARD_DIR", "TESSERA_GPU_CORE_POLICY"}) {
    EXPECT_EQ(env->envs.count(enforced), 0u) << enforced;
  }
  EXPECT_TRUE(env->mounts.empty());  // no library, no /etc/ld.so.preload, no region, no boards
  EXPECT_EQ(env->region_host_dir, "");
}

TEST(ContainerEnvTest, MpsPodOnAGpuWithoutItsDaemonIsRefusedNamingTheGpu) {
  PendingContainer c{"main", {{0, "GPU-a", 8192, 300}}};
  auto env = BuildContainerEnv(MpsPod(), c, MpsGpus(), MpsPaths());
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), StatusCode::kFailedPrecondition);
  const std::string message = env.status().message();
  EXPECT_NE(message.find("ns/p container main asks for tessera.io/isolation: mps"), std::string::npos) << message;
  EXPECT_NE(message.find("the MPS control daemon of GPU GPU-a is not running"), std::string::npos) << message;
  EXPECT_NE(message.find("/run/mps/GPU-a/log"), std::string::npos) << message;
}

TEST(ContainerEnvTest, MpsPodOnANodeWithoutMpsIsRefusedNamingTheGpu) {
  PendingContainer c{"main", {{1, "GPU-b", 8192, 300}}};
  auto env = BuildContainerEnv(MpsPod(), c, MpsGpus(), MountPaths{});  // no mps_root: MPS off
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), StatusCode::kFailedPrecondition);
  const std::string message = env.status().message();
  EXPECT_NE(message.find("runs no MPS (--mps=off"), std::string::npos) << message;
  EXPECT_NE(message.find("GPU GPU-b"), std::string::npos) << message;
}

TEST(ContainerEnvTest, MpsContainerOnTwoGpusIsAnError) {
  std::vector<core::GpuInfo> gpus = MpsGpus();
  gpus[0].mps = true;
  PendingContainer c{"main", {{0, "GPU-a", 8192, 300}, {1, "GPU-b", 8192, 300}}};
  auto env = BuildContainerEnv(MpsPod(), c, gpus, MpsPaths());
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(env.status().message().find("MPS gives a container one GPU"), std::string::npos);
}

// The hand-out check refuses pods whose spec sets what Allocate gives
// (handout.h, IsReservedVariable): it must know every name given here.
TEST(ContainerEnvTest, EveryVariableGivenIsAnAgentVariable) {
  PendingPod compat = Pod();
  compat.specs["g"] = Spec("g", {{"aliyun.com/gpu-mem", "3"}});
  compat.specs["h"] = Spec("h", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}});
  PendingPod hard = Pod();
  hard.core_hard = true;
  std::vector<Result<ContainerEnv>> envs;
  envs.push_back(BuildContainerEnv(hard, {"main", {{0, "GPU-a", 4096, 300}, {1, "GPU-b", 4096, 300}}}, Gpus(), MountPaths{}));
  envs.push_back(BuildContainerEnv(compat, {"g", {{1, "GPU-b", 3072, 0}}}, Gpus(), CompatPaths()));
  envs.push_back(BuildContainerEnv(compat, {"h", {{0, "GPU-a", 3000, 300}}}, Gpus(), CompatPaths()));
  envs.push_back(BuildContainerEnv(MpsPod(), {"main", {{1, "GPU-b", 8192, 300}}}, MpsGpus(), MpsPaths()));
  size_t names = 0;
  for (const auto& env : envs) {
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    for (const auto& [name, value] : env->envs) {
      EXPECT_TRUE(IsReservedVariable(name)) << name << "=" << value;
      ++names;
    }
  }
  EXPECT_GT(names, 30u);
}

}  // namespace
}  // namespace tessera::node
