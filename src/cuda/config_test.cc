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
  EXPECT_TRUE(c.count_managed);
  EXPECT_TRUE(problems.empty());
}

TEST(ConfigTest, PerGpuLimitOverridesTheDefault) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_MEM_LIMIT_MIB", "100"},
                    {"TESSERA_GPU_MEM_LIMIT_MIB_1", "2048"},
                    {"TESSERA_REGION_DIR", "/run/tessera/x"},
                    {"TESSERA_MANAGED_MEMORY", "ignore"},
                    {"TESSERA_LOG_LEVEL", "3"}},
                   &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(c.limit_bytes[0], 100ull << 20);
  EXPECT_EQ(c.limit_bytes[1], 2048ull << 20);
  EXPECT_EQ(c.limit_bytes[15], 100ull << 20);
  EXPECT_EQ(c.region_dir, "/run/tessera/x");
  EXPECT_FALSE(c.count_managed);
  EXPECT_EQ(c.log_level, 3);
}

TEST(ConfigTest, BadValuesAreReportedAndIgnored) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_MEM_LIMIT_MIB_0", "12GiB"},
                    {"TESSERA_GPU_MEM_LIMIT_MIB_2", "-5"},
                    {"TESSERA_GPU_MEM_LIMIT_MIB_3", "99999999999999999999"},
                    {"TESSERA_MANAGED_MEMORY", "maybe"},
                    {"TESSERA_LOG_LEVEL", "9"},
                    {"TESSERA_CUDA_DISABLE", "1"}},
                   &problems);
  EXPECT_EQ(problems.size(), 5u);
  EXPECT_NE(problems[0].find("TESSERA_GPU_MEM_LIMIT_MIB_0"), std::string::npos);
  EXPECT_FALSE(c.AnyLimit());
  EXPECT_TRUE(c.disabled);
  EXPECT_TRUE(c.count_managed);
  EXPECT_EQ(c.log_level, 1);
}

}  // namespace
}  // namespace tessera::cuda
