// The watch cache of the node's pods against a fake API server: LIST until
// synced, then adds, updates and deletes through the watch, our own writes
// waited for, and a relist after missed events.
#include "node/node_pods.h"

#include <gtest/gtest.h>

#include "kube/fake_api.h"
#include "kube/paths.h"
#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using nlohmann::json;
using testing::AssignedPod;
using testing::WaitUntil;

std::vector<std::string> PendingNames(const NodePods::Snapshot& snap) {
  std::vector<std::string> out;
  for (const PendingPod& p : snap.pending) out.push_back(p.name);
  return out;
}

class NodePodsTest : public ::testing::Test {
 protected:
  NodePodsTest() : pods_(api_, "n1", testing::Quiet(), Options()) {}

  static NodePodsOptions Options() {
    NodePodsOptions options;
    options.write_wait = std::chrono::milliseconds(20);
    return options;
  }
  json Put(const json& pod) { return api_.Upsert(kube::PodsPath("ns"), pod).value(); }
  bool CacheHas(const std::string& name, const std::string& rv = "") {
    auto cached = pods_.Cached();
    if (!cached) return false;
    for (const auto& p : *cached) {
      if (p->name == name && (rv.empty() || p->resource_version == rv)) return true;
    }
    return false;
  }
  void StartSynced() {
    ASSERT_TRUE(pods_.Start().ok());
    ASSERT_TRUE(WaitUntil([&] { return pods_.Cached().has_value(); }));
  }

  kube::FakeApi api_;  // outlives the cache (declared first)
  NodePods pods_;
};

TEST_F(NodePodsTest, ListsUntilTheWatchHasSyncedThenReadsTheCache) {
  Put(AssignedPod("a", "2024-01-01T00:00:02Z", {{"main", 0, 4096, 30}}));
  json elsewhere = AssignedPod("b", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}});
  elsewhere["spec"]["nodeName"] = "n2";
  Put(elsewhere);
  EXPECT_FALSE(pods_.Cached().has_value());
  auto listed = pods_.Read(false);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_TRUE(listed->listed) << "not started: a LIST";
  EXPECT_EQ(PendingNames(*listed), std::vector<std::string>{"a"});
  ASSERT_EQ(listed->pods.size(), 1u) << "only this node's pods";

  StartSynced();
  const int lists = api_.CountCalls("LIST");
  auto cached = pods_.Read(false);
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->listed);
  EXPECT_EQ(PendingNames(*cached), std::vector<std::string>{"a"});
  EXPECT_EQ(api_.CountCalls("LIST"), lists);
  auto fresh = pods_.Read(true);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->listed) << "fresh: always a LIST";
}

TEST_F(NodePodsTest, TheCacheFollowsAddsUpdatesAndDeletes) {
  StartSynced();
  json a = Put(AssignedPod("a", "2024-01-01T00:00:02Z", {{"main", 0, 4096, 30}}));
  json b = Put(AssignedPod("b", "2024-01-01T00:00:01Z", {{"main", 1, 4096, 30}}));
  ASSERT_TRUE(WaitUntil([&] { return CacheHas("a") && CacheHas("b"); }));
  EXPECT_EQ(PendingNames(pods_.Read(false).value()), (std::vector<std::string>{"b", "a"})) << "oldest first";

  // An update: b allocated by someone, no longer pending.
  json done = *api_.Patch(kube::PodPath("ns", "b"), kube::PatchType::kMerge,
                          {{"metadata", {{"annotations", {{"tessera.io/allocated", "main"}}}}}});
  ASSERT_TRUE(WaitUntil([&] { return CacheHas("b", done["metadata"]["resourceVersion"]); }));
  auto read = pods_.Read(false);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(PendingNames(*read), std::vector<std::string>{"a"});
  EXPECT_EQ(read->pods.size(), 2u) << "every pod of the node is still handed out for the hand-out check";

  // A delete.
  ASSERT_TRUE(api_.Remove(kube::PodPath("ns", "a")).ok());
  ASSERT_TRUE(WaitUntil([&] { return !CacheHas("a"); }));
  EXPECT_TRUE(PendingNames(pods_.Read(false).value()).empty());
}

TEST_F(NodePodsTest, ReadWaitsForOurOwnWriteElseLists) {
  Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  StartSynced();
  api_.HoldWatches(true);
  json patched = *api_.Patch(kube::PodPath("ns", "a"), kube::PatchType::kMerge,
                             {{"metadata", {{"annotations", {{"tessera.io/allocated", "main"}}}}}});
  pods_.NoteWrite(patched);
  // The watch cannot deliver our write: after write_wait, a LIST, which has it.
  auto read = pods_.Read(false);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->listed);
  EXPECT_TRUE(read->pending.empty());
  api_.HoldWatches(false);
  ASSERT_TRUE(WaitUntil([&] { return CacheHas("a", patched["metadata"]["resourceVersion"]); }));
  read = pods_.Read(false);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->listed) << "caught up: the cache again";
  EXPECT_TRUE(read->pending.empty());

  // A write whose version cannot be compared: LIST until a comparable one.
  pods_.NoteWrite({{"metadata", {{"resourceVersion", "not-a-number"}}}});
  EXPECT_TRUE(pods_.Read(false).value().listed);
  pods_.NoteWrite(patched);
  EXPECT_FALSE(pods_.Read(false).value().listed);
}

TEST_F(NodePodsTest, MissedEventsAreMadeUpByARelist) {
  Put(AssignedPod("gone", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  StartSynced();
  ASSERT_TRUE(CacheHas("gone"));
  // The watch misses the delete and the add, then its history expires (410).
  api_.HoldWatches(true);
  ASSERT_TRUE(api_.Remove(kube::PodPath("ns", "gone")).ok());
  Put(AssignedPod("new", "2024-01-01T00:00:02Z", {{"main", 0, 4096, 30}}));
  const int lists = api_.CountCalls("LIST");
  api_.ExpireWatches();
  api_.HoldWatches(false);
  ASSERT_TRUE(WaitUntil([&] { return !CacheHas("gone") && CacheHas("new"); }));
  EXPECT_EQ(api_.CountCalls("LIST"), lists + 1) << "one relist";
  EXPECT_EQ(PendingNames(pods_.Read(false).value()), std::vector<std::string>{"new"});
}

TEST_F(NodePodsTest, ListNodePodsListsThisNodeOrSaysWhyNot) {
  Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  json other = AssignedPod("b", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}});
  other["spec"]["nodeName"] = "n2";
  Put(other);
  auto pods = ListNodePods(api_, "n1");
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ(pods->size(), 1u);
  EXPECT_EQ((*pods)[0]->name, "a");
  api_.SetHook([](const kube::FakeApi::Call&) { return Status(StatusCode::kUnavailable, "away"); });
  EXPECT_EQ(ListNodePods(api_, "n1").status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::node
