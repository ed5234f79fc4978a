#include "kubectl/top_view.h"

#include <gtest/gtest.h>

#include "core/codec.h"
#include "kubectl/test_objects.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;
using std::chrono::seconds;

const core::WallTime kNow = core::WallTime(seconds(1772368205));

Json WithUsage(Json pod, const core::PodUsage& usage) {
  pod["metadata"]["annotations"]["tessera.io/usage"] = core::EncodeUsage(usage).value();
  return pod;
}

TEST(TopViewTest, NoUsageIsOneLine) {
  const Json pods = Json::array({testing::AssignedPod("default", "p", testing::OnNode("n", "c", {{0, "", 1024, 100}}))});
  const TopView top = BuildTop(pods);
  EXPECT_EQ(RenderTop(top, {}, kNow, "namespace default"),
            "No pod in namespace default reports GPU usage yet (tessera.io/usage).\n");
}

TEST(TopViewTest, UsageBesideTheShare) {
  core::PodUsage usage{.at = kNow - seconds(7),
                       .containers = {{.name = "c", .gpus = {{0, "GPU-n-0", 900, 0.25}}}}};
  Json hot = WithUsage(testing::AssignedPod("default", "hot", testing::OnNode("n", "c", {{0, "", 1024, 100}})), usage);
  Json bad = testing::AssignedPod("default", "bad", testing::OnNode("n", "c", {{0, "", 1024, 100}}));
  bad["metadata"]["annotations"]["tessera.io/usage"] = R"({"v":1})";
  Json done = WithUsage(testing::AssignedPod("default", "done", testing::OnNode("n", "c", {{0, "", 1024, 100}}),
                                             "Succeeded"),
                        usage);
  const TopView top = BuildTop(Json::array({hot, bad, done}));
  ASSERT_EQ(top.rows.size(), 1u);
  ASSERT_EQ(top.problems.size(), 1u);
  EXPECT_EQ(top.problems[0].object, "pod default/bad");
  EXPECT_EQ(top.rows[0].mem_limit_mib, 1024);
  EXPECT_EQ(RenderTop(top, {}, kNow, "namespace default"),
            "NAMESPACE  POD  CONTAINER  NODE  GPU  MEMORY GiB  UTIL  CORE LIMIT  AGE\n"
            "default    hot  c          n       0   0.9 / 1.0   25%         10%   7s\n");
  const auto doc = TopToJson(top);
  EXPECT_EQ(doc["usage"][0]["utilization"], 0.25);
  EXPECT_EQ(doc["usage"][0]["at"], "2026-03-01T12:29:58Z");
}

TEST(TopViewTest, AClaimsUsageBesideItsAllocation) {
  // tessera-node writes a claim the pod was reserved for as the entry "claim/<name>".
  core::PodUsage usage{.at = kNow - seconds(3),
                       .containers = {{.name = "claim/gpu-x", .gpus = {{1, "GPU-n-1", 2048, 0.1}}}}};
  Json pod = testing::AssignedPod("default", "infer", testing::OnNode("n", "c", {}));
  pod["metadata"]["annotations"].erase("tessera.io/assignment");
  pod = WithUsage(pod, usage);
  const Json claims = Json::array({testing::AllocatedClaim("default", "gpu-x", {{"n", 1, "4Gi", "30"}}, "infer")});
  const TopView top = BuildTop(Json::array({pod}), claims);
  ASSERT_EQ(top.rows.size(), 1u);
  EXPECT_EQ(top.rows[0].container, "claim:gpu-x");
  EXPECT_EQ(top.rows[0].claim, "gpu-x");
  EXPECT_EQ(top.rows[0].mem_limit_mib, 4096);
  EXPECT_EQ(top.rows[0].core_limit_milli, 300);
  EXPECT_EQ(RenderTop(top, {}, kNow, "namespace default"),
            "NAMESPACE  POD    CONTAINER    NODE  GPU  MEMORY GiB  UTIL  CORE LIMIT  AGE\n"
            "default    infer  claim:gpu-x  n       1   2.0 / 4.0   10%         30%   3s\n");
  EXPECT_EQ(TopToJson(top)["usage"][0]["claim"], "gpu-x");
  // Without the claims read, its limits are unknown.
  EXPECT_EQ(BuildTop(Json::array({pod})).rows[0].mem_limit_mib, -1);
}

}  // namespace
}  // namespace tessera::kubectl
