#include "kube/events.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

using nlohmann::json;

TEST(EventsTest, BuildsAWarningOnAPod) {
  EventSpec spec;
  spec.object.ns = "team-a";
  spec.object.name = "trainer-0";
  spec.object.uid = "1234-abcd";
  spec.reason = "TesseraAllocationMismatch";
  spec.message = "container main got 1 slot on GPU-b, assigned GPU-a";
  spec.component = "tessera-node";
  spec.host = "gpu-node-1";
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));  // 2026-01-01
  const json expected = json::parse(R"({
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"generateName": "trainer-0.", "namespace": "team-a"},
    "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": "team-a", "name": "trainer-0",
                       "uid": "1234-abcd"},
    "type": "Warning", "reason": "TesseraAllocationMismatch",
    "message": "container main got 1 slot on GPU-b, assigned GPU-a",
    "source": {"component": "tessera-node", "host": "gpu-node-1"},
    "reportingComponent": "tessera-node", "reportingInstance": "gpu-node-1",
    "firstTimestamp": "2026-01-01T00:00:00.000000Z", "lastTimestamp": "2026-01-01T00:00:00.000000Z",
    "count": 1
  })");
  EXPECT_EQ(BuildEvent(spec, t), expected) << BuildEvent(spec, t).dump(2);
}

TEST(EventsTest, OmitsAnEmptyUidAndHost) {
  EventSpec spec;
  spec.object.ns = "ns";
  spec.object.name = "p";
  spec.type = "Normal";
  spec.reason = "R";
  spec.component = "c";
  json e = BuildEvent(spec, std::chrono::system_clock::time_point{});
  EXPECT_FALSE(e["involvedObject"].contains("uid"));
  EXPECT_FALSE(e["source"].contains("host"));
  EXPECT_EQ(e["type"], "Normal");
}

TEST(EventsTest, CutsLongMessagesAtACharacterBoundary) {
  EXPECT_EQ(TruncateMessage("short", 10), "short");
  EXPECT_EQ(TruncateMessage("0123456789", 10), "0123456789");
  EXPECT_EQ(TruncateMessage("0123456789A", 10), "0123456...");
  // "é" is two bytes (C3 A9): a cut inside it drops the whole character.
  EXPECT_EQ(TruncateMessage("abcde\xc3\xa9xyz", 9), "abcde...");
  EXPECT_EQ(TruncateMessage(std::string(5000, 'x')).size(), kMaxEventMessageBytes);
}

TEST(EventsTest, Path) { EXPECT_EQ(EventsPath("team-a"), "/api/v1/namespaces/team-a/events"); }

}  // namespace
}  // namespace tessera::kube
