#include "node/event_recorder.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include <vector>

#include "core/thread_annotations.h"

namespace tessera::node {
namespace {

struct Posted {
  Mutex mu;
  std::vector<std::pair<std::string, nlohmann::json>> items TESSERA_GUARDED_BY(mu);
};

kube::EventSpec Spec(const std::string& pod, const std::string& message) {
  kube::EventSpec spec;
  spec.object.ns = "ns";
  spec.object.name = pod;
  spec.object.uid = pod + "-uid";
  spec.reason = "TesseraAllocateFailed";
  spec.message = message;
  spec.component = "tessera-node";
  return spec;
}

EventRecorderOptions Options(size_t max_queued, std::chrono::milliseconds window) {
  EventRecorderOptions o;
  o.max_queued = max_queued;
  o.dedupe_window = window;
  return o;
}

std::shared_ptr<spdlog::logger> NullLog() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

TEST(EventRecorderTest, PostsOnceWithinTheWindow) {
  Posted posted;
  EventRecorder recorder(
      [&](const std::string& path, const nlohmann::json& body) {
        MutexLock lock(posted.mu);
        posted.items.emplace_back(path, body);
        return Status::Ok();
      },
      Options(16, std::chrono::hours(1)), NullLog());
  EXPECT_TRUE(recorder.Record(Spec("a", "no GPU")));
  EXPECT_FALSE(recorder.Record(Spec("a", "no GPU")));      // identical: dropped
  EXPECT_TRUE(recorder.Record(Spec("a", "other reason")));  // another message
  EXPECT_TRUE(recorder.Record(Spec("b", "no GPU")));        // another pod
  recorder.FlushForTest();
  MutexLock lock(posted.mu);
  ASSERT_EQ(posted.items.size(), 3u);
  EXPECT_EQ(posted.items[0].first, "/api/v1/namespaces/ns/events");
  EXPECT_EQ(posted.items[0].second["involvedObject"]["uid"], "a-uid");
  EXPECT_EQ(posted.items[2].second["message"], "no GPU");
}

TEST(EventRecorderTest, PostsAgainAfterTheWindowAndSurvivesFailures) {
  int calls = 0;
  EventRecorder recorder(
      [&](const std::string&, const nlohmann::json&) {
        ++calls;
        return Status(StatusCode::kUnavailable, "API server away");
      },
      Options(256, std::chrono::milliseconds(0)), NullLog());
  EXPECT_TRUE(recorder.Record(Spec("a", "x")));
  EXPECT_TRUE(recorder.Record(Spec("a", "x")));
  recorder.FlushForTest();
  EXPECT_EQ(calls, 2);
}

TEST(EventRecorderTest, BoundsTheQueue) {
  Mutex gate;
  gate.Lock();  // the poster blocks until released, so events pile up
  EventRecorder recorder(
      [&](const std::string&, const nlohmann::json&) {
        MutexLock wait(gate);
        return Status::Ok();
      },
      Options(2, std::chrono::seconds(5)), NullLog());
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += recorder.Record(Spec("p" + std::to_string(i), "x")) ? 1 : 0;
  gate.Unlock();
  recorder.FlushForTest();
  EXPECT_GE(accepted, 2);
  EXPECT_LE(accepted, 3);  // two queued, plus at most one taken by the thread first
}

}  // namespace
}  // namespace tessera::node
