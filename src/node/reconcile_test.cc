#include "node/reconcile.h"

#include <gtest/gtest.h>

#include "core/codec.h"
#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using nlohmann::json;

json Pod(const std::string& name, const std::optional<std::string>& assignment) {
  json pod = {{"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", name + "-uid"}}}};
  if (assignment) pod["metadata"]["annotations"][std::string(core::kAssignmentAnnotation)] = *assignment;
  return pod;
}

std::string Assign(const std::string& node, const std::vector<core::ContainerAssignment>& containers) {
  return *core::EncodeAssignment(core::Assignment{node, containers});
}

class ReconcileTest : public ::testing::Test {
 protected:
  std::vector<PodAssignment> Pods() {
    json items = json::array();
    items.push_back(Pod("one", Assign("n1", {{"main", {{0, "GPU-a", 4096, 300}}}})));
    items.push_back(Pod("two", Assign("n1", {{"init", {}}, {"main", {{1, "GPU-b", 1024, 100}, {0, "GPU-a", 1024, 100}}}})));
    items.push_back(Pod("bare", std::nullopt));
    items.push_back(Pod("broken", "{\"v\":1,"));
    items.push_back(Pod("elsewhere", Assign("n2", {{"main", {{0, "GPU-z", 1, 1}}}})));
    return PodAssignmentsFromList(testing::DecodedAll(items));
  }
};

TEST_F(ReconcileTest, RecordsThatAgreeAreNoMismatch) {
  std::vector<KubeletRecord> records = {
      {"ns", "one", "main", {"GPU-a-3"}},
      {"ns", "two", "main", {"GPU-a-0", "GPU-b-7"}},  // order does not matter
      {"ns", "two", "init", {}},                      // no device of ours
      {"ns", "deleted", "main", {"GPU-a-1"}},         // not (any more) in the API server
  };
  EXPECT_TRUE(FindMismatches(records, Pods(), "n1").empty());
}

TEST_F(ReconcileTest, NamesEachKindOfMismatch) {
  std::vector<KubeletRecord> records = {
      {"ns", "one", "main", {"GPU-b-0"}},             // wrong GPU
      {"ns", "two", "main", {"GPU-a-0"}},             // one slot short
      {"ns", "two", "init", {"GPU-a-1"}},             // container has no GPU in the assignment
      {"ns", "two", "sidecar", {"GPU-a-2"}},          // container not in the assignment
      {"ns", "bare", "main", {"GPU-a-4"}},
      {"ns", "broken", "main", {"GPU-a-5"}},
      {"ns", "elsewhere", "main", {"GPU-a-6"}},
      {"ns", "one", "main", {"not-a-slot"}},          // unparseable ID, same count
  };
  auto m = FindMismatches(records, Pods(), "n1");
  ASSERT_EQ(m.size(), 8u);
  EXPECT_EQ(m[0].kind, MismatchKind::kWrongGpus);
  EXPECT_EQ(m[0].uid, "one-uid");
  EXPECT_EQ(m[0].Key(), "one-uid/main");
  EXPECT_EQ(m[0].message,
            "pod ns/one container main: the kubelet gave it 1 slot(s) [GPU-b-0], its assignment wants 1 slot(s) "
            "on [GPU-a]");
  EXPECT_EQ(m[1].kind, MismatchKind::kWrongSlotCount);
  EXPECT_NE(m[1].message.find("wants 2 slot(s) on [GPU-b, GPU-a]"), std::string::npos) << m[1].message;
  EXPECT_EQ(m[2].kind, MismatchKind::kContainerNotAssigned);
  EXPECT_EQ(m[3].kind, MismatchKind::kContainerNotAssigned);
  EXPECT_EQ(m[4].kind, MismatchKind::kNoAssignment);
  EXPECT_NE(m[4].message.find("has no tessera.io/assignment annotation"), std::string::npos) << m[4].message;
  EXPECT_EQ(m[5].kind, MismatchKind::kUnreadableAssignment);
  EXPECT_NE(m[5].message.find("is unreadable: "), std::string::npos) << m[5].message;
  EXPECT_EQ(m[6].kind, MismatchKind::kUnreadableAssignment);
  EXPECT_NE(m[6].message.find("names node n2, not n1"), std::string::npos) << m[6].message;
  EXPECT_EQ(m[7].kind, MismatchKind::kWrongGpus);
  EXPECT_EQ(MismatchKindName(m[7].kind), "wrong-gpus");
}

TEST(MismatchTrackerTest, ReportsEachMismatchOnceWhileItLasts) {
  MismatchTracker tracker;
  Mismatch a{"ns", "p", "uid-1", "main", MismatchKind::kWrongGpus, "x"};
  Mismatch b{"ns", "q", "uid-2", "main", MismatchKind::kWrongSlotCount, "y"};
  EXPECT_EQ(tracker.New({a}).size(), 1u);
  EXPECT_TRUE(tracker.New({a}).empty());
  auto fresh = tracker.New({a, b, b});
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].pod, "q");
  EXPECT_TRUE(tracker.New({b}).empty());  // a went away
  EXPECT_EQ(tracker.New({a, b}).size(), 1u);  // a came back: reported again
  // A new pod with the same name is another uid: reported.
  Mismatch a2 = a;
  a2.uid = "uid-3";
  EXPECT_EQ(tracker.New({a2, b}).size(), 1u);
}

}  // namespace
}  // namespace tessera::node
