#include "node/identify.h"

#include <gtest/gtest.h>

#include "core/codec.h"
#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using nlohmann::json;

// The pods are built as the API server sends them (JSON) and decoded as the
// node agent's pod cache decodes them (testing::Decoded) before identify
// reads them.

// A pod bound to n1 whose containers hold the given GPU uuids (each share 4096 MiB, 30 %).
json Pod(const std::string& name, const std::string& assigned_at,
         const std::vector<std::pair<std::string, std::vector<std::string>>>& containers,
         const std::string& allocated = "") {
  core::Assignment a{"n1", {}};
  json spec_containers = json::array();
  for (const auto& [cname, uuids] : containers) {
    core::ContainerAssignment ca{cname, {}};
    for (size_t i = 0; i < uuids.size(); ++i) ca.gpus.push_back({static_cast<int>(i), uuids[i], 4096, 300});
    a.containers.push_back(ca);
    spec_containers.push_back({{"name", cname}});
  }
  json annotations = {{"tessera.io/assignment", *core::EncodeAssignment(a)},
                      {"tessera.io/assigned-at", assigned_at}};
  if (!allocated.empty()) annotations["tessera.io/allocated"] = allocated;
  return {{"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", "uid-" + name}, {"resourceVersion", "7"},
                        {"creationTimestamp", "2024-01-01T00:00:00Z"}, {"annotations", annotations}}},
          {"spec", {{"nodeName", "n1"}, {"containers", spec_containers}}},
          {"status", {{"phase", "Pending"}}}};
}

TEST(PendingPodsTest, SortedOldestFirstAndFiltered) {
  json done = Pod("done", "2024-01-01T00:00:01Z", {{"main", {"GPU-a"}}}, "main");
  json other_node = Pod("elsewhere", "2024-01-01T00:00:01Z", {{"main", {"GPU-a"}}});
  other_node["spec"]["nodeName"] = "n2";
  json finished = Pod("finished", "2024-01-01T00:00:01Z", {{"main", {"GPU-a"}}});
  finished["status"]["phase"] = "Succeeded";
  json no_assignment = {{"metadata", {{"namespace", "ns"}, {"name", "plain"}}}, {"spec", {{"nodeName", "n1"}}}};
  json items = json::array({Pod("new", "2024-01-01T00:00:09Z", {{"main", {"GPU-a"}}}),
                            Pod("old", "2024-01-01T00:00:02Z", {{"main", {"GPU-b"}}}), done, other_node, finished,
                            no_assignment});
  auto pending = PendingPodsFromList(testing::DecodedAll(items), "n1");
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].Key(), "ns/old");
  EXPECT_EQ(pending[1].Key(), "ns/new");
  EXPECT_EQ(pending[0].uid, "uid-old");
  EXPECT_EQ(pending[0].resource_version, "7");
}

TEST(PendingPodsTest, PendingPodFromGivesOnePodsViewOrNothing) {
  auto p = PendingPodFrom(*testing::Decoded(Pod("p", "t", {{"first", {"GPU-a"}}, {"second", {"GPU-b"}}}, "first")),
                          "n1");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->Key(), "ns/p");
  ASSERT_EQ(p->containers.size(), 1u);
  EXPECT_EQ(p->containers[0].name, "second");
  EXPECT_FALSE(PendingPodFrom(*testing::Decoded(Pod("done", "t", {{"main", {"GPU-a"}}}, "main")), "n1"));
  EXPECT_FALSE(PendingPodFrom(*testing::Decoded(Pod("p", "t", {{"main", {"GPU-a"}}})), "n2"));  // bound elsewhere
  json deleting = Pod("p", "t", {{"main", {"GPU-a"}}});
  deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:05Z";
  EXPECT_FALSE(PendingPodFrom(*testing::Decoded(deleting), "n1").has_value());
}

TEST(PendingPodsTest, PriorityAndCorePolicyComeFromTheAnnotations) {
  json plain = Pod("p", "t", {{"main", {"GPU-a"}}});
  auto p = PendingPodFrom(*testing::Decoded(plain), "n1");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->priority, core::Priority::kNormal);
  EXPECT_FALSE(p->core_hard);
  json high = plain;
  high["metadata"]["annotations"]["tessera.io/priority"] = "high";
  high["metadata"]["annotations"]["tessera.io/gpu-core-policy"] = "hard";
  p = PendingPodFrom(*testing::Decoded(high), "n1");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->priority, core::Priority::kHigh);
  EXPECT_TRUE(p->core_hard);
  json odd = plain;
  odd["metadata"]["annotations"]["tessera.io/priority"] = "urgent";  // unreadable: normal
  odd["metadata"]["annotations"]["tessera.io/gpu-core-policy"] = "share";
  p = PendingPodFrom(*testing::Decoded(odd), "n1");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->priority, core::Priority::kNormal);
  EXPECT_FALSE(p->core_hard);
  json low = plain;
  low["metadata"]["annotations"]["tessera.io/priority"] = "low";
  EXPECT_EQ(PendingPodFrom(*testing::Decoded(low), "n1")->priority, core::Priority::kLow);
}

TEST(PendingPodsTest, ComputeAnnotationsNeedNoAssignment) {
  // A DRA claim's pod has no tessera.io/assignment: its annotations still read.
  json pod = Pod("p", "t", {{"main", {"GPU-a"}}});
  pod["metadata"]["annotations"].erase("tessera.io/assignment");
  pod["metadata"]["annotations"]["tessera.io/priority"] = "low";
  pod["metadata"]["annotations"]["tessera.io/gpu-core-limit"] = "40";
  const ComputeAnnotations got = ComputeAnnotationsOf(*testing::Decoded(pod));
  EXPECT_EQ(got, (ComputeAnnotations{core::Priority::kLow, false, 400}));
  pod["metadata"]["annotations"]["tessera.io/gpu-core-policy"] = "hard";
  EXPECT_EQ(ComputeAnnotationsOf(*testing::Decoded(pod)), (ComputeAnnotations{core::Priority::kLow, true, 0}));
}

TEST(PendingPodsTest, BurstCeilingComesFromTheAnnotation) {
  json plain = Pod("p", "t", {{"main", {"GPU-a"}}});
  EXPECT_EQ(PendingPodFrom(*testing::Decoded(plain), "n1")->core_limit_milli, 0);
  json burst = plain;
  burst["metadata"]["annotations"]["tessera.io/gpu-core-limit"] = "60";
  EXPECT_EQ(PendingPodFrom(*testing::Decoded(burst), "n1")->core_limit_milli, 600);
  // The extender refuses these; should one get here, no ceiling is set.
  for (const char* bad : {"0", "101", "60%", "x"}) {
    json b = plain;
    b["metadata"]["annotations"]["tessera.io/gpu-core-limit"] = bad;
    EXPECT_EQ(PendingPodFrom(*testing::Decoded(b), "n1")->core_limit_milli, 0) << bad;
  }
  json hard = burst;
  hard["metadata"]["annotations"]["tessera.io/gpu-core-policy"] = "hard";
  EXPECT_EQ(PendingPodFrom(*testing::Decoded(hard), "n1")->core_limit_milli, 0);
}

TEST(PendingPodsTest, SortOldestFirstByAssignedAtThenCreationThenName) {
  auto make = [](const std::string& name, const std::string& assigned_at, const std::string& created_at) {
    PendingPod p;
    p.ns = "ns";
    p.name = name;
    p.assigned_at = assigned_at;
    p.created_at = created_at;
    return p;
  };
  std::vector<PendingPod> pods = {make("b", "2024-01-01T00:00:02Z", "c1"), make("z", "2024-01-01T00:00:01Z", "c9"),
                                  make("a", "2024-01-01T00:00:02Z", "c1"), make("y", "2024-01-01T00:00:02Z", "c0")};
  SortOldestFirst(pods);
  std::vector<std::string> order;
  for (const auto& p : pods) order.push_back(p.name);
  EXPECT_EQ(order, (std::vector<std::string>{"z", "y", "a", "b"}));
}

TEST(PendingPodsTest, ContainersFollowSpecOrderAndSkipAllocated) {
  json pod = Pod("p", "t", {{"first", {"GPU-a"}}, {"second", {"GPU-b"}}, {"third", {"GPU-c"}}}, "first");
  auto pending = PendingPodsFromList(testing::DecodedAll(json::array({pod})), "n1");
  ASSERT_EQ(pending.size(), 1u);
  ASSERT_EQ(pending[0].containers.size(), 2u);
  EXPECT_EQ(pending[0].containers[0].name, "second");
  EXPECT_EQ(pending[0].allocated, std::vector<std::string>{"first"});
}

TEST(PendingPodsTest, UnreadableAssignmentIsKeptWithItsError) {
  json pod = Pod("broken", "t", {{"main", {"GPU-a"}}});
  pod["metadata"]["annotations"]["tessera.io/assignment"] = "{not json";
  auto pending = PendingPodsFromList(testing::DecodedAll(json::array({pod})), "n1");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_NE(pending[0].assignment_error.find("unreadable"), std::string::npos);
}

std::vector<PendingPod> Pending(const json& items) { return PendingPodsFromList(testing::DecodedAll(items), "n1"); }

TEST(IdentifyTest, SameSizePodsOnDifferentGpusAreToldApart) {
  auto pending = Pending(json::array({Pod("a", "t1", {{"main", {"GPU-a"}}}), Pod("b", "t2", {{"main", {"GPU-b"}}})}));
  auto who = IdentifyContainer({"GPU-b"}, pending, std::nullopt);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(pending[who->pod].Key(), "ns/b");
  who = IdentifyContainer({"GPU-a"}, pending, std::nullopt);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(pending[who->pod].Key(), "ns/a");
}

TEST(IdentifyTest, MultiGpuContainerMatchesItsSetInAnyOrder) {
  auto pending = Pending(json::array({Pod("one", "t1", {{"main", {"GPU-a"}}}),
                                      Pod("two", "t2", {{"main", {"GPU-a", "GPU-b"}}})}));
  auto who = IdentifyContainer({"GPU-b", "GPU-a"}, pending, std::nullopt);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(pending[who->pod].Key(), "ns/two");
}

TEST(IdentifyTest, OnlyEachPodsNextContainerIsACandidate) {
  // p's second container is on GPU-b, but its first is still waiting.
  auto pending = Pending(json::array({Pod("p", "t1", {{"first", {"GPU-a"}}, {"second", {"GPU-b"}}})}));
  EXPECT_FALSE(IdentifyContainer({"GPU-b"}, pending, std::nullopt).ok());
  auto who = IdentifyContainer({"GPU-a"}, pending, std::nullopt);
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(pending[who->pod].containers[who->container].name, "first");
}

TEST(IdentifyTest, NoMatchNamesTheCandidates) {
  auto pending = Pending(json::array({Pod("a", "t1", {{"main", {"GPU-a"}}})}));
  auto who = IdentifyContainer({"GPU-z"}, pending, std::nullopt);
  ASSERT_FALSE(who.ok());
  EXPECT_EQ(who.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(who.status().message().find("ns/a container main wants 1 slot(s) on [GPU-a]"), std::string::npos)
      << who.status().message();
  EXPECT_NE(who.status().message().find("GPU-z"), std::string::npos);
}

TEST(IdentifyTest, SlotCountMustMatch) {
  auto pending = Pending(json::array({Pod("a", "t1", {{"main", {"GPU-a"}}})}));
  EXPECT_FALSE(IdentifyContainer({"GPU-a", "GPU-a"}, pending, std::nullopt).ok());
}

TEST(IdentifyTest, NothingPendingSaysSo) {
  auto who = IdentifyContainer({"GPU-a"}, {}, std::nullopt);
  ASSERT_FALSE(who.ok());
  EXPECT_NE(who.status().message().find("no pod bound to this node"), std::string::npos);
}

TEST(IdentifyTest, CorruptAssignmentFailsWithItsName) {
  json broken = Pod("broken", "t1", {{"main", {"GPU-a"}}});
  broken["metadata"]["annotations"]["tessera.io/assignment"] = R"({"v":1,"node":"n1","containers":[{"name":"main"}]})";
  auto who = IdentifyContainer({"GPU-a"}, Pending(json::array({broken})), std::nullopt);
  ASSERT_FALSE(who.ok());
  EXPECT_NE(who.status().message().find("ns/broken: assignment annotation unreadable"), std::string::npos)
      << who.status().message();
}

TEST(IdentifyTest, TiesNeedTheSteeredContainer) {
  auto pending = Pending(json::array({Pod("a", "t1", {{"main", {"GPU-a"}}}), Pod("b", "t1", {{"main", {"GPU-a"}}})}));
  auto tied = IdentifyContainer({"GPU-a"}, pending, std::nullopt);
  ASSERT_FALSE(tied.ok());
  EXPECT_NE(tied.status().message().find("ambiguous"), std::string::npos);
  EXPECT_NE(tied.status().message().find("ns/a"), std::string::npos);
  EXPECT_NE(tied.status().message().find("ns/b"), std::string::npos);
  auto who = IdentifyContainer({"GPU-a"}, pending, ContainerRef{"ns/b", "main"});
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(pending[who->pod].Key(), "ns/b");
  EXPECT_FALSE(IdentifyContainer({"GPU-a"}, pending, ContainerRef{"ns/c", "main"}).ok());
}

TEST(IdentifyTest, FailuresListThePodsTheyName) {
  json broken = Pod("broken", "t0", {{"main", {"GPU-a"}}});
  broken["metadata"]["annotations"]["tessera.io/assignment"] = "{";
  auto pending = Pending(json::array({broken, Pod("a", "t1", {{"main", {"GPU-a"}}}),
                                      Pod("b", "t2", {{"main", {"GPU-a"}}}), Pod("c", "t3", {{"main", {"GPU-c"}}})}));
  std::vector<size_t> named = {99};
  EXPECT_FALSE(IdentifyContainer({"GPU-z"}, pending, std::nullopt, &named).ok());
  EXPECT_EQ(named, (std::vector<size_t>{0, 1, 2, 3}));  // no match: every candidate
  EXPECT_FALSE(IdentifyContainer({"GPU-a"}, pending, std::nullopt, &named).ok());
  EXPECT_EQ(named, (std::vector<size_t>{1, 2}));  // a tie: the tied ones
  EXPECT_FALSE(IdentifyContainer({"GPU-a"}, {}, std::nullopt, &named).ok());
  EXPECT_TRUE(named.empty());
}

// An Allocate of one resource is only for containers asking for it: a
// gpushare container and a tessera.io/gpu one on the same GPU are never
// candidates for each other's Allocate.
TEST(KeepPendingForTest, OnlyPodsWhoseNextContainerAsksForTheResource) {
  json tessera = Pod("t", "2024-01-01T00:00:01Z", {{"main", {"GPU-a"}}});
  tessera["spec"]["containers"][0]["resources"] = {{"limits", {{"tessera.io/gpu", "1"}}}};
  json gpushare = Pod("g", "2024-01-01T00:00:02Z", {{"main", {"GPU-a"}}});
  gpushare["spec"]["containers"][0]["resources"] = {{"limits", {{"aliyun.com/gpu-mem", "2"}}}};
  json requests_only = Pod("r", "2024-01-01T00:00:03Z", {{"main", {"GPU-a"}}});
  requests_only["spec"]["containers"][0]["resources"] = {{"requests", {{"tessera.io/gpu", "1"}}}};
  // Its next container asks for nothing (the first, a tessera.io/gpu one, is allocated).
  json next_plain = Pod("n", "2024-01-01T00:00:04Z", {{"first", {"GPU-a"}}, {"second", {"GPU-b"}}}, "first");
  next_plain["spec"]["containers"][0]["resources"] = {{"limits", {{"tessera.io/gpu", "1"}}}};
  json corrupt = Pod("c", "2024-01-01T00:00:05Z", {{"main", {"GPU-a"}}});
  corrupt["metadata"]["annotations"]["tessera.io/assignment"] = "{";
  corrupt["spec"]["containers"][0]["resources"] = {{"limits", {{"aliyun.com/gpu-mem", "1"}}}};
  const json items = json::array({tessera, gpushare, requests_only, next_plain, corrupt});

  auto keys = [&](const std::string& resource) {
    std::vector<PendingPod> pending = PendingPodsFromList(testing::DecodedAll(items), "n1");
    KeepPendingFor(pending, resource);
    std::vector<std::string> out;
    for (const auto& p : pending) out.push_back(p.name);
    return out;
  };
  EXPECT_EQ(keys("tessera.io/gpu"), (std::vector<std::string>{"t", "r"}));
  EXPECT_EQ(keys("aliyun.com/gpu-mem"), (std::vector<std::string>{"g", "c"}));
  EXPECT_TRUE(keys("nvidia.com/gpu").empty());
  EXPECT_EQ(keys("").size(), 5u);

  // So the same slots on GPU-a identify one container per resource, where
  // without the filter they are ambiguous.
  std::vector<PendingPod> pending =
      PendingPodsFromList(testing::DecodedAll(json::array({tessera, gpushare})), "n1");
  EXPECT_FALSE(IdentifyContainer({"GPU-a"}, pending, std::nullopt).ok());
  for (const auto& [resource, name] : {std::pair<std::string, std::string>{"tessera.io/gpu", "t"},
                                       {"aliyun.com/gpu-mem", "g"}}) {
    std::vector<PendingPod> mine = pending;
    KeepPendingFor(mine, resource);
    auto who = IdentifyContainer({"GPU-a"}, mine, std::nullopt);
    ASSERT_TRUE(who.ok()) << who.status().ToString();
    EXPECT_EQ(mine[who->pod].name, name);
  }
}

TEST(KeepPendingForTest, AsksForReadsTheContainersSpec) {
  json pod = Pod("p", "t", {{"main", {"GPU-a"}}});
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"tessera.io/gpu", "1"}, {"cpu", "1"}}}};
  auto p = PendingPodFrom(*testing::Decoded(pod), "n1");
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(AsksFor(*p, "main", "tessera.io/gpu"));
  EXPECT_FALSE(AsksFor(*p, "main", "aliyun.com/gpu-mem"));
  EXPECT_FALSE(AsksFor(*p, "missing", "tessera.io/gpu"));
}

TEST(NextToSteerTest, OldestFittingContainerOfTheSize) {
  auto pending = Pending(json::array({Pod("old2", "t1", {{"main", {"GPU-a", "GPU-b"}}}),
                                      Pod("mid", "t2", {{"main", {"GPU-c"}}}), Pod("new", "t3", {{"main", {"GPU-a"}}})}));
  auto next = NextToSteer(pending, 1, {"GPU-a", "GPU-a", "GPU-b", "GPU-c"});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(pending[next->pod].Key(), "ns/mid");
  next = NextToSteer(pending, 1, {"GPU-a", "GPU-b"});  // GPU-c is full
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(pending[next->pod].Key(), "ns/new");
  next = NextToSteer(pending, 2, {"GPU-a", "GPU-b"});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(pending[next->pod].Key(), "ns/old2");
  EXPECT_FALSE(NextToSteer(pending, 3, {"GPU-a", "GPU-b", "GPU-c"}).has_value());
}

}  // namespace
}  // namespace tessera::node
