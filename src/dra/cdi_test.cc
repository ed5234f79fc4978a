// The claim's CDI spec gives a container what the device plugin's Allocate
// gives one: the same variables and mounts, from the same builder.
#include "dra/cdi.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dra/test_gpus.h"

namespace tessera::dra {
namespace {

bool HasEnv(const nlohmann::json& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(CdiSpecTest, OneDevicePerClaimWithTheAllocateEnvAndMounts) {
  node::MountPaths paths;
  paths.region_root_host = "/run/tessera/regions";
  ClaimRef claim{"ns", "c", "0d1e-uid"};
  std::vector<ClaimShare> shares(2);
  shares[0].gpu = {1, "GPU-bbbb", 8192, 300};
  shares[1].gpu = {0, "GPU-aaaa", 40960, 1000};
  auto spec = CdiSpecFor(claim, shares, testing::TwoGpus(), paths);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const nlohmann::json& j = spec->json;
  EXPECT_EQ(j["cdiVersion"], "0.6.0");
  EXPECT_EQ(j["kind"], "tessera.io/gpu");
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["name"], "0d1e-uid");
  const nlohmann::json& env = j["devices"][0]["containerEdits"]["env"];
  EXPECT_TRUE(HasEnv(env, "NVIDIA_VISIBLE_DEVICES=GPU-bbbb,GPU-aaaa"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_GPU_UUID_0=GPU-bbbb"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_GPU_MEM_LIMIT_MIB_0=8192"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_GPU_CORE_PERCENT_0=30"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_GPU_MEM_LIMIT_MIB_1=40960"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_GPU_CORE_PERCENT_1=100"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_GPU_COUNT=2"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_POD=ns/c"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_CONTAINER=claim"));
  EXPECT_TRUE(HasEnv(env, "TESSERA_REGION_DIR=/var/run/tessera/region"));
  EXPECT_EQ(spec->region_host_dir, "/run/tessera/regions/dra/0d1e-uid/claim");

  // The same environment and mounts BuildContainerEnv gives Allocate.
  node::PendingPod pod;
  pod.ns = "ns";
  pod.name = "c";
  pod.uid = "0d1e-uid";
  node::MountPaths dra_paths = paths;
  dra_paths.board_dir_host = node::BoardHostDir(paths);
  dra_paths.region_root_host = ClaimRegionRoot(paths);
  auto allocate = node::BuildContainerEnv(pod, {"claim", {shares[0].gpu, shares[1].gpu}}, testing::TwoGpus(), dra_paths);
  ASSERT_TRUE(allocate.ok());
  EXPECT_EQ(env.size(), allocate->envs.size());
  const nlohmann::json& mounts = j["devices"][0]["containerEdits"]["mounts"];
  ASSERT_EQ(mounts.size(), allocate->mounts.size());
  for (size_t i = 0; i < mounts.size(); ++i) {
    EXPECT_EQ(mounts[i]["hostPath"], allocate->mounts[i].host_path);
    EXPECT_EQ(mounts[i]["containerPath"], allocate->mounts[i].container_path);
    EXPECT_EQ(mounts[i]["options"][0], allocate->mounts[i].read_only ? "ro" : "rw");
  }
  EXPECT_EQ(mounts[1]["containerPath"], "/etc/ld.so.preload");
  EXPECT_EQ(mounts[2]["hostPath"], "/run/tessera/regions/dra/0d1e-uid/claim");
  // Claims and pods on one GPU mark themselves on one board: the pods' folder.
  EXPECT_EQ(mounts[3]["hostPath"], "/run/tessera/regions/boards");
}

TEST(CdiSpecTest, AHardPolicyFromTheClaimsPodReachesTheEnv) {
  node::MountPaths paths;
  ClaimRef claim{"ns", "c", "0d1e-uid"};
  std::vector<ClaimShare> shares(1);
  shares[0].gpu = {0, "GPU-aaaa", 8192, 300};
  auto plain = CdiSpecFor(claim, shares, testing::TwoGpus(), paths);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  for (const nlohmann::json& e : plain->json["devices"][0]["containerEdits"]["env"]) {
    EXPECT_EQ(e.get<std::string>().rfind("TESSERA_GPU_CORE_POLICY=", 0), std::string::npos) << e;
  }
  node::ComputeAnnotations hard;
  hard.core_hard = true;
  auto spec = CdiSpecFor(claim, shares, testing::TwoGpus(), paths, hard);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_TRUE(HasEnv(spec->json["devices"][0]["containerEdits"]["env"], "TESSERA_GPU_CORE_POLICY=hard"));
}

TEST(CdiSpecTest, NamesAndBadInput) {
  EXPECT_EQ(CdiDeviceId("u1"), "tessera.io/gpu=u1");
  EXPECT_EQ(CdiSpecFileName("u1"), "tessera.io-gpu-u1.json");
  std::vector<ClaimShare> shares(1);
  shares[0].gpu = {0, "GPU-aaaa", 1024, 100};
  EXPECT_FALSE(CdiSpecFor({"ns", "c", ""}, shares, testing::TwoGpus(), {}).ok());
  EXPECT_FALSE(CdiSpecFor({"ns", "c", "a/b"}, shares, testing::TwoGpus(), {}).ok());
  EXPECT_FALSE(CdiSpecFor({"ns", "c", "u"}, {}, testing::TwoGpus(), {}).ok());
  shares[0].gpu.uuid = "GPU-gone";
  auto gone = CdiSpecFor({"ns", "c", "u"}, shares, testing::TwoGpus(), {});
  EXPECT_EQ(gone.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gone.status().message().find("GPU-gone"), std::string::npos);
}

// tests/gpu/run.sh's claim_env test runs a CUDA program on a real GPU with
// the environment of tests/gpu/claim_env.txt, standing for a container of a
// claim (tessera-node's NodePrepareResources cannot run there: no kubelet,
// no gRPC). This keeps that file what CdiSpecFor gives such a container:
// when the spec's variables change, the file (and so the GPU run) must too.
TEST(CdiSpecTest, TheGpuRunsClaimEnvFileIsTheSpecsEnv) {
  const std::string file = std::string(TESSERA_SOURCE_DIR) + "/tests/gpu/claim_env.txt";
  std::ifstream in(file);
  ASSERT_TRUE(in) << "cannot read " << file;
  std::vector<std::string> want;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') want.push_back(line);
  }
  core::GpuInfo gpu;
  gpu.index = 0;
  gpu.uuid = "GPU-00000000-0000-0000-0000-000000000000";  // run.sh puts GPU 0's uuid here
  gpu.model = "H100";
  gpu.memory_mib = 81559;
  std::vector<ClaimShare> shares(1);
  shares[0].gpu = {0, gpu.uuid, 1024, 500};  // 1024 MiB and 50 percent
  auto spec = CdiSpecFor({"gpu-run", "claim", "gpu-run-claim"}, shares, {gpu}, {});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  std::vector<std::string> got;
  for (const auto& e : spec->json["devices"][0]["containerEdits"]["env"]) got.push_back(e.get<std::string>());
  std::sort(got.begin(), got.end());
  std::ostringstream text;
  for (const auto& e : got) text << e << "\n";
  EXPECT_EQ(want, got) << "write these lines (after its comments) into " << file << ":\n" << text.str();
}

}  // namespace
}  // namespace tessera::dra
