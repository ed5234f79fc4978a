#include "node/compat_plugins.h"

#include <gtest/gtest.h>

namespace tessera::node {
namespace {

std::vector<core::GpuInfo> Gpus() {
  return {{0, "GPU-a", "T4", 15360, 40, 0, true}, {1, "GPU-b", "A100", 40960 + 512, 108, 1, false}};
}

TEST(CompatPluginsTest, OneUnitPerWholeGib) {
  auto units = GibUnits(Gpus());
  ASSERT_TRUE(units.ok()) << units.status().ToString();
  ASSERT_EQ(units->size(), 15u + 40u);  // 40.5 GiB rounds down
  EXPECT_EQ((*units)[0].id, "GPU-a-0");
  EXPECT_EQ((*units)[14].id, "GPU-a-14");
  EXPECT_EQ((*units)[15].id, "GPU-b-0");
  EXPECT_TRUE((*units)[0].healthy);
  EXPECT_FALSE((*units)[15].healthy);
  EXPECT_EQ((*units)[15].numa_node, 1);
  std::vector<core::GpuInfo> long_uuid = {{0, std::string(70, 'x'), "T4", 2048, 40, 0, true}};
  EXPECT_FALSE(GibUnits(long_uuid).ok());
}

TEST(CompatPluginsTest, UnitsStandForTheirGpu) {
  auto slots = GpuSlotsOfUnits({"GPU-b-3", "GPU-b-7", "GPU-b-0"});
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ(*slots, (std::vector<std::string>{"GPU-b-0"}));
  slots = GpuSlotsOfUnits({"GPU-b-3", "GPU-a-1", "GPU-b-4"});
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ(*slots, (std::vector<std::string>{"GPU-b-0", "GPU-a-0"}));
  EXPECT_FALSE(GpuSlotsOfUnits({"nosuffix"}).ok());
}

TEST(CompatPluginsTest, UnitsOnOneGpu) {
  const std::vector<std::string> available = {"GPU-a-0", "GPU-b-0", "GPU-a-1", "GPU-b-1", "GPU-b-2"};
  EXPECT_EQ(UnitsOn("GPU-b", available, {}, 2), (std::vector<std::string>{"GPU-b-0", "GPU-b-1"}));
  EXPECT_EQ(UnitsOn("GPU-b", available, {"GPU-b-2"}, 2), (std::vector<std::string>{"GPU-b-2", "GPU-b-0"}));
  EXPECT_TRUE(UnitsOn("GPU-a", available, {}, 3).empty());
  EXPECT_TRUE(UnitsOn("GPU-c", available, {}, 1).empty());
}

TEST(CompatPluginsTest, OptionsAreChecked) {
  CompatOptions o;
  EXPECT_TRUE(ValidateCompatOptions(o, "tessera.io/gpu").ok());
  o.resources.gpushare.enabled = true;
  o.resources.hami.enabled = true;
  EXPECT_TRUE(ValidateCompatOptions(o, "tessera.io/gpu").ok());
  EXPECT_NE(ValidateCompatOptions(o, "nvidia.com/gpu").message().find("--hami-gpu-resource"), std::string::npos);
  o.resources.hami.gpu = "aliyun.com/gpu-mem";
  EXPECT_NE(ValidateCompatOptions(o, "tessera.io/gpu").message().find("same resource"), std::string::npos);
  o.resources.hami.gpu = "vgpu";
  EXPECT_NE(ValidateCompatOptions(o, "tessera.io/gpu").message().find("domain/name"), std::string::npos);
  o.resources.hami.gpu = "nvidia.com/gpu";
  o.hami_socket = o.gpushare_socket;
  EXPECT_FALSE(ValidateCompatOptions(o, "tessera.io/gpu").ok());
}

}  // namespace
}  // namespace tessera::node
