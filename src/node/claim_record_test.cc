#include "node/claim_record.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

ClaimRecord Record(const std::string& key, const std::string& uid) {
  return ClaimRecord{GpuHolder{GpuHolder::Kind::kClaim, uid, key, {{0, "GPU-a", 8192, 300}, {1, "GPU-b", 1024, 0}}},
                     {{"ns", "pod-a", "pod-a-uid"}}};
}

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(ClaimRecordTest, PathsLieUnderTheClaimsFolder) {
  EXPECT_EQ(ClaimsRoot("/r"), "/r/dra");
  EXPECT_EQ(ClaimRecordPath("/r", "u1"), "/r/dra/u1/holder.json");
  EXPECT_EQ(ClaimRegionDir("/r", "u1"), "/r/dra/u1/claim");
}

TEST(ClaimRecordTest, EncodesAndDecodesSharesAndPods) {
  const ClaimRecord r = Record("ns/gpu", "u1");
  auto back = DecodeClaimRecord(EncodeClaimRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->Namespace(), "ns");
  EXPECT_EQ(back->Name(), "gpu");
}

TEST(ClaimRecordTest, ARecordWithoutPodsIsReadWithNone) {
  // As the driver wrote them before the pods were recorded.
  auto back = DecodeClaimRecord(nlohmann::json::parse(
      R"({"claim":"ns/c","uid":"u1","shares":[{"index":0,"uuid":"GPU-a","memMiB":1024,"coreMilli":100}]})"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->pods.empty());
  EXPECT_EQ(back->holder.shares.size(), 1u);
}

TEST(ClaimRecordTest, BadRecordsAreRefusedNamingWhy) {
  EXPECT_EQ(DecodeClaimRecord(nlohmann::json::parse(R"({"claim":"ns/c","uid":"","shares":[]})")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeClaimRecord(nlohmann::json::parse(R"({"claim":"ns/c","uid":"u"})")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeClaimRecord(nlohmann::json::parse(R"({"claim":"ns/c","uid":"u","shares":[],"pods":[{}]})"))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(ClaimRecordTest, ReadsEveryRecordSkipsFoldersWithoutOneAndNamesBadOnes) {
  testing::TempDir root;
  auto none = ReadClaimRecords(root.path());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->records.empty());

  Write(ClaimRecordPath(root.path(), "u2"), EncodeClaimRecord(Record("ns/b", "u2")).dump());
  Write(ClaimRecordPath(root.path(), "u1"), EncodeClaimRecord(Record("ns/a", "u1")).dump());
  Write(ClaimRecordPath(root.path(), "u3"), "{not json");
  std::filesystem::create_directories(ClaimRegionDir(root.path(), "u4"));  // a prepare under way
  auto read = ReadClaimRecords(root.path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->records.size(), 2u);
  EXPECT_EQ(read->records[0].holder.key, "ns/a");
  EXPECT_EQ(read->records[1].holder.key, "ns/b");
  ASSERT_EQ(read->unreadable.size(), 1u);
  EXPECT_NE(read->unreadable[0].find(ClaimRecordPath(root.path(), "u3")), std::string::npos);
}

}  // namespace
}  // namespace tessera::node
