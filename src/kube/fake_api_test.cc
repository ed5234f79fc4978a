// The fake API server of unit tests (fake_api.h): the behaviour the node
// agent and the scheduler's adapters rely on, so a test that passes against
// it means what it says.
#include "kube/fake_api.h"

#include <gtest/gtest.h>

#include <thread>

#include "kube/informer.h"
#include "kube/paths.h"

namespace tessera::kube {
namespace {

using nlohmann::json;

json Pod(const std::string& name, const std::string& node = "", json labels = json::object()) {
  json pod = {{"metadata", {{"name", name}, {"labels", std::move(labels)}}}, {"spec", json::object()}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

std::vector<std::string> Names(const json& list) {
  std::vector<std::string> out;
  for (const json& item : list["items"]) out.push_back(item["metadata"]["name"].get<std::string>());
  return out;
}

TEST(FakeApiTest, CreateGetAndListWithSelectors) {
  FakeApi api;
  auto a = api.Create(PodsPath("ns"), Pod("a", "n1", {{"app", "x"}}));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)["metadata"]["namespace"], "ns");
  EXPECT_EQ((*a)["metadata"]["resourceVersion"], "1");
  EXPECT_EQ((*a)["metadata"]["uid"].get<std::string>().size(), 36u) << "shaped as a pod uid";
  ASSERT_TRUE(api.Create(PodsPath("ns"), Pod("b", "n2")).ok());
  ASSERT_TRUE(api.Create(PodsPath("other"), Pod("c")).ok());

  auto dup = api.Create(PodsPath("ns"), Pod("a"));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("POST /api/v1/namespaces/ns/pods: 409 AlreadyExists"), std::string::npos)
      << dup.status().message();

  auto got = api.Get(PodPath("ns", "b"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["spec"]["nodeName"], "n2");
  auto missing = api.Get(PodPath("ns", "zz"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "GET /api/v1/namespaces/ns/pods/zz: 404 NotFound: pods \"zz\" not found");

  auto all = api.List(PodsPath(""));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Names(*all), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ((*all)["resourceVersion"], "3");
  EXPECT_EQ(Names(*api.List(PodsPath("ns"))), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Names(*api.List(PodsPath(""), "", "spec.nodeName=n1")), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Names(*api.List(PodsPath(""), "", "spec.nodeName=")), (std::vector<std::string>{"c"}));
  EXPECT_EQ(Names(*api.List(PodsPath(""), "", "spec.nodeName!=n1,metadata.namespace==ns")),
            (std::vector<std::string>{"b"}));
  EXPECT_EQ(Names(*api.List(PodsPath(""), "app=x")), (std::vector<std::string>{"a"}));
  EXPECT_EQ(Names(*api.List(PodsPath(""), "!app")), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(api.List(PodsPath(""), "app in (x)").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api.CountCalls("LIST"), 8);
}

TEST(FakeApiTest, GenerateNameAndClusterScopedObjects) {
  FakeApi api;
  auto ev = api.Create("/api/v1/namespaces/ns/events", {{"metadata", {{"generateName", "p."}}}, {"reason", "R"}});
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ((*ev)["metadata"]["name"].get<std::string>().rfind("p.", 0), 0u);
  auto node = api.Upsert("/api/v1/nodes", {{"metadata", {{"name", "n1"}}}});
  ASSERT_TRUE(node.ok());
  EXPECT_FALSE((*node)["metadata"].contains("namespace"));
  EXPECT_TRUE(api.Get(NodePath("n1")).ok());
  EXPECT_EQ(Names(*api.List("/api/v1/nodes")), (std::vector<std::string>{"n1"}));
  EXPECT_EQ(api.Create(PodsPath("ns"), {{"metadata", {{"name", "x"}, {"namespace", "elsewhere"}}}}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(FakeApiTest, MergePatchWithResourceVersionAndUidPreconditions) {
  FakeApi api;
  json pod = *api.Create(PodsPath("ns"), Pod("a"));
  const std::string rv = pod["metadata"]["resourceVersion"];
  const std::string uid = pod["metadata"]["uid"];

  // A patch at the version read applies, and moves the version on.
  auto patched = api.Patch(PodPath("ns", "a"), PatchType::kMerge,
                           {{"metadata", {{"resourceVersion", rv}, {"annotations", {{"k", "v"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["metadata"]["annotations"]["k"], "v");
  EXPECT_NE((*patched)["metadata"]["resourceVersion"], rv);

  // The same version again lost the race: 409, nothing changed.
  auto stale = api.Patch(PodPath("ns", "a"), PatchType::kMerge,
                         {{"metadata", {{"resourceVersion", rv}, {"annotations", {{"k", "w"}}}}}});
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.status().message().find("409 Conflict: Operation cannot be fulfilled on pods \"a\": the object has "
                                          "been modified"),
            std::string::npos)
      << stale.status().message();
  EXPECT_EQ((*api.Peek(PodPath("ns", "a")))["metadata"]["annotations"]["k"], "v");

  // A uid precondition: the pod of that name was replaced.
  EXPECT_EQ(api.Patch(PodPath("ns", "a"), PatchType::kMerge, {{"metadata", {{"uid", "other"}}}}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(api.Patch(PodPath("ns", "a"), PatchType::kMerge, {{"metadata", {{"uid", uid}}}}).ok());

  // null deletes (RFC 7386); identity cannot be patched away.
  auto cleared = api.Patch(PodPath("ns", "a"), PatchType::kMerge,
                           {{"metadata", {{"annotations", {{"k", nullptr}}}, {"name", "b"}}}});
  ASSERT_TRUE(cleared.ok());
  EXPECT_FALSE((*cleared)["metadata"]["annotations"].contains("k"));
  EXPECT_EQ((*cleared)["metadata"]["name"], "a");
  EXPECT_EQ((*cleared)["metadata"]["uid"], uid);

  EXPECT_EQ(api.Patch(PodPath("ns", "zz"), PatchType::kMerge, json::object()).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(api.Patch(PodPath("ns", "a"), PatchType::kJson, json::array()).status().code(),
            StatusCode::kUnimplemented);
}

TEST(FakeApiTest, BindOnceAndEvict) {
  FakeApi api;
  const std::string uid = (*api.Create(PodsPath("ns"), Pod("a")))["metadata"]["uid"];
  EXPECT_EQ(api.Bind("ns", "a", "wrong-uid", "n1").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(api.Bind("ns", "a", uid, "n1", {{"tessera.io/assignment", "x"}}).ok());
  json pod = *api.Peek(PodPath("ns", "a"));
  EXPECT_EQ(pod["spec"]["nodeName"], "n1");
  EXPECT_EQ(pod["metadata"]["annotations"]["tessera.io/assignment"], "x");
  Status again = api.Bind("ns", "a", uid, "n2");
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("already assigned to node \"n1\""), std::string::npos) << again.message();
  EXPECT_EQ(api.Bind("ns", "zz", "", "n1").code(), StatusCode::kNotFound);

  EXPECT_TRUE(api.Evict("ns", "a", uid, /*dry_run=*/true).ok());
  EXPECT_TRUE(api.Peek(PodPath("ns", "a")).has_value());
  EXPECT_EQ(api.Evict("ns", "a", "wrong-uid").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(api.Evict("ns", "a", uid).ok());
  EXPECT_FALSE(api.Peek(PodPath("ns", "a")).has_value());
  EXPECT_EQ(api.Evict("ns", "a").code(), StatusCode::kNotFound);
}

TEST(FakeApiTest, HookFailsACallOrWritesFirst) {
  FakeApi api;
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("a")).ok());
  api.SetHook([](const FakeApi::Call& call) {
    return call.verb == "LIST" ? Status(StatusCode::kUnavailable, "API server away") : Status::Ok();
  });
  EXPECT_EQ(api.List(PodsPath("")).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(api.Get(PodPath("ns", "a")).ok());
  // Another writer wins the race between a read and a guarded PATCH.
  const std::string rv = (*api.Get(PodPath("ns", "a")))["metadata"]["resourceVersion"];
  api.SetHook([&api](const FakeApi::Call& call) {
    if (call.verb == "PATCH") (void)api.Upsert(PodsPath("ns"), Pod("a", "", {{"changed", "yes"}}));
    return Status::Ok();
  });
  EXPECT_EQ(api.Patch(PodPath("ns", "a"), PatchType::kMerge, {{"metadata", {{"resourceVersion", rv}}}})
                .status()
                .code(),
            StatusCode::kFailedPrecondition);
  const std::vector<FakeApi::Call> calls = api.Calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].verb, "PATCH");
  EXPECT_EQ(calls[3].body["metadata"]["resourceVersion"], rv);
}

// Watches replay from their version, follow writes, see objects enter and
// leave their selector, and stop on request.
TEST(FakeApiTest, WatchReplaysAndFollowsThroughSelectors) {
  FakeApi api;
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("early", "n1")).ok());  // rv 1
  std::vector<std::pair<std::string, std::string>> seen;  // type, name
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    Status st = api.Watch(AppendQuery(PodsPath(""), "fieldSelector", "spec.nodeName=n1"), "1",
                          [&](const WatchEvent& e) {
                            seen.emplace_back(e.type, e.object["metadata"]["name"].get<std::string>());
                            return seen.size() < 4;  // ends the watch at the 4th
                          },
                          &stop, 10);
    EXPECT_TRUE(st.ok()) << st.ToString();
  });
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("p", "n2")).ok());  // elsewhere: not seen
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("q")).ok());
  ASSERT_TRUE(api.Bind("ns", "q", "", "n1").ok());                      // enters: ADDED
  ASSERT_TRUE(api.Patch(PodPath("ns", "q"), PatchType::kMerge, {{"metadata", {{"labels", {{"a", "b"}}}}}}).ok());
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("early", "n9")).ok());     // leaves: DELETED
  ASSERT_TRUE(api.Remove(PodPath("ns", "q")).ok());                      // gone: DELETED
  watcher.join();
  const std::vector<std::pair<std::string, std::string>> want = {
      {"ADDED", "q"}, {"MODIFIED", "q"}, {"DELETED", "early"}, {"DELETED", "q"}};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(api.OpenWatches(), 0);

  // The stop flag ends a watch with nothing to deliver.
  std::thread idle([&] { EXPECT_TRUE(api.Watch(PodsPath(""), "", [](const WatchEvent&) { return true; }, &stop).ok()); });
  while (api.OpenWatches() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  idle.join();
}

TEST(FakeApiTest, AnExpiredHistoryEndsWatchesBehindIt) {
  FakeApi api;
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("a")).ok());  // rv 1
  api.HoldWatches(true);
  std::atomic<int> events{0};
  Status result;
  std::thread watcher([&] {
    result = api.Watch(PodsPath(""), "1", [&](const WatchEvent&) { return ++events > 0; }, nullptr, 10);
  });
  while (api.OpenWatches() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(api.Remove(PodPath("ns", "a")).ok());  // held: not delivered
  api.ExpireWatches();
  watcher.join();
  EXPECT_EQ(events, 0);
  EXPECT_EQ(result.code(), StatusCode::kOutOfRange) << result.ToString();
  EXPECT_EQ(api.Watch(PodsPath(""), "1", [](const WatchEvent&) { return true; }, nullptr, 0).code(),
            StatusCode::kOutOfRange);
  EXPECT_TRUE(api.Watch(PodsPath(""), api.ResourceVersion(), [](const WatchEvent&) { return true; }, nullptr, 0).ok());
  api.HoldWatches(false);
}

// The informer, run against the fake, converges through a watch and, after
// missing events, through a relist.
TEST(FakeApiTest, AnInformerFollowsTheFake) {
  FakeApi api;
  ASSERT_TRUE(api.Upsert(PodsPath("ns"), Pod("a", "n1")).ok());
  InformerOptions options;
  options.field_selector = "spec.nodeName=n1";
  options.backoff_base = std::chrono::milliseconds(1);
  Informer informer(api, PodsPath(""), options);
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(5)));
  json b = *api.Upsert(PodsPath("ns"), Pod("b", "n1"));
  ASSERT_TRUE(informer.WaitForResourceVersion(b["metadata"]["resourceVersion"], std::chrono::seconds(5)));
  EXPECT_TRUE(informer.Get("ns/b").has_value());

  api.HoldWatches(true);
  ASSERT_TRUE(api.Remove(PodPath("ns", "a")).ok());
  api.ExpireWatches();
  api.HoldWatches(false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (informer.ListCount() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(informer.ListCount(), 2);
  EXPECT_FALSE(informer.Get("ns/a").has_value());
  informer.Stop();
}

// What the informer stores and hands to its handlers, from a list or a
// watch: the objects without metadata.managedFields, unless asked to keep it.
TEST(FakeApiTest, AnInformerDropsManagedFieldsUnlessAskedToKeepThem) {
  auto with_fields = [](const std::string& name) {
    json pod = Pod(name, "n1");
    pod["metadata"]["managedFields"] = json::array({{{"manager", "test"}, {"operation", "Update"}}});
    return pod;
  };
  for (const bool keep : {false, true}) {
    FakeApi api;
    ASSERT_TRUE(api.Upsert(PodsPath("ns"), with_fields("listed")).ok());
    InformerOptions options;
    options.keep_managed_fields = keep;
    Informer informer(api, PodsPath(""), options);
    std::vector<bool> handed;  // whether each on_add / on_update object had the field
    ASSERT_TRUE(informer
                    .AddHandlers({.on_add = [&](const json& p) { handed.push_back(p["metadata"].contains("managedFields")); },
                                  .on_update = [&](const json&, const json& p) {
                                    handed.push_back(p["metadata"].contains("managedFields"));
                                  }})
                    .ok());
    ASSERT_TRUE(informer.Start().ok());
    ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(5)));
    json w = *api.Upsert(PodsPath("ns"), with_fields("watched"));
    ASSERT_TRUE(informer.WaitForResourceVersion(w["metadata"]["resourceVersion"], std::chrono::seconds(5)));
    informer.Stop();
    for (const char* key : {"ns/listed", "ns/watched"}) {
      auto got = informer.Get(key);
      ASSERT_TRUE(got.has_value()) << key;
      EXPECT_EQ((*got)["metadata"].contains("managedFields"), keep) << key;
      EXPECT_EQ((*got)["metadata"]["name"], std::string(key).substr(3));
    }
    ASSERT_EQ(handed.size(), 2u);
    EXPECT_EQ(handed[0], keep);
    EXPECT_EQ(handed[1], keep);
  }
}

}  // namespace
}  // namespace tessera::kube
