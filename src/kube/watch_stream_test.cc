#include "kube/watch_stream.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera::kube {
namespace {

std::string Line(const std::string& type, const nlohmann::json& object) {
  return nlohmann::json{{"type", type}, {"object", object}}.dump() + "\n";
}

nlohmann::json Pod(const std::string& name, const std::string& rv) {
  return {{"kind", "Pod"}, {"metadata", {{"name", name}, {"namespace", "ns"}, {"resourceVersion", rv}}}};
}

struct Collector {
  std::vector<WatchEvent> events;
  std::function<bool(const WatchEvent&)> fn() {
    return [this](const WatchEvent& e) {
      events.push_back(e);
      return true;
    };
  }
};

TEST(WatchStreamDecoderTest, EventsSplitAcrossChunksAtEveryOffset) {
  const std::string stream = Line("ADDED", Pod("a", "1")) + Line("MODIFIED", Pod("a", "2")) +
                             Line("BOOKMARK", {{"kind", "Pod"}, {"metadata", {{"resourceVersion", "5"}}}}) +
                             Line("DELETED", Pod("a", "6"));
  for (size_t cut1 = 0; cut1 <= stream.size(); cut1 += 7) {
    for (size_t cut2 = cut1; cut2 <= stream.size(); cut2 += 13) {
      WatchStreamDecoder decoder("GET /w");
      Collector c;
      for (auto part : {stream.substr(0, cut1), stream.substr(cut1, cut2 - cut1), stream.substr(cut2)}) {
        auto more = decoder.Feed(part, c.fn());
        ASSERT_TRUE(more.ok()) << more.status().ToString();
        ASSERT_TRUE(more.value());
      }
      ASSERT_EQ(c.events.size(), 4u) << cut1 << "," << cut2;
      EXPECT_EQ(c.events[0].type, "ADDED");
      EXPECT_EQ(c.events[1].object["metadata"]["resourceVersion"], "2");
      EXPECT_EQ(c.events[2].type, "BOOKMARK");
      EXPECT_EQ(c.events[2].object["metadata"]["resourceVersion"], "5");
      EXPECT_EQ(c.events[3].type, "DELETED");
      EXPECT_EQ(decoder.pending(), 0u);
    }
  }
}

TEST(WatchStreamDecoderTest, ByteByByteAndPartialLineHeldBack) {
  const std::string stream = Line("ADDED", Pod("a", "1")) + "\r\n" + Line("ADDED", Pod("b", "2"));
  WatchStreamDecoder decoder("GET /w");
  Collector c;
  for (char ch : stream) ASSERT_TRUE(decoder.Feed(std::string_view(&ch, 1), c.fn()).ok());
  EXPECT_EQ(c.events.size(), 2u);
  ASSERT_TRUE(decoder.Feed("{\"type\":\"ADDED\"", c.fn()).ok());
  EXPECT_EQ(c.events.size(), 2u);
  EXPECT_EQ(decoder.pending(), 15u);
}

TEST(WatchStreamDecoderTest, Error410IsOutOfRange) {
  WatchStreamDecoder decoder("GET /api/v1/pods?watch=1");
  Collector c;
  const nlohmann::json gone = {{"kind", "Status"},
                               {"status", "Failure"},
                               {"message", "The resourceVersion for the provided watch is too old."},
                               {"reason", "Expired"},
                               {"code", 410}};
  auto r = decoder.Feed(Line("ADDED", Pod("a", "1")) + Line("ERROR", gone) + Line("ADDED", Pod("b", "2")), c.fn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(),
            "GET /api/v1/pods?watch=1: 410 Expired: The resourceVersion for the provided watch is too old.");
  EXPECT_EQ(c.events.size(), 1u);  // nothing after the error
}

TEST(WatchStreamDecoderTest, OtherErrorEventKeepsItsCode) {
  WatchStreamDecoder decoder("GET /w");
  Collector c;
  auto r = decoder.Feed(Line("ERROR", {{"kind", "Status"}, {"code", 500}, {"reason", "InternalError"},
                                       {"message", "etcd down"}}),
                        c.fn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST(WatchStreamDecoderTest, ConsumerStops) {
  WatchStreamDecoder decoder("GET /w");
  int seen = 0;
  auto r = decoder.Feed(Line("ADDED", Pod("a", "1")) + Line("ADDED", Pod("b", "2")), [&](const WatchEvent&) {
    ++seen;
    return false;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value());
  EXPECT_EQ(seen, 1);
}

TEST(WatchStreamDecoderTest, MalformedLineIsInternal) {
  WatchStreamDecoder decoder("GET /w");
  Collector c;
  auto r = decoder.Feed("this is not json\n", c.fn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("malformed watch event: this is not json"), std::string::npos);
  WatchStreamDecoder d2("GET /w");
  EXPECT_FALSE(d2.Feed("{\"object\":{}}\n", c.fn()).ok());  // no type
}

}  // namespace
}  // namespace tessera::kube
