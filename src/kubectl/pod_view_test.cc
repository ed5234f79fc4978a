#include "kubectl/pod_view.h"

#include <gtest/gtest.h>

#include "kubectl/test_objects.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;
using std::chrono::seconds;

const core::WallTime kNow = core::WallTime(seconds(1772368205));

Json Event(const std::string& reason, const std::string& message, const std::string& last) {
  return {{"type", "Warning"}, {"reason", reason}, {"message", message}, {"count", 2}, {"lastTimestamp", last}};
}

TEST(PodViewTest, ShowsAssignmentAllocationAndNodeAgentEvents) {
  core::Assignment a{.node = "h100",
                     .containers = {{.name = "trainer", .gpus = {{0, "GPU-h100-0", 81559, 1000}}},
                                    {.name = "sidecar", .gpus = {{2, "GPU-h100-2", 4096, 200}}}}};
  Json pod = testing::AssignedPod("ml", "train", a, "Pending", "2026-03-01T12:25:00Z");
  pod["metadata"]["annotations"]["tessera.io/allocated"] = "trainer";
  const Json node = testing::GpuNode("h100", 4, "H100", 81559);
  const Json events = Json::array({Event("TesseraAllocateFailed", "no pending container matches", "2026-03-01T12:29:05Z"),
                                   Event("Scheduled", "ignored", "2026-03-01T12:25:00Z")});
  const PodDetail d = BuildPodDetail(pod, &node, events);
  ASSERT_EQ(d.events.size(), 1u);
  // A refused (forged or copied) assignment is the node agent's too.
  const Json refused = Json::array({Event("TesseraAssignmentRefused", "not handed out", "2026-03-01T12:29:05Z")});
  EXPECT_EQ(BuildPodDetail(pod, &node, refused).events.size(), 1u);
  const std::string text = RenderPodDetail(d, {}, kNow);
  EXPECT_EQ(text,
            "Pod:        ml/train\n"
            "Node:       h100\n"
            "Phase:      Pending\n"
            "Assigned:   2026-03-01T12:25:00Z\n"
            "Allocated:  trainer; waiting: sidecar\n"
            "\n"
            "CONTAINER  GPU  MODEL  MEMORY GiB  CORE  ALLOCATED  UUID\n"
            "trainer      0  H100         79.6  100%  yes        GPU-h100-0\n"
            "sidecar      2  H100          4.0   20%  no         GPU-h100-2\n"
            "\n"
            "Events:\n"
            "  TYPE     REASON                 AGE  COUNT  MESSAGE\n"
            "  Warning  TesseraAllocateFailed  60s      2  no pending container matches\n");
  const auto doc = PodDetailToJson(d);
  EXPECT_EQ(doc["containers"][0]["allocated"], true);
  EXPECT_EQ(doc["containers"][1]["allocated"], false);
  EXPECT_EQ(doc["containers"][1]["gpus"][0]["model"], "H100");
  EXPECT_EQ(doc["events"][0]["reason"], "TesseraAllocateFailed");
}

TEST(PodViewTest, SaysWhenTheShareIsNotEnforcedOrUnderMps) {
  Json pod = testing::AssignedPod("ml", "raw", testing::OnNode("n", "main", {{0, "GPU-0", 8192, 200}}), "Running",
                                  "2026-03-01T12:25:00Z");
  EXPECT_EQ(PodDetailToJson(BuildPodDetail(pod, nullptr, Json::array()))["isolation"], "hook");
  EXPECT_EQ(RenderPodDetail(BuildPodDetail(pod, nullptr, Json::array()), {}, kNow).find("Isolation:"),
            std::string::npos);
  pod["metadata"]["annotations"]["tessera.io/isolation"] = "none";
  PodDetail d = BuildPodDetail(pod, nullptr, Json::array());
  EXPECT_NE(RenderPodDetail(d, {}, kNow)
                .find("Assigned:   2026-03-01T12:25:00Z\n"
                      "Isolation:  none: not enforced (no interception library; tessera.io/isolation)\n"),
            std::string::npos)
      << RenderPodDetail(d, {}, kNow);
  EXPECT_EQ(PodDetailToJson(d)["isolation"], "none");
  pod["metadata"]["annotations"]["tessera.io/isolation"] = "mps";
  EXPECT_NE(RenderPodDetail(BuildPodDetail(pod, nullptr, Json::array()), {}, kNow)
                .find("Isolation:  mps: held by NVIDIA MPS (tessera.io/isolation)\n"),
            std::string::npos);
}

TEST(PodViewTest, UnplacedPodShowsTheSchedulersReason) {
  Json pod = testing::AssignedPod("default", "too-big", {});
  pod["spec"]["containers"] = Json::array({{{"name", "m"}, {"resources", {{"limits", {{"tessera.io/gpu-mem", "120000"}}}}}}});
  const Json events = Json::array({Event("FailedScheduling", "0/4 nodes are available", "2026-03-01T12:00:05Z")});
  const std::string text = RenderPodDetail(BuildPodDetail(pod, nullptr, events), {}, kNow);
  EXPECT_NE(text.find("Node:       (not bound)"), std::string::npos) << text;
  EXPECT_NE(text.find("Assignment: none yet: waiting for tessera-scheduler"), std::string::npos) << text;
  EXPECT_NE(text.find("FailedScheduling  30m      2  0/4 nodes are available"), std::string::npos) << text;
}

TEST(PodViewTest, UnusableAssignmentIsNamed) {
  Json pod = testing::AssignedPod("default", "x", testing::OnNode("n", "c", {{0, "", 1, 1}}));
  pod["metadata"]["annotations"]["tessera.io/assignment"] = "{";
  const std::string text = RenderPodDetail(BuildPodDetail(pod, nullptr, Json::array()), {}, kNow);
  EXPECT_NE(text.find("Assignment: unusable: tessera.io/assignment: not valid JSON"), std::string::npos) << text;
  EXPECT_NE(text.find("Events:     none from tessera-node\n"), std::string::npos) << text;
}

TEST(PodViewTest, AgesAreShort) {
  EXPECT_EQ(FormatAge(kNow - seconds(5), kNow), "5s");
  EXPECT_EQ(FormatAge(kNow - seconds(600), kNow), "10m");
  EXPECT_EQ(FormatAge(kNow - seconds(3 * 3600), kNow), "3h");
  EXPECT_EQ(FormatAge(kNow - seconds(3 * 86400), kNow), "3d");
  EXPECT_EQ(FormatAge(kNow + seconds(5), kNow), "-");
}

}  // namespace
}  // namespace tessera::kubectl
