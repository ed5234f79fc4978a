#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/statfs.h>

#include <filesystem>

#include "node/agent.h"

namespace tessera::node {
namespace {

NodeConfig Base() {
  NodeConfig c;
  c.node_name = "n1";
  return c;
}

TEST(GpuSourceFlag, AutoIsFileWithSimulatedGpusElseNvml) {
  NodeConfig c = Base();
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(EffectiveGpuSource(c), "nvml");
  c.simulated_gpus_file = "gpus.yaml";
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(EffectiveGpuSource(c), "file");
}

TEST(GpuSourceFlag, ExplicitChoices) {
  NodeConfig c = Base();
  c.gpu_source = "nvml";
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(EffectiveGpuSource(c), "nvml");
  c.gpu_source = "file";
  c.simulated_gpus_file = "gpus.yaml";
  ASSERT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(EffectiveGpuSource(c), "file");
}

TEST(GpuSourceFlag, MistakesSayWhatToFix) {
  NodeConfig c = Base();
  c.gpu_source = "dcgm";
  EXPECT_EQ(ValidateConfig(c).message(), "--gpu-source must be auto, nvml or file, got \"dcgm\"");
  c.gpu_source = "file";
  EXPECT_EQ(ValidateConfig(c).message(), "--gpu-source=file needs --simulated-gpus naming the GPU file");
  c.gpu_source = "nvml";
  c.simulated_gpus_file = "gpus.yaml";
  EXPECT_EQ(ValidateConfig(c).message(), "--simulated-gpus is not read with --gpu-source=nvml: drop one of them");
}

TEST(MpsFlags, DefaultsAreValidAndMistakesSayWhatToFix) {
  NodeConfig c = Base();
  EXPECT_EQ(c.mps, "auto");
  EXPECT_EQ(c.mps_control, "nvidia-cuda-mps-control");
  EXPECT_EQ(c.mps_root, "/var/run/tessera/mps");
  ASSERT_TRUE(ValidateConfig(c).ok());
  c.mps = "yes";
  EXPECT_EQ(ValidateConfig(c).message(), "--mps must be auto, on or off, got \"yes\"");
  c.mps = "on";
  c.mps_root = "run/mps";
  EXPECT_EQ(ValidateConfig(c).message(), "--mps-root must be an absolute path, got \"run/mps\"");
  c.mps_root = "/run/mps";
  c.mps_control = "";
  EXPECT_EQ(ValidateConfig(c).message(), "--mps-control must name the MPS control program (or use --mps=off)");
  c.mps_control = "nvidia-cuda-mps-control";
  c.mps_shm = "shm";
  EXPECT_EQ(ValidateConfig(c).message(), "--mps-shm must be an absolute path, got \"shm\"");
  c.mps = "off";  // none is read then
  c.mps_root = "";
  c.mps_control = "";
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(RegionGcFlag, FiveMinutesByDefaultZeroIsOffNegativeRefused) {
  NodeConfig c = Base();
  EXPECT_EQ(c.region_gc_grace, std::chrono::seconds(300));
  c.region_gc_grace = std::chrono::seconds(0);
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.region_gc_grace = std::chrono::seconds(-1);
  EXPECT_EQ(ValidateConfig(c).message(), "--region-gc-grace-seconds must be 0 (off) or positive");
}

TEST(MpsFlags, PlanSaysWhetherMpsRunsAndWhy) {
  auto off = PlanMps("off", "nvidia-cuda-mps-control");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled);
  EXPECT_EQ(off->reason, "--mps=off");
  // auto without the program: off, and the reason says what is missing.
  auto missing = PlanMps("auto", "tessera-no-such-mps-control");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->enabled);
  EXPECT_TRUE(missing->control.empty());
  EXPECT_EQ(missing->reason, "--mps=auto found no executable tessera-no-such-mps-control on PATH");
  // on without it: tessera-node must not start.
  auto required = PlanMps("on", "tessera-no-such-mps-control");
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.status().code(), StatusCode::kNotFound);
  EXPECT_NE(required.status().message().find("--mps=on: tessera-no-such-mps-control is not on PATH"),
            std::string::npos)
      << required.status().message();
  EXPECT_EQ(PlanMps("sometimes", "x").status().code(), StatusCode::kInvalidArgument);
  // A path that is there (any executable stands in for the program here).
  auto found = PlanMps("on", "/bin/sh");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_TRUE(found->enabled);
  EXPECT_EQ(found->control, "/bin/sh");
  EXPECT_EQ(found->reason, "--mps=on found /bin/sh; MPS containers get /dev/shm at /dev/shm");
}

// MPS clients in containers reach their daemon's server through /dev/shm:
// MPS runs only where the folder containers get at /dev/shm is the agent's own.
TEST(MpsFlags, TheSharedMemoryFolderMustBeTheAgentsOwnDevShm) {
  char tmpl[] = "/tmp/tessera-mps-shm-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, own = dir + "/own", other = dir + "/other", link = dir + "/link";
  std::filesystem::create_directories(own);
  std::filesystem::create_directories(other);
  std::filesystem::create_directory_symlink(own, link);  // another name for the same folder

  EXPECT_TRUE(CheckMpsShm(own, own).ok());
  EXPECT_TRUE(CheckMpsShm(link, own).ok());
  const Status differs = CheckMpsShm(other, own);
  EXPECT_EQ(differs.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(differs.message().find("--mps-shm " + other + " is not this process's " + own), std::string::npos)
      << differs.message();
  EXPECT_NE(differs.message().find("mounted at " + own), std::string::npos) << differs.message();
  EXPECT_EQ(CheckMpsShm(dir + "/missing", own).code(), StatusCode::kNotFound);

  // auto: off, saying why; on: tessera-node must not start.
  auto automatic = PlanMps("auto", "/bin/sh", other, own);
  ASSERT_TRUE(automatic.ok());
  EXPECT_FALSE(automatic->enabled);
  EXPECT_NE(automatic->reason.find("--mps=auto found /bin/sh, but --mps-shm " + other), std::string::npos)
      << automatic->reason;
  auto required = PlanMps("on", "/bin/sh", other, own);
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(required.status().message().find("--mps=on: --mps-shm " + other), std::string::npos)
      << required.status().message();
  // The control program is looked for first: its absence is what auto reports.
  EXPECT_EQ(PlanMps("auto", "tessera-no-such-mps-control", other, own)->reason,
            "--mps=auto found no executable tessera-no-such-mps-control on PATH");
  // The same folder: on, with a warning when it is not a tmpfs.
  auto shared = PlanMps("on", "/bin/sh", link, own);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_TRUE(shared->enabled);
  struct statfs fs {};
  ASSERT_EQ(::statfs(own.c_str(), &fs), 0);
  if (fs.f_type == 0x01021994) {  // TMPFS_MAGIC
    EXPECT_EQ(shared->warning, "");
  } else {
    EXPECT_NE(shared->warning.find("--mps-shm " + link + " is not a tmpfs"), std::string::npos) << shared->warning;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::node
