// A claim's allocation read into Tessera shares, and each way it can be wrong.
#include "dra/claim.h"

#include <gtest/gtest.h>

#include "dra/test_gpus.h"

namespace tessera::dra {
namespace {

using testing::Claim;
using testing::Result;
using testing::TwoGpus;

TEST(SharesFromClaimTest, ConsumedCapacityBecomesTheShare) {
  auto claim = Claim("ns", "c", "u1",
                     {Result("gpu-1", "8Gi", "30"),
                      {{"request", "nic"}, {"driver", "nic.example.com"}, {"pool", "node-1"}, {"device", "eth0"}}});
  auto shares = SharesFromClaim(claim, "gpu.tessera.io", "node-1", TwoGpus());
  ASSERT_TRUE(shares.ok()) << shares.status().message();
  ASSERT_EQ(shares->size(), 1u);  // the other driver's result is ignored
  const ClaimShare& s = (*shares)[0];
  EXPECT_EQ(s.device, "gpu-1");
  EXPECT_EQ(s.pool, "node-1");
  EXPECT_EQ(s.share_id, "share-gpu-1");
  EXPECT_EQ(s.requests, std::vector<std::string>{"gpu"});
  EXPECT_EQ(s.gpu, (core::GpuShare{1, "GPU-bbbb", 8192, 300}));
}

TEST(SharesFromClaimTest, DefaultsRoundingAndExclusiveAllocations) {
  // Memory in bytes rounds up to a MiB; compute absent is 0; memory absent is the card.
  auto shares = SharesFromClaim(Claim("ns", "c", "u", {Result("gpu-0", "1G", ""), Result("gpu-1", "", "12.5")}),
                                "gpu.tessera.io", "node-1", TwoGpus());
  ASSERT_TRUE(shares.ok()) << shares.status().message();
  EXPECT_EQ((*shares)[0].gpu, (core::GpuShare{0, "GPU-aaaa", 954, 0}));
  EXPECT_EQ((*shares)[1].gpu, (core::GpuShare{1, "GPU-bbbb", 40960, 125}));
  // No consumedCapacity at all: an exclusive allocation, the whole GPU.
  nlohmann::json whole = Result("gpu-0", "", "");
  whole.erase("consumedCapacity");
  auto exclusive = SharesFromClaim(Claim("ns", "c", "u", {whole}), "gpu.tessera.io", "node-1", TwoGpus());
  ASSERT_TRUE(exclusive.ok());
  EXPECT_EQ((*exclusive)[0].gpu, (core::GpuShare{0, "GPU-aaaa", 40960, 1000}));
}

TEST(SharesFromClaimTest, TwoRequestsOnOneGpuAreSummed) {
  auto shares = SharesFromClaim(
      Claim("ns", "c", "u", {Result("gpu-0", "4Gi", "20", "node-1", "a"), Result("gpu-0", "2Gi", "10", "node-1", "b")}),
      "gpu.tessera.io", "node-1", TwoGpus());
  ASSERT_TRUE(shares.ok());
  ASSERT_EQ(shares->size(), 1u);
  EXPECT_EQ((*shares)[0].gpu, (core::GpuShare{0, "GPU-aaaa", 6144, 300}));
  EXPECT_EQ((*shares)[0].requests, (std::vector<std::string>{"a", "b"}));
}

void ExpectError(const nlohmann::json& claim, StatusCode code, const std::string& words) {
  auto shares = SharesFromClaim(claim, "gpu.tessera.io", "node-1", TwoGpus());
  ASSERT_FALSE(shares.ok()) << words;
  EXPECT_EQ(shares.status().code(), code) << shares.status().message();
  EXPECT_NE(shares.status().message().find(words), std::string::npos) << shares.status().message();
  EXPECT_NE(shares.status().message().find("ns/c"), std::string::npos) << shares.status().message();
}

TEST(SharesFromClaimTest, ErrorsNameTheClaimAndTheReason) {
  nlohmann::json unallocated = Claim("ns", "c", "u", {});
  unallocated.erase("status");
  ExpectError(unallocated, StatusCode::kFailedPrecondition, "is not allocated");
  ExpectError(Claim("ns", "c", "u", {}), StatusCode::kFailedPrecondition,
              "holds no device of driver gpu.tessera.io");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-7", "1Gi", "10")}), StatusCode::kNotFound, "gpu-7: this node has no such GPU");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-0", "1Gi", "10", "node-2")}), StatusCode::kFailedPrecondition,
              "pool \"node-2\", not this node's");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-0", "50Gi", "10")}), StatusCode::kInvalidArgument,
              "51200 MiB is more than GPU GPU-aaaa has (40960 MiB)");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-0", "1Gi", "101")}), StatusCode::kInvalidArgument, "over 100 %");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-0", "1Gi", "60"), Result("gpu-0", "1Gi", "60")}),
              StatusCode::kInvalidArgument, "over 100 %");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-0", "lots", "10")}), StatusCode::kInvalidArgument, "consumed memory");
  ExpectError(Claim("ns", "c", "u", {Result("gpu-0", "0", "10")}), StatusCode::kInvalidArgument, "at least 1Mi");
  auto gpus = TwoGpus();
  gpus[0].healthy = false;
  auto sick = SharesFromClaim(Claim("ns", "c", "u", {Result("gpu-0", "1Gi", "10")}), "gpu.tessera.io", "node-1", gpus);
  EXPECT_EQ(sick.status().code(), StatusCode::kNotFound);
}

TEST(ReservedPodsTest, PodsTheClaimIsReservedFor) {
  auto claim = Claim("ns", "c", "u1", {Result("gpu-1", "8Gi", "30")});
  EXPECT_TRUE(ReservedPods(claim).empty());
  claim["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "a"}, {"uid", "ua"}},
                                    {{"apiGroup", "example.com"}, {"resource", "pods"}, {"name", "x"}, {"uid", "ux"}},
                                    {{"resource", "jobs"}, {"name", "j"}, {"uid", "uj"}},
                                    "junk"};
  EXPECT_EQ(ReservedPods(claim), (std::vector<node::PodRef>{{"ns", "a", "ua"}}));
}

}  // namespace
}  // namespace tessera::dra
