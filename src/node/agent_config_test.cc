#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tessera::node
