#include "cuda/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tessera::cuda {
namespace {

Config Parse(const std::map<std::string, std::string>& env, std::vector<std::string>* problems) {
  return ParseConfig(
      [&](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      problems);
}

TEST(ConfigTest, NothingSetMeansNoLimit) {
  std::vector<std::string> problems;
  Config c = Parse({}, &problems);
  EXPECT_FALSE(c.AnyLimit());
  EXPECT_FALSE(c.disabled);
  EXPECT_TRUE(c.region_dir.empty());
  EXPECT_TRUE(c.board_dir.empty());
  EXPECT_TRUE(c.count_managed);
  EXPECT_TRUE(problems.empty());
}

TEST(ConfigTest, PerGpuLimitOverridesTheDefault) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_MEM_LIMIT_MIB", "100"},
                    {"TESSERA_GPU_MEM_LIMIT_MIB_1", "2048"},
                    {"TESSERA_REGION_DIR", "/run/tessera/x"},
                    {"TESSERA_GPU_BOARD_DIR", "/run/tessera/boards"},
                    {"TESSERA_MANAGED_MEMORY", "ignore"},
                    {"TESSERA_LOG_LEVEL", "3"}},
                   &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(c.limit_bytes[0], 100ull << 20);
  EXPECT_EQ(c.limit_bytes[1], 2048ull << 20);
  EXPECT_EQ(c.limit_bytes[15], 100ull << 20);
  EXPECT_EQ(c.region_dir, "/run/tessera/x");
  EXPECT_EQ(c.board_dir, "/run/tessera/boards");
  EXPECT_FALSE(c.count_managed);
  EXPECT_EQ(c.log_level, 3);
  EXPECT_FALSE(c.device_total);
  EXPECT_TRUE(Parse({{"TESSERA_GPU_MEM_VIEW", "device"}}, &problems).device_total);
  EXPECT_FALSE(Parse({{"TESSERA_GPU_MEM_VIEW", "share"}}, &problems).device_total);
  EXPECT_TRUE(problems.empty());
}

TEST(ConfigTest, BadValuesAreReportedAndIgnored) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_MEM_LIMIT_MIB_0", "12GiB"},
                    {"TESSERA_GPU_MEM_LIMIT_MIB_2", "-5"},
                    {"TESSERA_GPU_MEM_LIMIT_MIB_3", "99999999999999999999"},
                    {"TESSERA_MANAGED_MEMORY", "maybe"},
                    {"TESSERA_LOG_LEVEL", "9"},
                    {"TESSERA_GPU_MEM_VIEW", "card"},
                    {"TESSERA_CUDA_DISABLE", "1"}},
                   &problems);
  EXPECT_EQ(problems.size(), 6u);
  EXPECT_FALSE(c.device_total);
  EXPECT_NE(problems[0].find("TESSERA_GPU_MEM_LIMIT_MIB_0"), std::string::npos);
  EXPECT_FALSE(c.AnyLimit());
  EXPECT_TRUE(c.disabled);
  EXPECT_TRUE(c.count_managed);
  EXPECT_EQ(c.log_level, 1);
}

TEST(ConfigTest, ContextChargeDefaultsTo256MiBPerGpu) {
  std::vector<std::string> problems;
  Config c = Parse({}, &problems);
  EXPECT_EQ(c.context_bytes[0], 256ull << 20);
  EXPECT_EQ(c.context_bytes[15], 256ull << 20);
  c = Parse({{"TESSERA_GPU_CONTEXT_MIB", "300"}, {"TESSERA_GPU_CONTEXT_MIB_2", "0"}}, &problems);
  EXPECT_EQ(c.context_bytes[0], 300ull << 20);
  EXPECT_EQ(c.context_bytes[2], 0u);  // not charged on GPU 2
  c = Parse({{"TESSERA_GPU_CONTEXT_MIB", "lots"}}, &problems);
  EXPECT_EQ(c.context_bytes[0], 256ull << 20);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("TESSERA_GPU_CONTEXT_MIB"), std::string::npos);
}

TEST(ConfigTest, ComputeSharesPolicyAndWindow) {
  std::vector<std::string> problems;
  Config c = Parse({}, &problems);
  EXPECT_FALSE(c.AnyComputeLimit());
  EXPECT_FALSE(c.core_hard);
  EXPECT_EQ(c.core_window_us, 100'000u);
  c = Parse({{"TESSERA_GPU_CORE_PERCENT", "50"},
             {"TESSERA_GPU_CORE_PERCENT_1", "12.5"},
             {"TESSERA_GPU_CORE_PERCENT_2", "100"},
             {"TESSERA_GPU_CORE_POLICY", "hard"},
             {"TESSERA_GPU_CORE_WINDOW_MS", "50"},
             {"TESSERA_TEST_CLOCK", "fake_cuda"}},
            &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(c.AnyComputeLimit());
  EXPECT_EQ(c.core_ppm[0], 500'000u);
  EXPECT_EQ(c.core_ppm[1], 125'000u);
  EXPECT_EQ(c.core_ppm[2], 1'000'000u);  // the whole GPU: no limit there
  EXPECT_TRUE(c.core_hard);
  EXPECT_EQ(c.core_window_us, 50'000u);
  EXPECT_TRUE(c.fake_clock);
}

TEST(ConfigTest, AShareKeepsItsPercentForTheArbiter) {
  std::vector<std::string> problems;
  // A percentage and no policy: `share`. The gate exists (the arbiter's
  // grants apply through it); it passes launches until an arbiter is seen.
  Config c = Parse({{"TESSERA_GPU_CORE_PERCENT_0", "30"}}, &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(c.AnyComputeLimit());
  EXPECT_EQ(c.core_ppm[0], 300'000u);
  EXPECT_FALSE(c.core_hard);
  c = Parse({{"TESSERA_GPU_CORE_PERCENT_0", "30"}, {"TESSERA_GPU_CORE_POLICY", "share"}}, &problems);
  EXPECT_TRUE(c.AnyComputeLimit());
  EXPECT_FALSE(c.core_hard);
}

TEST(ConfigTest, BadComputeValuesAreReportedAndIgnored) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_CORE_PERCENT_0", "150"},
                    {"TESSERA_GPU_CORE_POLICY", "soft"},
                    {"TESSERA_GPU_CORE_WINDOW_MS", "5"}},
                   &problems);
  EXPECT_EQ(problems.size(), 3u);
  EXPECT_FALSE(c.AnyComputeLimit());
  EXPECT_FALSE(c.core_hard);
  EXPECT_EQ(c.core_window_us, 100'000u);
}

TEST(ConfigTest, GpuUuidsAreReadPerIndex) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_UUID_0", "GPU-fa4e0000-0000-4000-8000-000000000001"},
                    {"TESSERA_GPU_UUID_1", "GPU-FA4E0000-0000-4000-8000-000000000000"}},
                   &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(c.AnyUuid());
  EXPECT_TRUE(c.has_uuid[0]);
  EXPECT_TRUE(c.has_uuid[1]);
  EXPECT_FALSE(c.has_uuid[2]);
  EXPECT_EQ(c.uuid[0].bytes[15], 0x01);
  EXPECT_EQ(c.uuid[1].bytes[15], 0x00);
  EXPECT_EQ(c.uuid[1].bytes[0], 0xfa);
  EXPECT_FALSE(Parse({}, &problems).AnyUuid());
}

TEST(ConfigTest, BadGpuUuidsAreReportedAndIgnored) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_UUID_0", "GPU-fa4e0000-0000-4000-8000-000000000001"},
                    {"TESSERA_GPU_UUID_1", "0"},
                    {"TESSERA_GPU_UUID_2", "MIG-fa4e0000-0000-4000-8000-000000000001"},
                    {"TESSERA_GPU_UUID_3", "GPU-fa4e0000-0000-4000-8000-00000000001"},
                    {"TESSERA_GPU_UUID_4", "GPU-FA4E0000-0000-4000-8000-000000000001"}},
                   &problems);
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_NE(problems[0].find("TESSERA_GPU_UUID_1=\"0\" is not a GPU UUID"), std::string::npos);
  EXPECT_NE(problems[1].find("TESSERA_GPU_UUID_2"), std::string::npos);
  EXPECT_NE(problems[2].find("TESSERA_GPU_UUID_3"), std::string::npos);
  EXPECT_NE(problems[3].find("TESSERA_GPU_UUID_4=\"GPU-FA4E0000-0000-4000-8000-000000000001\" repeats TESSERA_GPU_UUID_0"),
            std::string::npos);
  EXPECT_TRUE(c.has_uuid[0]);
  for (int i = 1; i <= 4; ++i) EXPECT_FALSE(c.has_uuid[i]) << i;
}

}  // namespace
}  // namespace tessera::cuda
