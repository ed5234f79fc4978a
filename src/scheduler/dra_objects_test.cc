#include "scheduler/dra_objects.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::ClaimJson;
using testing::SliceJson;

const std::set<std::string, std::less<>> kClasses = {"gpu.tessera.io"};

TEST(DraSliceTest, DevicesInListedOrderWithTheirIndexAttribute) {
  json slice = SliceJson("n1", {2, 0, 1});
  slice["spec"]["devices"][1]["name"] = "renamed";  // the name is not the index: the attribute is
  Result<DraSlice> s = DecodeDraSlice(slice, "gpu.tessera.io");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "n1-gpu.tessera.io");
  EXPECT_EQ(s->node, "n1");
  EXPECT_EQ(s->pool, "n1");
  ASSERT_EQ(s->devices.size(), 3u);
  EXPECT_EQ(s->devices[0], (DraSlice::Device{"gpu-2", 2}));
  EXPECT_EQ(s->devices[1], (DraSlice::Device{"renamed", 0}));
  EXPECT_EQ(s->devices[2], (DraSlice::Device{"gpu-1", 1}));
}

TEST(DraSliceTest, OtherDriversAndBadSlices) {
  json other = SliceJson("n1", {0});
  other["spec"]["driver"] = "gpu.nvidia.com";
  EXPECT_EQ(DecodeDraSlice(other, "gpu.tessera.io").status().code(), StatusCode::kNotFound);
  json no_node = SliceJson("n1", {0});
  no_node["spec"].erase("nodeName");
  EXPECT_EQ(DecodeDraSlice(no_node, "gpu.tessera.io").status().code(), StatusCode::kInvalidArgument);
  json no_index = SliceJson("n1", {0, 1});
  no_index["spec"]["devices"][0]["attributes"].erase("index");
  Result<DraSlice> s = DecodeDraSlice(no_index, "gpu.tessera.io");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->devices.size(), 1u);
  EXPECT_EQ(s->unusable, std::vector<std::string>{"gpu-0"});
}

TEST(DraClaimTest, RequestsOfTheDriversClassesOnly) {
  json claim = ClaimJson("ns", "c", {{"gpu", 2, 8192, 30}, {"other", 1, 0, 0}});
  claim["spec"]["devices"]["requests"][1]["exactly"]["deviceClassName"] = "nic.example.com";
  Result<DraClaim> c = DecodeDraClaim(claim, "gpu.tessera.io", kClasses);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->key, "ns/c");
  EXPECT_FALSE(c->allocated);
  ASSERT_EQ(c->requests.size(), 1u);
  EXPECT_EQ(c->requests[0], (DraRequest{"gpu", 2, 8192, 300}));
  EXPECT_TRUE(c->unmodelled.empty());
  // Nothing asked: the slice's defaults, the whole card and no compute.
  Result<DraClaim> bare = DecodeDraClaim(ClaimJson("ns", "d", {{"gpu", 1, 0, 0}}), "gpu.tessera.io", kClasses);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->requests[0], (DraRequest{"gpu", 1, kWholeCardMemory, 0}));
}

TEST(DraClaimTest, WhatTheExtenderCannotModelIsSaid) {
  json alternatives = ClaimJson("ns", "c", {});
  alternatives["spec"]["devices"]["requests"] = json::parse(
      R"([{"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.tessera.io"}]}])");
  Result<DraClaim> c = DecodeDraClaim(alternatives, "gpu.tessera.io", kClasses);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->unmodelled.find("firstAvailable"), std::string::npos) << c->unmodelled;
  json all = ClaimJson("ns", "a", {{"gpu", 1, 0, 0}});
  all["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "All";
  c = DecodeDraClaim(all, "gpu.tessera.io", kClasses);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->unmodelled.find("allocationMode All"), std::string::npos) << c->unmodelled;
}

TEST(DraClaimTest, AllocationResultsPerDevice) {
  json claim = ClaimJson("ns", "c", {{"gpu", 3, 8192, 30}}, "n1",
                         {{0, 8192, 30}, {1, 0, 0, /*consumed=*/false}, {2, 0, 25}});
  Result<DraClaim> c = DecodeDraClaim(claim, "gpu.tessera.io", kClasses);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->allocated);
  ASSERT_EQ(c->shares.size(), 3u);
  EXPECT_EQ(c->shares[0], (DraDeviceShare{"n1", "gpu-0", 8192, 300}));
  // No consumedCapacity: the GPU alone.
  EXPECT_EQ(c->shares[1], (DraDeviceShare{"n1", "gpu-1", kWholeCardMemory, 1000}));
  // consumedCapacity without memory: the whole card's memory, as tessera-node reads it.
  EXPECT_EQ(c->shares[2], (DraDeviceShare{"n1", "gpu-2", kWholeCardMemory, 250}));
  // Another driver's results are not ours.
  claim["status"]["allocation"]["devices"]["results"][0]["driver"] = "gpu.nvidia.com";
  EXPECT_EQ(DecodeDraClaim(claim, "gpu.tessera.io", kClasses)->shares.size(), 2u);
}

TEST(DraClaimTest, UnreadableCapacityIsAnError) {
  json claim = ClaimJson("ns", "c", {{"gpu", 1, 8192, 30}}, "n1", {{0, 8192, 30}});
  claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"]["memory"] = "lots";
  Result<DraClaim> c = DecodeDraClaim(claim, "gpu.tessera.io", kClasses);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("ns/c device gpu-0"), std::string::npos) << c.status().message();
}

TEST(DraPodRequestTest, UnallocatedClaimsBecomeContainers) {
  std::map<std::string, DraClaim> claims;
  claims["ns/a"] = DecodeDraClaim(ClaimJson("ns", "a", {{"gpu", 1, 8192, 30}}), "gpu.tessera.io", kClasses).value();
  claims["ns/b"] = DecodeDraClaim(ClaimJson("ns", "b", {{"gpu", 2, 0, 0}}), "gpu.tessera.io", kClasses).value();
  claims["ns/shared"] = DecodeDraClaim(ClaimJson("ns", "shared", {{"gpu", 1, 1024, 10}}, "n1", {{0, 1024, 10}}),
                                       "gpu.tessera.io", kClasses)
                            .value();
  auto find = [&](const std::string& key) -> const DraClaim* {
    auto it = claims.find(key);
    return it == claims.end() ? nullptr : &it->second;
  };
  auto decode = [](const json& pod) { return core::DecodePod(pod, core::ResourceNames{}).value(); };
  const json pod = testing::WithClaims(testing::PodJson("ns", "p", {{"main"}}), {"a", "b", "shared"});
  Result<DraPodRequest> r = DraPodRequestOf(decode(pod), find);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request.containers.size(), 2u);  // the shared claim is allocated already
  EXPECT_EQ(r->request.key, "ns/p");
  EXPECT_EQ(r->request.cpu_milli, 1000);
  EXPECT_EQ(r->request.containers[0].name, "a/gpu");
  EXPECT_EQ(r->request.containers[0].mem_mib_per_gpu, 8192);
  EXPECT_EQ(r->request.containers[0].core_milli_per_gpu, 300);
  EXPECT_EQ(r->request.containers[1].gpu_count, 2);
  EXPECT_EQ(r->whole_card, (std::vector<bool>{false, true}));
  core::NodeState node;
  node.info.gpus = {{0, "u0", "A100", 40960}, {1, "u1", "A100", 81920}};
  EXPECT_EQ(r->On(node).containers[1].mem_mib_per_gpu, 81920);
  EXPECT_EQ(r->On(node).containers[0].mem_mib_per_gpu, 8192);

  EXPECT_EQ(DraPodRequestOf(decode(testing::WithClaims(pod, {"missing"})), find).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(DraPodRequestOf(decode(testing::PodJson("ns", "q", {{"main"}})), find).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(DraPodRequestOf(decode(testing::WithClaims(pod, {"shared"})), find).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::scheduler
