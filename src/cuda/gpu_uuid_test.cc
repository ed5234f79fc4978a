#include "cuda/gpu_uuid.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cuda/config.h"

namespace tessera::cuda {
namespace {

constexpr const char* kA = "GPU-5c3c1e2a-98f4-4b7e-a1d0-0123456789ab";
constexpr const char* kB = "GPU-FA4E0000-0000-4000-8000-000000000001";

TEST(GpuUuidTest, ParsesTheTextFormAndFormatsItBack) {
  GpuUuid u;
  ASSERT_TRUE(ParseGpuUuid(kA, &u));
  EXPECT_EQ(u.bytes[0], 0x5c);
  EXPECT_EQ(u.bytes[4], 0x98);
  EXPECT_EQ(u.bytes[15], 0xab);
  char text[kGpuUuidChars + 1];
  FormatGpuUuid(u, text);
  EXPECT_STREQ(text, kA);
  // Upper-case digits are the same UUID; it formats in lower case.
  ASSERT_TRUE(ParseGpuUuid(kB, &u));
  FormatGpuUuid(u, text);
  EXPECT_STREQ(text, "GPU-fa4e0000-0000-4000-8000-000000000001");
}

TEST(GpuUuidTest, CudaBytesMatchTheText) {
  const char raw[16] = {'\x5c', '\x3c', '\x1e', '\x2a', '\x98', '\xf4', '\x4b', '\x7e',
                        '\xa1', '\xd0', '\x01', '\x23', '\x45', '\x67', '\x89', '\xab'};
  GpuUuid u;
  ASSERT_TRUE(ParseGpuUuid(kA, &u));
  EXPECT_EQ(GpuUuidFromBytes(raw), u);
}

TEST(GpuUuidTest, RejectsAnythingElse) {
  GpuUuid u;
  u.bytes[0] = 7;
  for (const char* bad : {"", "GPU-", "0", "5c3c1e2a-98f4-4b7e-a1d0-0123456789ab",  // no prefix
                          "MIG-5c3c1e2a-98f4-4b7e-a1d0-0123456789ab",               // a MIG device
                          "gpu-5c3c1e2a-98f4-4b7e-a1d0-0123456789ab",
                          "GPU-5c3c1e2a-98f4-4b7e-a1d0-0123456789a",     // short
                          "GPU-5c3c1e2a-98f4-4b7e-a1d0-0123456789abc",   // long
                          "GPU-5c3c1e2a98f4-4b7e-a1d0-0123456789ab-",    // dash misplaced
                          "GPU-5c3c1e2a-98f4-4b7e-a1d0-0123456789ag"}) {  // not hex
    EXPECT_FALSE(ParseGpuUuid(bad, &u)) << bad;
  }
  EXPECT_EQ(u.bytes[0], 7);  // left alone
}

Config Parse(const std::map<std::string, std::string>& env, std::vector<std::string>* problems) {
  return ParseConfig(
      [&](const char* n) -> const char* {
        auto it = env.find(n);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      problems);
}

GpuUuid Uuid(const char* text) {
  GpuUuid u;
  EXPECT_TRUE(ParseGpuUuid(text, &u)) << text;
  return u;
}

TEST(ShareIndexTest, ConfiguredUuidsDecideWhateverTheOrdinal) {
  std::vector<std::string> problems;
  // The node agent's assignment order is (B, A).
  Config c = Parse({{"TESSERA_GPU_UUID_0", kB}, {"TESSERA_GPU_UUID_1", kA}}, &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(c.AnyUuid());
  const GpuUuid a = Uuid(kA), b = Uuid(kB);
  EXPECT_EQ(c.ShareIndexOf(0, &a), 1);
  EXPECT_EQ(c.ShareIndexOf(1, &a), 1);
  EXPECT_EQ(c.ShareIndexOf(7, &b), 0);
  // A device that is none of the container's: not part of the share.
  const GpuUuid other = Uuid("GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(c.ShareIndexOf(0, &other), -1);
  // The driver could not tell the UUID: not matched, whatever the ordinal.
  EXPECT_EQ(c.ShareIndexOf(0, nullptr), -1);
}

TEST(ShareIndexTest, WithoutUuidsTheIndexIsTheOrdinal) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_MEM_LIMIT_MIB_1", "32"}}, &problems);
  EXPECT_FALSE(c.AnyUuid());
  const GpuUuid a = Uuid(kA);
  EXPECT_EQ(c.ShareIndexOf(0, &a), 0);
  EXPECT_EQ(c.ShareIndexOf(1, nullptr), 1);
  EXPECT_EQ(c.ShareIndexOf(region::kMaxGpus - 1, nullptr), region::kMaxGpus - 1);
  EXPECT_EQ(c.ShareIndexOf(region::kMaxGpus, nullptr), -1);
  EXPECT_EQ(c.ShareIndexOf(-1, nullptr), -1);
}

TEST(ShareIndexTest, SparseUuidsKeepTheirIndex) {
  std::vector<std::string> problems;
  Config c = Parse({{"TESSERA_GPU_UUID_3", kA}}, &problems);
  EXPECT_TRUE(problems.empty());
  const GpuUuid a = Uuid(kA), b = Uuid(kB);
  EXPECT_EQ(c.ShareIndexOf(0, &a), 3);
  EXPECT_EQ(c.ShareIndexOf(0, &b), -1);  // some UUID is set: no ordinal fallback
}

}  // namespace
}  // namespace tessera::cuda
