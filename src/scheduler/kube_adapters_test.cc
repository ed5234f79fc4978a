#include "scheduler/kube_adapters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "kube/events.h"
#include "kube/fake_api.h"
#include "kube/paths.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using std::chrono::seconds;

json Pod(const std::string& name) { return {{"metadata", {{"name", name}}}, {"spec", json::object()}}; }

std::string UidOf(const json& obj) { return obj["metadata"]["uid"].get<std::string>(); }

TEST(KubeAdaptersTest, BinderBindsWithTheAssignmentInOneUpdate) {
  kube::FakeApi api;
  const std::string uid = UidOf(*api.Upsert(kube::PodsPath("ns"), Pod("p")));
  ApiBinder binder(api);
  ASSERT_TRUE(binder.Bind("ns", "p", uid, "n1", {{"tessera.io/assignment", "a"}}).ok());
  json pod = *api.Peek(kube::PodPath("ns", "p"));
  EXPECT_EQ(pod["spec"]["nodeName"], "n1");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/assignment"], "a");
  EXPECT_EQ(pod["metadata"]["resourceVersion"], "2") << "one write";
  // Bound already, or replaced by a pod of the same name: the extender releases the share.
  EXPECT_EQ(binder.Bind("ns", "p", uid, "n2", {}).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(api.Remove(kube::PodPath("ns", "p")).ok());
  ASSERT_TRUE(api.Upsert(kube::PodsPath("ns"), Pod("p")).ok());
  EXPECT_EQ(binder.Bind("ns", "p", uid, "n1", {}).code(), StatusCode::kFailedPrecondition);
}

TEST(KubeAdaptersTest, BinderKeepsAtMostItsLimitOfBindsInFlight) {
  kube::FakeApi api;
  constexpr int kPods = 12;
  constexpr int kLimit = 3;
  std::vector<std::string> uids;
  for (int i = 0; i < kPods; ++i) uids.push_back(UidOf(*api.Upsert(kube::PodsPath("ns"), Pod("p" + std::to_string(i)))));
  std::mutex mu;
  int in_flight = 0, most = 0;
  api.SetHook([&](const kube::FakeApi::Call&) {
    {
      std::lock_guard lock(mu);
      most = std::max(most, ++in_flight);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the API server at work
    std::lock_guard lock(mu);
    --in_flight;
    return Status();
  });
  ApiBinder binder(api, kLimit);
  std::vector<std::thread> binds;
  std::atomic<int> ok{0};
  for (int i = 0; i < kPods; ++i) {
    binds.emplace_back([&, i] { ok += binder.Bind("ns", "p" + std::to_string(i), uids[i], "n1", {}).ok(); });
  }
  for (auto& t : binds) t.join();
  EXPECT_EQ(ok.load(), kPods);  // every bind went through, in turns
  EXPECT_LE(most, kLimit);
  EXPECT_GT(most, 0);
}

TEST(KubeAdaptersTest, PreemptionEvictsAndRecordsEvents) {
  kube::FakeApi api;
  const std::string uid = UidOf(*api.Upsert(kube::PodsPath("ns"), Pod("victim")));
  ApiPreemption preemption(api);
  EXPECT_TRUE(preemption.Evict("ns", "victim", uid, /*dry_run=*/true).ok());
  EXPECT_TRUE(api.Peek(kube::PodPath("ns", "victim")).has_value());
  EXPECT_TRUE(preemption.Evict("ns", "victim", uid, false).ok());
  EXPECT_FALSE(api.Peek(kube::PodPath("ns", "victim")).has_value());
  EXPECT_EQ(preemption.Evict("ns", "victim", uid, false).code(), StatusCode::kNotFound);

  preemption.RecordEvent("ns", "victim", uid, "Normal", "TesseraPreempted", "evicted for ns/high");
  auto events = api.List(kube::EventsPath("ns"));
  ASSERT_TRUE(events.ok());
  ASSERT_EQ((*events)["items"].size(), 1u);
  const json& e = (*events)["items"][0];
  EXPECT_EQ(e["involvedObject"]["name"], "victim");
  EXPECT_EQ(e["involvedObject"]["uid"], uid);
  EXPECT_EQ(e["reason"], "TesseraPreempted");
  EXPECT_EQ(e["type"], "Normal");
  EXPECT_EQ(e["source"]["component"], "tessera-scheduler");

  // Best effort: an Event the API server refuses is dropped, not thrown.
  api.SetHook([](const kube::FakeApi::Call&) { return Status(StatusCode::kUnavailable, "away"); });
  preemption.RecordEvent("ns", "victim", uid, "Warning", "R", "m");
}

TEST(KubeAdaptersTest, WakeTouchesRecentRejectionsOfTheSamePodOnly) {
  kube::FakeApi api;
  const std::string uid_a = UidOf(*api.Upsert(kube::PodsPath("ns"), Pod("a")));
  ASSERT_TRUE(api.Upsert(kube::PodsPath("ns"), Pod("b")).ok());
  ASSERT_TRUE(api.Upsert(kube::PodsPath("ns"), Pod("old")).ok());
  RejectedPods rejected;
  const auto now = RejectedPods::Clock::now();
  rejected.Note("ns/old", "", now - seconds(30));   // outside the window: not woken
  rejected.Note("ns/a", uid_a, now - seconds(1));
  rejected.Note("ns/b", "uid-of-an-older-b", now);  // b was replaced since: left alone
  rejected.Note("ns/gone", "", now);                // deleted meanwhile: nothing to touch
  const auto wall = std::chrono::system_clock::time_point{} + seconds(1700000000);
  EXPECT_EQ(WakeRejected(api, rejected, now, wall), 1);
  json a = *api.Peek(kube::PodPath("ns", "a"));
  EXPECT_EQ(a["metadata"]["annotations"][kRoomFreedAnnotation], "2023-11-14T22:13:20.000000Z");
  EXPECT_FALSE((*api.Peek(kube::PodPath("ns", "b")))["metadata"].contains("annotations"));
  EXPECT_FALSE((*api.Peek(kube::PodPath("ns", "old")))["metadata"].contains("annotations"));
  EXPECT_EQ(api.CountCalls("PATCH"), 3) << "a, b and gone were tried";
  EXPECT_EQ(WakeRejected(api, rejected, now, wall), 0) << "taken out once woken";
}

TEST(KubeAdaptersTest, WakeIsBoundedPerRelease) {
  kube::FakeApi api;
  RejectedPods rejected;
  const auto now = RejectedPods::Clock::now();
  for (size_t i = 0; i < kMaxWakesPerRelease + 3; ++i) {
    const std::string name = "p" + std::to_string(i);
    ASSERT_TRUE(api.Upsert(kube::PodsPath("ns"), Pod(name)).ok());
    rejected.Note("ns/" + name, "", now);
  }
  EXPECT_EQ(WakeRejected(api, rejected, now, std::chrono::system_clock::now()), static_cast<int>(kMaxWakesPerRelease));
  EXPECT_EQ(WakeRejected(api, rejected, now, std::chrono::system_clock::now()), 3);
}

}  // namespace
}  // namespace tessera::scheduler
