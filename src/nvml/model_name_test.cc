#include "nvml/model_name.h"

#include <gtest/gtest.h>

namespace tessera::nvml {
namespace {

TEST(ShortModelName, DataCenterNames) {
  EXPECT_EQ(ShortModelName("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(ShortModelName("NVIDIA H100 PCIe"), "H100");
  EXPECT_EQ(ShortModelName("NVIDIA H100 NVL"), "H100");
  EXPECT_EQ(ShortModelName("NVIDIA H200"), "H200");
  EXPECT_EQ(ShortModelName("NVIDIA GH200 480GB"), "GH200");
  EXPECT_EQ(ShortModelName("NVIDIA A100-SXM4-40GB"), "A100");
  EXPECT_EQ(ShortModelName("NVIDIA A100 80GB PCIe"), "A100");
  EXPECT_EQ(ShortModelName("NVIDIA A10G"), "A10G");
  EXPECT_EQ(ShortModelName("NVIDIA L40S"), "L40S");
  EXPECT_EQ(ShortModelName("NVIDIA L4"), "L4");
  EXPECT_EQ(ShortModelName("NVIDIA B200"), "B200");
}

TEST(ShortModelName, TeslaAndQuadroBrands) {
  EXPECT_EQ(ShortModelName("Tesla V100-SXM2-16GB"), "V100");
  EXPECT_EQ(ShortModelName("Tesla V100S-PCIE-32GB"), "V100S");
  EXPECT_EQ(ShortModelName("Tesla T4"), "T4");
  EXPECT_EQ(ShortModelName("Tesla P100-PCIE-16GB"), "P100");
  EXPECT_EQ(ShortModelName("Quadro RTX 8000"), "RTX8000");
}

TEST(ShortModelName, SeriesWordsJoinTheModel) {
  EXPECT_EQ(ShortModelName("NVIDIA GeForce RTX 4090"), "RTX4090");
  EXPECT_EQ(ShortModelName("NVIDIA GeForce GTX 1080 Ti"), "GTX1080");
  EXPECT_EQ(ShortModelName("NVIDIA RTX A6000"), "RTXA6000");
  EXPECT_EQ(ShortModelName("NVIDIA RTX PRO 6000 Blackwell Server Edition"), "RTXPRO6000");
  EXPECT_EQ(ShortModelName("NVIDIA TITAN V"), "TITANV");
}

TEST(ShortModelName, OddInputStaysAValidLabel) {
  EXPECT_EQ(ShortModelName(""), "unknown");
  EXPECT_EQ(ShortModelName("NVIDIA"), "unknown");
  EXPECT_EQ(ShortModelName("  nvidia   h100  "), "h100");
  EXPECT_EQ(ShortModelName("NVIDIA X/Y_Z 1"), "XYZ");
  EXPECT_EQ(ShortModelName("NVIDIA RTX"), "RTX");
}

}  // namespace
}  // namespace tessera::nvml
