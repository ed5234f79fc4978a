#include "kubectl/claims.h"

#include <gtest/gtest.h>

#include "kubectl/test_objects.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;
using testing::AllocatedClaim;

TEST(ClaimSharesTest, ReadsTheDriversResultsWithThePodTheyAreReservedFor) {
  Json exclusive = AllocatedClaim("ns", "whole", {{"n1", 1, "", ""}});
  exclusive["status"]["allocation"]["devices"]["results"][0].erase("consumedCapacity");
  Json other = AllocatedClaim("ns", "nic", {{"n1", 0, "1Gi", ""}});
  other["status"]["allocation"]["devices"]["results"][0]["driver"] = "nic.example.com";
  Json pending = AllocatedClaim("ns", "pending", {});
  pending["status"].erase("allocation");
  const ClaimShares dra = ClaimSharesFrom(Json::array({
      AllocatedClaim("ns", "b", {{"n1", 0, "8Gi", "30"}, {"n1", 0, "1Gi", "5"}}, "pod-b"),
      AllocatedClaim("ns", "a", {{"n2", 3, "", "0.5"}}),
      exclusive, other, pending,
  }));
  EXPECT_TRUE(dra.problems.empty());
  ASSERT_EQ(dra.shares.size(), 3u);
  // By namespace and claim; a size left out is the whole card (0); percents round up to core milli.
  EXPECT_EQ(dra.shares[0], (ClaimShare{"ns", "a", "", "n2", 3, 0, 5}));
  EXPECT_EQ(dra.shares[1], (ClaimShare{"ns", "b", "pod-b", "n1", 0, 9216, 350})) << "two results on one GPU summed";
  EXPECT_EQ(dra.shares[2], (ClaimShare{"ns", "whole", "", "n1", 1, 0, 1000})) << "exclusive: the whole GPU";
}

TEST(ClaimSharesTest, ResultsThatCannotBeReadAreProblems) {
  Json bad_device = AllocatedClaim("ns", "x", {{"n1", 0, "1Gi", ""}});
  bad_device["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-a";
  const ClaimShares dra = ClaimSharesFrom(Json::array({bad_device, AllocatedClaim("ns", "y", {{"n1", 0, "lots", ""}})}));
  EXPECT_TRUE(dra.shares.empty());
  ASSERT_EQ(dra.problems.size(), 2u);
  EXPECT_EQ(dra.problems[0].object, "claim ns/x");
  EXPECT_NE(dra.problems[0].message.find("gpu-a"), std::string::npos) << dra.problems[0].message;
  EXPECT_EQ(dra.problems[1].object, "claim ns/y");
  EXPECT_TRUE(ClaimSharesFrom(Json::object()).shares.empty());
}

}  // namespace
}  // namespace tessera::kubectl
