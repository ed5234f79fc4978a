#include "scheduler/cluster_state.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <thread>

#include "core/codec.h"
#include "core/random.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BoundPodJson;
using testing::Container;
using testing::GpuUuid;
using testing::NodeJson;
using testing::PodJson;

using testing::QuietLogger;

ClusterStateOptions Options() { return testing::QuietStateOptions(); }

// One container "main" with one share on GPU `gpu` of `node`.
core::Assignment Share(const std::string& node, int gpu, int64_t mem, int64_t core_milli) {
  return {node, {{"main", {{gpu, GpuUuid(node, gpu), mem, core_milli}}}}};
}

json Bound(const std::string& name, const std::string& node, int gpu, int64_t mem, int percent) {
  return BoundPodJson(PodJson("ns", name, {{"main", 1, mem, percent}}), Share(node, gpu, mem, percent * 10));
}

const GpuSummary& Gpu(const StateSummary& s, const std::string& node, int index) {
  for (const auto& g : s.gpu_use)
    if (g.node == node && g.index == index) return g;
  static GpuSummary none;
  ADD_FAILURE() << "no GPU " << node << "/" << index;
  return none;
}

size_t HeldCount(const ClusterState& state) {
  return state.Read([](const ClusterView& v) { return v.ledger().pod_count(); });
}

TEST(ClusterStateTest, NodesWithAndWithoutInventory) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("gpu1", 2, "A100", 40960));
  json plain = NodeJson("cpu1", 0, "", 0);
  plain["metadata"]["annotations"] = json::object();
  state.UpsertNode(plain);
  json broken = NodeJson("bad1", 1, "T4", 15360);
  broken["metadata"]["annotations"]["tessera.io/gpu-inventory"] = "{\"v\":1,\"gpus\":[{\"index\":-1}]}";
  state.UpsertNode(broken);

  state.Read([](const ClusterView& v) {
    const std::string* why = nullptr;
    EXPECT_EQ(v.KindOf("gpu1"), ClusterView::NodeKind::kGpu);
    EXPECT_EQ(v.KindOf("cpu1", &why), ClusterView::NodeKind::kNotGpu);
    EXPECT_EQ(*why, "not a GPU node (no tessera.io/gpu-inventory annotation)");
    EXPECT_EQ(v.KindOf("bad1", &why), ClusterView::NodeKind::kNotGpu);
    EXPECT_NE(why->find("not a GPU node: tessera.io/gpu-inventory: gpus[0].index"), std::string::npos) << *why;
    EXPECT_EQ(v.KindOf("nope"), ClusterView::NodeKind::kUnknown);
    EXPECT_EQ(v.ledger().nodes().size(), 1u);
    EXPECT_EQ(v.Models().at("A100"), 40960);
  });
  StateSummary s = state.Summary();
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.gpu_nodes, 1);
  EXPECT_EQ(s.gpus, 2);
}

TEST(ClusterStateTest, HeartbeatsDoNotTouchTheLedger) {
  ClusterState state(Options());
  json node = NodeJson("n1", 1, "T4", 15360);
  state.UpsertNode(node);
  const uint64_t v1 = state.Read([](const ClusterView& v) { return v.ledger().FindNode("n1")->version; });
  node["status"]["conditions"][0]["lastHeartbeatTime"] = "2025-01-01T00:00:00Z";
  node["metadata"]["resourceVersion"] = "42";
  state.UpsertNode(node);
  EXPECT_EQ(v1, state.Read([](const ClusterView& v) { return v.ledger().FindNode("n1")->version; }));
}

// Room may appear when a share is released or when a GPU node is added or
// changed (its slots registered, say): freed_count moves, and main wakes the
// pods turned away just before. A heartbeat, a node that is not a GPU node
// and a pod bound move nothing.
TEST(ClusterStateTest, RoomAppearsWithReleasesAndGpuNodeChangesOnly) {
  ClusterState state(Options());
  uint64_t seen = state.freed_count();
  auto moved = [&] {
    const uint64_t now = state.freed_count();
    const bool changed = now != seen;
    seen = now;
    return changed;
  };
  json node = NodeJson("n1", 1, "T4", 15360);
  node["status"]["allocatable"]["tessera.io/gpu"] = "0";
  state.UpsertNode(node);
  EXPECT_TRUE(moved()) << "a GPU node joined";
  node["status"]["conditions"][0]["lastHeartbeatTime"] = "2025-01-01T00:00:00Z";
  state.UpsertNode(node);
  EXPECT_FALSE(moved()) << "a heartbeat";
  node["status"]["allocatable"]["tessera.io/gpu"] = "8";
  state.UpsertNode(node);
  EXPECT_TRUE(moved()) << "its slots registered";
  json cpu = NodeJson("cpu1", 0, "", 0);
  cpu["metadata"]["annotations"] = json::object();
  state.UpsertNode(cpu);
  EXPECT_FALSE(moved()) << "not a GPU node";
  state.UpsertPod(Bound("a", "n1", 0, 4096, 20));
  EXPECT_FALSE(moved()) << "a pod bound";
  state.DeletePod(Bound("a", "n1", 0, 4096, 20));
  EXPECT_TRUE(moved()) << "its share released";
}

TEST(ClusterStateTest, BoundPodsHoldAndTerminalOrDeletedPodsRelease) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  state.UpsertPod(Bound("a", "n1", 0, 8192, 30));
  state.UpsertPod(Bound("b", "n1", 0, 4096, 20));
  StateSummary s = state.Snapshot();
  EXPECT_EQ(s.pods_held, 2);
  EXPECT_EQ(s.pods_assumed, 0);
  EXPECT_EQ(Gpu(s, "n1", 0).mem_used_mib, 12288);
  EXPECT_EQ(Gpu(s, "n1", 0).core_used_milli, 500);
  EXPECT_EQ(Gpu(s, "n1", 0).sharers, 2);
  EXPECT_EQ(Gpu(s, "n1", 1).sharers, 0);
  EXPECT_TRUE(state.Read([](const ClusterView& v) { return v.ledger().StateOf("ns/a").value(); }) ==
              core::HoldState::kConfirmed);

  // Status-only updates change nothing; Succeeded releases; delete releases.
  json a = Bound("a", "n1", 0, 8192, 30);
  a["status"]["podIP"] = "10.0.0.1";
  state.UpsertPod(a);
  EXPECT_EQ(HeldCount(state), 2u);
  state.UpsertPod(Bound("a", "n1", 0, 8192, 30));
  json done = BoundPodJson(PodJson("ns", "a", {{"main", 1, 8192, 30}}), Share("n1", 0, 8192, 300), "Succeeded");
  state.UpsertPod(done);
  EXPECT_EQ(HeldCount(state), 1u);
  state.DeletePod(Bound("b", "n1", 0, 4096, 20));
  EXPECT_EQ(HeldCount(state), 0u);
  EXPECT_EQ(Gpu(state.Snapshot(), "n1", 0).mem_used_mib, 0);
}

TEST(ClusterStateTest, PendingPodsAreKeptForBind) {
  ClusterState state(Options());
  state.UpsertPod(PodJson("ns", "good", {{"main", 1, 8192, 30}}));
  state.UpsertPod(PodJson("ns", "bad", {{"main", 1, 8192, 150}}));
  state.UpsertPod(PodJson("ns", "cpu-only", {{"main", 0, 0, 0}}));
  auto good = state.PendingRequest("ns/good", "uid-ns-good");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->request.containers[0].mem_mib_per_gpu, 8192);
  EXPECT_EQ(good->slots.resource, "tessera.io/gpu");
  EXPECT_EQ(good->slots.count, 1);
  EXPECT_EQ(state.PendingRequest("ns/good", "other-uid").status().code(), StatusCode::kNotFound);
  auto bad = state.PendingRequest("ns/bad", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("150 is over 100"), std::string::npos);
  EXPECT_EQ(state.PendingRequest("ns/cpu-only", "").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(state.Summary().pods_pending, 2);
  state.DeletePod(PodJson("ns", "good", {}));
  EXPECT_EQ(state.PendingRequest("ns/good", "").status().code(), StatusCode::kNotFound);
}

TEST(ClusterStateTest, PodsWaitForTheirNode) {
  ClusterState state(Options());
  state.UpsertPod(Bound("early", "n9", 1, 1024, 10));
  EXPECT_EQ(state.Summary().pods_waiting, 1);
  ASSERT_EQ(state.Problems().size(), 1u);
  EXPECT_EQ(state.Problems()[0], "ns/early: waiting for node n9 (not seen yet)");
  json plain = NodeJson("n9", 2, "T4", 15360);
  json annotations = plain["metadata"]["annotations"];
  plain["metadata"]["annotations"] = json::object();
  state.UpsertNode(plain);  // not a GPU node yet
  EXPECT_EQ(state.Summary().pods_waiting, 1);
  EXPECT_NE(state.Problems()[0].find("to be a GPU node"), std::string::npos);
  plain["metadata"]["annotations"] = annotations;
  state.UpsertNode(plain);
  StateSummary s = state.Snapshot();
  EXPECT_EQ(s.pods_waiting, 0);
  EXPECT_EQ(s.pods_held, 1);
  EXPECT_EQ(Gpu(s, "n9", 1).mem_used_mib, 1024);

  // Deleting the node parks the pod again; it comes back with the node.
  state.DeleteNode("n9");
  EXPECT_EQ(state.Summary().pods_waiting, 1);
  EXPECT_EQ(state.Summary().gpu_nodes, 0);
  state.UpsertNode(plain);
  EXPECT_EQ(state.Summary().pods_held, 1);
}

TEST(ClusterStateTest, ConflictsAreCountedAndResolvedWhenSpaceFrees) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 1, "T4", 15360));
  state.UpsertPod(Bound("first", "n1", 0, 8192, 80));
  state.UpsertPod(Bound("second", "n1", 0, 8192, 50));  // placed by someone else on the same GPU
  EXPECT_EQ(state.conflict_count(), 1);
  EXPECT_EQ(state.Summary().conflicts_total, 1);
  ASSERT_EQ(state.Problems().size(), 1u);
  EXPECT_NE(state.Problems()[0].find("ns/second:"), std::string::npos);
  EXPECT_EQ(Gpu(state.Snapshot(), "n1", 0).core_used_milli, 800);  // never over-committed

  state.DeletePod(Bound("first", "n1", 0, 8192, 80));
  EXPECT_EQ(state.conflict_count(), 0);
  EXPECT_EQ(Gpu(state.Snapshot(), "n1", 0).core_used_milli, 500);
  EXPECT_EQ(state.Summary().conflicts_total, 1);
}

TEST(ClusterStateTest, UnusableAnnotationsAreConflictsNotSilence) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 1, "T4", 15360));
  json pod = Bound("garbled", "n1", 0, 1024, 10);
  pod["metadata"]["annotations"]["tessera.io/assignment"] = "{\"v\":9}";
  state.UpsertPod(pod);
  json elsewhere = Bound("elsewhere", "n1", 0, 1024, 10);
  elsewhere["spec"]["nodeName"] = "n2";
  state.UpsertPod(elsewhere);
  EXPECT_EQ(state.conflict_count(), 2);
  EXPECT_EQ(HeldCount(state), 0u);
  state.DeletePod(pod);
  state.DeletePod(elsewhere);
  EXPECT_EQ(state.conflict_count(), 0);
  EXPECT_TRUE(state.Problems().empty());
}

TEST(ClusterStateTest, ShrinkingNodeReplacesItsPods) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  state.UpsertPod(Bound("a", "n1", 0, 30000, 10));
  state.UpsertPod(Bound("b", "n1", 1, 1000, 10));
  state.UpsertNode(NodeJson("n1", 2, "A100", 20480));  // memory reported lower
  EXPECT_EQ(state.conflict_count(), 1);
  EXPECT_EQ(HeldCount(state), 1u);
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960));  // GPU 1 gone, GPU 0 back to 40 GiB
  EXPECT_EQ(HeldCount(state), 1u);                     // a holds GPU 0; b's GPU is gone
  EXPECT_EQ(state.conflict_count(), 1);
}

TEST(ClusterStateTest, AssumedPodsAreConfirmedByTheWatchOrExpire) {
  ClusterStateOptions o = Options();
  o.assume_ttl = std::chrono::seconds(60);
  ClusterState state(o);
  state.UpsertNode(NodeJson("n1", 1, "T4", 15360));
  auto req = core::PodRequestFromJson(PodJson("ns", "p", {{"main", 1, 4096, 25}}), core::ResourceNames{});
  ASSERT_TRUE(req.ok());
  const Clock::time_point t0{};
  auto pick = [&](const core::NodeState& node) -> Result<core::Assignment> { return Share(node.info.name, 0, 4096, 250); };
  auto a = testing::PickAndAssume(state, *req, "uid-ns-p", "n1", pick, t0);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(state.Summary().pods_assumed, 1);
  EXPECT_EQ(testing::PickAndAssume(state, *req, "uid-ns-p", "n1", pick, t0).status().code(),
            StatusCode::kAlreadyExists);

  // The watch still shows the pod unbound (an event from before the bind): kept.
  state.UpsertPod(PodJson("ns", "p", {{"main", 1, 4096, 25}}));
  EXPECT_EQ(state.Summary().pods_assumed, 1);
  EXPECT_EQ(state.ExpireAssumed(t0 + std::chrono::seconds(59)), 0);
  // Bound with the annotation: confirmed, and no longer subject to expiry.
  state.UpsertPod(BoundPodJson(PodJson("ns", "p", {{"main", 1, 4096, 25}}), *a));
  EXPECT_EQ(state.Summary().pods_assumed, 0);
  EXPECT_EQ(state.ExpireAssumed(t0 + std::chrono::hours(1)), 0);
  EXPECT_EQ(state.ForgetAssumed("ns/p").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(HeldCount(state), 1u);

  // Another assumption that the watch never confirms expires after the TTL.
  auto req2 = core::PodRequestFromJson(PodJson("ns", "q", {{"main", 1, 4096, 25}}), core::ResourceNames{});
  ASSERT_TRUE(testing::PickAndAssume(state, *req2, "uid-ns-q", "n1", pick, t0).ok());
  EXPECT_EQ(state.ExpireAssumed(t0 + std::chrono::seconds(59)), 0);
  EXPECT_EQ(state.ExpireAssumed(t0 + std::chrono::seconds(60)), 1);
  EXPECT_EQ(state.Summary().expired_total, 1);
  EXPECT_EQ(HeldCount(state), 1u);
  EXPECT_EQ(state.ForgetAssumed("ns/q").code(), StatusCode::kNotFound);
}

// For the admission tests: a node whose agent marked it, a 4096 MiB / 25 %
// request, and a pick of that share on GPU `gpu`.
json AgentNodeJson(const std::string& name) {
  json node = NodeJson(name, 2, "A100", 40960);
  node["metadata"]["annotations"][std::string(core::kNodeAgentAnnotation)] = "tessera-node/v1";
  return node;
}
core::PodRequest QuarterRequest(const std::string& name) {
  return core::PodRequestFromJson(PodJson("ns", name, {{"main", 1, 4096, 25}}), core::ResourceNames{}).value();
}
testing::PickFn QuarterOn(int gpu) {
  return [gpu](const core::NodeState& n) -> Result<core::Assignment> { return Share(n.info.name, gpu, 4096, 250); };
}

TEST(ClusterStateTest, NodesWithAnAgentAdmitOneBoundPodAtATime) {
  ClusterStateOptions o = Options();
  o.admission_wait = std::chrono::milliseconds(100);
  ClusterState state(o);
  state.UpsertNode(AgentNodeJson("n1"));
  state.UpsertNode(NodeJson("plain", 2, "A100", 40960));  // no agent: nothing waits there
  auto request = QuarterRequest;
  auto on = QuarterOn;
  auto soon = [&] { return Clock::now() + o.admission_wait; };
  auto a = testing::PickAndAssume(state, request("a"), "uid-ns-a", "n1", on(0), {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(state.ClaimAdmissionTurn("ns/a", soon()).ok());
  // a is bound but not admitted: b's share is held at once, but its Binding must wait.
  auto b = testing::PickAndAssume(state, request("b"), "uid-ns-b", "n1", on(1), {});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Status wait = state.ClaimAdmissionTurn("ns/b", soon());
  ASSERT_EQ(wait.code(), StatusCode::kUnavailable);
  EXPECT_NE(wait.message().find("has not admitted pod ns/a"), std::string::npos) << wait.message();
  for (const char* p : {"c", "d"}) {
    ASSERT_TRUE(testing::PickAndAssume(state, request(p), std::string("uid-ns-") + p, "plain", on(0), {}).ok());
    EXPECT_TRUE(state.ClaimAdmissionTurn(std::string("ns/") + p, soon()).ok());
  }
  EXPECT_EQ(state.ClaimAdmissionTurn("ns/nobody", soon()).code(), StatusCode::kNotFound);

  // The watch shows a bound, then allocated by the agent: b's turn comes at once.
  json pod = BoundPodJson(PodJson("ns", "a", {{"main", 1, 4096, 25}}), *a);
  state.UpsertPod(pod);
  std::thread admit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pod["metadata"]["annotations"][std::string(core::kAllocatedAnnotation)] = "main";
    state.UpsertPod(pod);
  });
  EXPECT_TRUE(state.ClaimAdmissionTurn("ns/b", Clock::now() + std::chrono::seconds(10)).ok());
  admit.join();
  // A pod that ends stops blocking too.
  auto e = testing::PickAndAssume(state, request("e"), "uid-ns-e", "n1", on(1), {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(state.ClaimAdmissionTurn("ns/e", soon()).code(), StatusCode::kUnavailable);
  state.DeletePod(BoundPodJson(PodJson("ns", "b", {{"main", 1, 4096, 25}}), *b));
  EXPECT_TRUE(state.ClaimAdmissionTurn("ns/e", soon()).ok());
}

// A node deleted between Bind's booking and its admission turn: the pod is
// parked there, its turn is refused (the Binding is never sent to a node
// that is gone), and forgetting it gives everything back.
TEST(ClusterStateTest, NodeGoneBeforeTheAdmissionTurnRefusesTheTurn) {
  ClusterState state(Options());
  state.UpsertNode(AgentNodeJson("n1"));
  auto a = testing::PickAndAssume(state, QuarterRequest("a"), "uid-ns-a", "n1", QuarterOn(0), {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  state.DeleteNode("n1");
  EXPECT_EQ(state.Summary().pods_waiting, 1);
  Status turn = state.ClaimAdmissionTurn("ns/a", Clock::now() + std::chrono::milliseconds(100));
  ASSERT_EQ(turn.code(), StatusCode::kNotFound) << turn.ToString();
  EXPECT_NE(turn.message().find("waiting for its node"), std::string::npos) << turn.message();
  ASSERT_TRUE(state.ForgetAssumed("ns/a").ok());
  const StateSummary s = state.Summary();
  EXPECT_EQ(s.pods_waiting + s.pods_held + s.pods_assumed, 0) << s.ToString();
  EXPECT_TRUE(state.Problems().empty());
}

// Issue 19: a pod bound to a node whose kubelet never admits it must not
// wedge the node. Past one admission wait the node is reported stalled (the
// extender filters it out); past kAdmissionGiveUpFactor waits the pod no
// longer holds binds to the node back.
TEST(ClusterStateTest, ANodeThatDoesNotAdmitIsSteeredAroundThenNoLongerWaitedFor) {
  ClusterStateOptions o = Options();
  o.admission_wait = std::chrono::milliseconds(20);
  ClusterState state(o);
  state.UpsertNode(AgentNodeJson("n1"));
  auto request = QuarterRequest;
  auto on = QuarterOn;
  auto stall = [&] {
    std::string why;
    state.Read([&](const ClusterView& view) { why = view.AdmissionStall("n1", Clock::now()); });
    return why;
  };
  const Clock::time_point start = Clock::now();
  ASSERT_TRUE(testing::PickAndAssume(state, request("a"), "uid-ns-a", "n1", on(0), {}).ok());
  ASSERT_TRUE(state.ClaimAdmissionTurn("ns/a", Clock::now() + o.admission_wait).ok());
  EXPECT_EQ(stall(), "");  // just bound: admission takes a moment
  std::this_thread::sleep_for(o.admission_wait * 2);
  const std::string why = stall();
  EXPECT_NE(why.find("node n1 has not admitted pod ns/a for "), std::string::npos) << why;
  EXPECT_EQ(why.find('%'), std::string::npos) << why;  // goes into kube-scheduler's Event as written
  // Before giving up, a second pod's bind still waits for a.
  ASSERT_TRUE(testing::PickAndAssume(state, request("b"), "uid-ns-b", "n1", on(1), {}).ok());
  if (Clock::now() - start < o.admission_wait * (kAdmissionGiveUpFactor - 3)) {
    EXPECT_EQ(state.ClaimAdmissionTurn("ns/b", Clock::now() + o.admission_wait).code(), StatusCode::kUnavailable);
  }
  // Past the give-up, a no longer holds the node.
  std::this_thread::sleep_until(start + o.admission_wait * (kAdmissionGiveUpFactor + 1));
  EXPECT_TRUE(state.ClaimAdmissionTurn("ns/b", Clock::now() + o.admission_wait).ok());
  EXPECT_EQ(stall(), "");  // b awaits now, from now
}

TEST(ClusterStateTest, AssumeChecksTheNodeAndThePick) {
  ClusterState state(Options());
  json plain = NodeJson("cpu", 0, "", 0);
  plain["metadata"]["annotations"] = json::object();
  state.UpsertNode(plain);
  state.UpsertNode(NodeJson("n1", 1, "T4", 15360));
  auto req = core::PodRequestFromJson(PodJson("ns", "p", {{"main", 1, 4096, 25}}), core::ResourceNames{});
  auto never = [](const core::NodeState&) -> Result<core::Assignment> { return ResourceExhausted("full"); };
  EXPECT_EQ(testing::PickAndAssume(state, *req, "u", "nope", never, {}).status().code(), StatusCode::kNotFound);
  auto not_gpu = testing::PickAndAssume(state, *req, "u", "cpu", never, {});
  EXPECT_EQ(not_gpu.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(not_gpu.status().message().find("not a GPU node"), std::string::npos);
  EXPECT_EQ(testing::PickAndAssume(state, *req, "u", "n1", never, {}).status().code(),
            StatusCode::kResourceExhausted);
  auto too_big = [](const core::NodeState& n) -> Result<core::Assignment> { return Share(n.info.name, 0, 99999, 250); };
  EXPECT_FALSE(testing::PickAndAssume(state, *req, "u", "n1", too_big, {}).ok());  // does not match the request
  EXPECT_EQ(HeldCount(state), 0u);
  EXPECT_EQ(state.ForgetAssumed("ns/p").code(), StatusCode::kNotFound);
}

// Bind's booking is one call with the node version its choice was made on:
// a node that changed since is refused with UNAVAILABLE and nothing is booked;
// the ledger refuses an assignment that does not fit even with a fresh
// version; a heartbeat does not change the version.
TEST(ClusterStateTest, AssumeRefusesAStaleVersionAndBooksNothing) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  auto version = [&] {
    return state.Read([](const ClusterView& v) { return v.BindTarget("ns/p", "n1").value()->version; });
  };
  const core::PodRequest p = core::PodRequestFromJson(PodJson("ns", "p", {{"main", 1, 20480, 50}}),
                                                      core::ResourceNames{}).value();
  const uint64_t seen = version();
  state.UpsertPod(Bound("other", "n1", 0, 30720, 50));  // the pod watch books GPU 0 meanwhile
  ASSERT_NE(version(), seen);
  const Result<core::Assignment> stale = state.Assume(p, SlotAsk{}, "uid-ns-p", Share("n1", 1, 20480, 500), seen, {});
  ASSERT_EQ(stale.status().code(), StatusCode::kUnavailable) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("pod ns/p: node n1 changed"), std::string::npos) << stale.status().message();
  EXPECT_EQ(HeldCount(state), 1u);  // "other" only
  EXPECT_EQ(state.Summary().pods_assumed, 0);
  EXPECT_EQ(Gpu(state.Snapshot(), "n1", 1).mem_used_mib, 0);
  EXPECT_EQ(state.ForgetAssumed("ns/p").code(), StatusCode::kNotFound);

  // A fresh version does not make an assignment fit: the ledger refuses it.
  const Result<core::Assignment> full = state.Assume(p, SlotAsk{}, "uid-ns-p", Share("n1", 0, 20480, 500), version(), {});
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted) << full.status().ToString();
  EXPECT_EQ(HeldCount(state), 1u);
  // A heartbeat leaves the version alone; the choice made before it is booked.
  const uint64_t before_heartbeat = version();
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  const Result<core::Assignment> ok = state.Assume(p, SlotAsk{}, "uid-ns-p", Share("n1", 1, 20480, 500), before_heartbeat, {});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->node, "n1");
  EXPECT_EQ(Gpu(state.Snapshot(), "n1", 1).mem_used_mib, 20480);
  EXPECT_EQ(state.Summary().pods_assumed, 1);
  // A second booking of the pod is refused before its version is looked at.
  EXPECT_EQ(state.Assume(p, SlotAsk{}, "uid-ns-p", Share("n1", 1, 20480, 500), 0, {}).status().code(),
            StatusCode::kAlreadyExists);
}

TEST(ClusterStateTest, ReplacedPodReleasesTheOldShare) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 1, "T4", 15360));
  state.UpsertPod(Bound("p", "n1", 0, 8192, 80));
  json again = BoundPodJson(PodJson("ns", "p", {{"main", 1, 4096, 50}}, {}, "uid-2"), Share("n1", 0, 4096, 500));
  state.UpsertPod(again);  // same name, new uid (deleted and re-created; the delete was missed)
  EXPECT_EQ(state.conflict_count(), 0);
  EXPECT_EQ(Gpu(state.Snapshot(), "n1", 0).core_used_milli, 500);
  state.DeletePod(Bound("p", "n1", 0, 8192, 80));  // the old uid's delete arrives late: ignored
  EXPECT_EQ(HeldCount(state), 1u);
}

TEST(ClusterStateTest, WholeGpusHoldTheirMemory) {
  ClusterState state(Options());
  std::vector<core::GpuInfo> gpus(2);
  for (int i = 0; i < 2; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = GpuUuid("mixed", i);
    gpus[i].model = "A100";
    gpus[i].memory_mib = i == 0 ? 40960 : 81920;
  }
  state.UpsertNode(NodeJson("mixed", gpus));
  // As the extender writes them now (all of each GPU's memory) and as older
  // assignments did (no memory).
  const core::Assignment full{"mixed", {{"main", {{0, GpuUuid("mixed", 0), 40960, 1000}, {1, GpuUuid("mixed", 1), 81920, 1000}}}}};
  state.UpsertPod(BoundPodJson(PodJson("ns", "full", {{"main", 2, 0, 0}}), full));
  EXPECT_EQ(state.conflict_count(), 0) << ::testing::PrintToString(state.Problems());
  EXPECT_EQ(Gpu(state.Snapshot(), "mixed", 1).mem_used_mib, 81920);
  state.DeletePod(PodJson("ns", "full", {}));
  const core::Assignment old{"mixed", {{"main", {{0, GpuUuid("mixed", 0), 0, 1000}, {1, GpuUuid("mixed", 1), 0, 1000}}}}};
  state.UpsertPod(BoundPodJson(PodJson("ns", "old", {{"main", 2, 0, 0}}), old));
  EXPECT_EQ(state.conflict_count(), 0) << ::testing::PrintToString(state.Problems());
  EXPECT_EQ(HeldCount(state), 1u);
  // Fractions must be equal on every GPU.
  const core::Assignment odd{"mixed", {{"main", {{0, "", 1024, 100}, {1, "", 2048, 100}}}}};
  state.UpsertPod(BoundPodJson(PodJson("ns", "odd", {{"main", 2, 0, 0}}), odd));
  EXPECT_EQ(state.conflict_count(), 1);
}

// Each front end's pods need the slots of their own count resource: HAMi's
// (with that front end on) as Tessera's; gpushare's memory units are
// kube-scheduler's to count. Only the pods holding a resource's slots count
// against it.
TEST(ClusterStateTest, SlotShortageLooksAtTheResourceThePodNames) {
  ClusterStateOptions options = Options();
  options.resources.hami.enabled = true;
  options.resources.gpushare.enabled = true;
  ClusterState state(options);
  json node = NodeJson("n1", 1, "A100", 40960);
  node["status"]["allocatable"]["tessera.io/gpu"] = "8";
  node["status"]["allocatable"]["nvidia.com/gpu"] = "0";
  state.UpsertNode(node);
  auto pod_with = [&](const std::string& name, const json& limits) {
    json pod = PodJson("ns", name, {{"main", 0, 0, 0}});
    pod["spec"]["containers"][0]["resources"]["limits"] = limits;
    auto view = core::DecodePod(pod, options.resources);
    EXPECT_TRUE(view.ok()) << view.status().ToString();
    return *view;
  };
  const core::PodView tessera = pod_with("t", {{"tessera.io/gpu", "1"}, {"tessera.io/gpu-mem", "1024"}});
  const core::PodView hami = pod_with("h", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}});
  const core::PodView gpushare = pod_with("g", {{"aliyun.com/gpu-mem", "2"}});
  auto shortage = [&](const core::PodView& pod) {
    return state.Read([&](const ClusterView& v) {
      const auto& nodes = v.ledger().nodes();
      const auto n1 = std::find_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.info.name == "n1"; });
      return v.SlotShortage(static_cast<size_t>(n1 - nodes.begin()), SlotsAsked(pod, state.options().resources));
    });
  };
  EXPECT_EQ(shortage(tessera), "");
  EXPECT_EQ(shortage(hami),
            "node n1: its kubelet reports 0 nvidia.com/gpu slots allocatable, 0 of them taken, and the pod asks for 1");
  EXPECT_EQ(shortage(gpushare), "");

  node["status"]["allocatable"]["nvidia.com/gpu"] = "1";
  state.UpsertNode(node);
  EXPECT_EQ(shortage(hami), "");
  // A Tessera pod holds a tessera.io/gpu slot, not one of HAMi's.
  state.UpsertPod(Bound("held", "n1", 0, 1024, 10));
  EXPECT_EQ(shortage(hami), "");
  EXPECT_EQ(shortage(tessera), "");
  // A HAMi pod holds one of HAMi's.
  json hami_pod = PodJson("ns", "h-held", {{"main", 0, 0, 0}});
  hami_pod["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1024"}};
  state.UpsertPod(BoundPodJson(hami_pod, Share("n1", 0, 1024, 100)));
  EXPECT_EQ(HeldCount(state), 2u);
  EXPECT_EQ(shortage(hami),
            "node n1: its kubelet reports 1 nvidia.com/gpu slots allocatable, 1 of them taken, and the pod asks for 1");
  EXPECT_EQ(shortage(hami).find("inventory"), std::string::npos) << "no slots listed per GPU: nothing to compare";
  EXPECT_EQ(shortage(tessera), "");
  // The preemption planner sees the same counts, and which pod holds which slot.
  auto planner_view = [&](const core::PodView& pod) {
    return state.Read([&](const ClusterView& v) {
      const auto& nodes = v.ledger().nodes();
      const auto n1 = std::find_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.info.name == "n1"; });
      return v.PreemptionNodeOf(static_cast<size_t>(n1 - nodes.begin()), SlotsAsked(pod, state.options().resources),
                                /*also_taken=*/2);
    });
  };
  core::PreemptionNode pn = planner_view(hami);
  EXPECT_EQ(pn.slots.allocatable, 1);
  EXPECT_EQ(pn.slots.taken, 3) << "the HAMi pod's slot and the 2 reserved beyond the ledger";
  EXPECT_EQ(pn.slots.asked, 1);
  ASSERT_EQ(pn.pods.size(), 2u);
  for (const auto& p : pn.pods) EXPECT_EQ(p.slots, p.key == "ns/h-held" ? 1 : 0) << p.key;
  pn = planner_view(tessera);
  EXPECT_EQ(pn.slots.allocatable, 8);
  EXPECT_EQ(pn.slots.taken, 3);
  for (const auto& p : pn.pods) EXPECT_EQ(p.slots, p.key == "ns/held" ? 1 : 0) << p.key;
  EXPECT_EQ(planner_view(gpushare).slots.allocatable, -1) << "no slots asked: no slot check";
  // Released, the slot is free again.
  state.DeletePod(hami_pod);
  EXPECT_EQ(shortage(hami), "");
}

TEST(ClusterStateTest, MalformedEventsAreIgnored) {
  ClusterState state(Options());
  for (const json& j : {json(nullptr), json(3), json::object(), json{{"metadata", {{"name", 5}}}}}) {
    state.UpsertNode(j);
    state.UpsertPod(j);
    state.DeletePod(j);
  }
  state.DeleteNode("never-seen");
  EXPECT_EQ(state.Summary().nodes, 0);
}

// ---- property: random event sequences never over-commit, lose or leak ----

struct World {
  std::map<std::string, json> nodes;                   // live node objects
  std::map<std::string, json> pods;                    // live bound pods with assignments
  std::map<std::string, core::Assignment> assumed;     // bound by the extender, not yet seen
  std::map<std::string, json> hosts;                   // live bound pods without GPUs
};

// Checks the ledger against the live pods: no GPU over-committed, usage equal
// to the shares of the pods the state says it holds, every live pod accounted
// for, and each node's CPU the sum of what the pods booked there ask.
void CheckAgainst(const ClusterState& state, const World& world) {
  const StateSummary s = state.Snapshot();
  size_t hosts = 0;
  state.Read([&](const ClusterView& v) {
    for (const core::NodeState& n : v.ledger().nodes()) {
      int64_t cpu = 0;
      for (const std::string& key : v.ledger().PodsOn(n.info.name)) {
        if (IsHostLedgerKey(key)) {
          EXPECT_TRUE(world.hosts.contains(key.substr(kHostLedgerPrefix.size()))) << key;
        }
        cpu += 1000;  // every pod here asks for one CPU
      }
      EXPECT_EQ(n.cpu_used_milli, cpu) << n.info.name;
      EXPECT_GE(n.CpuFree(), 0) << n.info.name;
    }
  });
  for (const auto& g : s.gpu_use) {
    EXPECT_LE(g.core_used_milli, 1000) << g.node << "/" << g.index;
    EXPECT_LE(g.mem_used_mib, g.mem_total_mib) << g.node << "/" << g.index;
    EXPECT_GE(g.core_used_milli, 0);
  }
  EXPECT_EQ(static_cast<size_t>(s.pods_held + s.pods_waiting + s.pods_conflict),
            world.pods.size() + world.assumed.size());
  EXPECT_EQ(static_cast<size_t>(s.pods_assumed), world.assumed.size());
  std::map<std::pair<std::string, int>, int64_t> core_by_gpu;
  for (const auto& req : state.Read([](const ClusterView& v) { return v.HeldRequests(); })) {
    if (IsHostLedgerKey(req.key)) {
      ++hosts;
      continue;
    }
    Result<core::Assignment> a = NotFound(req.key);
    if (auto it = world.assumed.find(req.key); it != world.assumed.end()) {
      a = it->second;
    } else {
      const json& pod = world.pods.at(req.key);
      a = core::DecodeAssignment(pod["metadata"]["annotations"]["tessera.io/assignment"].get<std::string>());
    }
    ASSERT_TRUE(a.ok());
    for (const auto& c : a->containers)
      for (const auto& g : c.gpus) core_by_gpu[{a->node, g.index}] += g.core_milli;
  }
  for (const auto& g : s.gpu_use) EXPECT_EQ(g.core_used_milli, (core_by_gpu[{g.node, g.index}])) << g.node << g.index;
  EXPECT_EQ(hosts, world.hosts.size());
}

TEST(ClusterStateTest, RandomEventsNeverOvercommitOrLosePods) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    core::Rng rng(seed);
    ClusterState state(Options());
    World world;
    const std::vector<std::string> names = {"n0", "n1", "n2", "n3"};
    for (int step = 0; step < 400; ++step) {
      const std::string node = names[rng.Below(names.size())];
      const uint64_t what = rng.Below(10);
      if (what == 0) {  // a node (re)appears, maybe with different GPUs
        json n = NodeJson(node, 1 + static_cast<int>(rng.Below(3)), rng.Below(2) ? "A100" : "T4", 16384);
        if (rng.Below(6) == 0) n["metadata"]["annotations"] = json::object();
        world.nodes[node] = n;
        state.UpsertNode(n);
      } else if (what == 1) {
        world.nodes.erase(node);
        state.DeleteNode(node);
      } else if (what == 2) {  // the extender binds a pod, then the watch confirms it, or not
        const uint64_t how = rng.Below(5);
        if (how <= 1) {
          const std::string name = "a" + std::to_string(rng.Below(20));
          if (world.assumed.contains("ns/" + name) || world.pods.contains("ns/" + name)) continue;
          const json pod = PodJson("ns", name, {{"main", 1, 1024, 10 * static_cast<int>(1 + rng.Below(5))}});
          auto req = core::PodRequestFromJson(pod, core::ResourceNames{});
          ASSERT_TRUE(req.ok());
          auto pick = [&](const core::NodeState& n) -> Result<core::Assignment> {
            core::GpuPick gp;
            if (!core::PickGpus(*req, n, core::GpuSelect::kBestFit, nullptr, &gp)) return ResourceExhausted("full");
            return core::MakeAssignment(*req, n, gp);
          };
          auto a = testing::PickAndAssume(state, *req, "uid-ns-" + name, node, pick, Clock::time_point{});
          if (a.ok()) world.assumed[req->key] = *a;
        } else if (!world.assumed.empty()) {
          auto it = world.assumed.begin();
          std::advance(it, static_cast<long>(rng.Below(world.assumed.size())));
          const std::string name = it->first.substr(3);
          if (how == 2) {  // confirmed by the watch
            json pod = PodJson("ns", name, {{"main", 1, it->second.containers[0].gpus[0].mem_mib,
                                             static_cast<int>(it->second.containers[0].gpus[0].core_milli / 10)}});
            pod = BoundPodJson(pod, it->second);
            world.pods[it->first] = pod;
            world.assumed.erase(it);
            state.UpsertPod(pod);
          } else if (how == 3) {  // the bind failed
            EXPECT_TRUE(state.ForgetAssumed(it->first).ok());
            world.assumed.erase(it);
          } else {  // the watch never saw them
            EXPECT_EQ(state.ExpireAssumed(Clock::time_point{} + std::chrono::hours(1)),
                      static_cast<int>(world.assumed.size()));
            world.assumed.clear();
          }
        }
      } else if (what <= 6 && rng.Below(4) == 0) {  // a pod without GPUs appears bound
        const std::string name = "h" + std::to_string(rng.Below(10));
        json pod = PodJson("ns", name, {{"main", 0, 0, 0}});
        pod["spec"]["nodeName"] = node;
        pod["status"]["phase"] = "Running";
        if (world.hosts.contains("ns/" + name)) pod["metadata"]["uid"] = "uid-" + std::to_string(step);
        world.hosts["ns/" + name] = pod;
        state.UpsertPod(pod);
      } else if (what <= 6) {  // a pod appears bound, maybe clashing with others
        const std::string name = "p" + std::to_string(rng.Below(30));
        const int gpu = static_cast<int>(rng.Below(3));
        const int64_t mem = 1024 * static_cast<int64_t>(1 + rng.Below(8));
        const int percent = 10 * static_cast<int>(1 + rng.Below(6));
        json pod = Bound(name, node, gpu, mem, percent);
        if (world.pods.contains("ns/" + name)) pod["metadata"]["uid"] = "uid-" + std::to_string(step);
        world.pods["ns/" + name] = pod;
        state.UpsertPod(pod);
      } else if (!world.pods.empty() || !world.hosts.empty()) {  // a pod ends: deleted or terminal
        auto& from = world.hosts.empty() || (!world.pods.empty() && rng.Below(3) != 0) ? world.pods : world.hosts;
        auto it = from.begin();
        std::advance(it, static_cast<long>(rng.Below(from.size())));
        json pod = it->second;
        from.erase(it);
        if (what == 7) {
          pod["status"]["phase"] = "Failed";
          state.UpsertPod(pod);
        } else {
          state.DeletePod(pod);
        }
      }
      CheckAgainst(state, world);
      if (::testing::Test::HasFailure()) FAIL() << "seed " << seed << " step " << step;
    }
    // A restarted extender rebuilds from the same objects (in the API
    // server's key order); without conflicts the ledger is the same.
    state.ExpireAssumed(Clock::time_point{} + std::chrono::hours(2));
    world.assumed.clear();
    CheckAgainst(state, world);
    ClusterState rebuilt(Options());
    for (const auto& [name, n] : world.nodes) rebuilt.UpsertNode(n);
    for (const auto& [key, p] : world.pods) rebuilt.UpsertPod(p);
    for (const auto& [key, p] : world.hosts) rebuilt.UpsertPod(p);
    CheckAgainst(rebuilt, world);
    if (state.conflict_count() == 0 && rebuilt.conflict_count() == 0) {
      const StateSummary a = state.Snapshot(), b = rebuilt.Snapshot();
      EXPECT_EQ(a.pods_held, b.pods_held);
      EXPECT_EQ(a.host_pods, b.host_pods);
      EXPECT_EQ(a.pods_waiting, b.pods_waiting);
      std::map<std::string, std::tuple<int64_t, int64_t, int>> ua, ub;
      for (const auto& g : a.gpu_use) ua[g.node + "/" + std::to_string(g.index)] = {g.mem_used_mib, g.core_used_milli, g.sharers};
      for (const auto& g : b.gpu_use) ub[g.node + "/" + std::to_string(g.index)] = {g.mem_used_mib, g.core_used_milli, g.sharers};
      EXPECT_EQ(ua, ub) << "seed " << seed;
    }
  }
}

TEST(ClusterStateTest, RebuildFromSamePodsGivesSameLedger) {
  World world;
  for (int n = 0; n < 4; ++n) world.nodes["n" + std::to_string(n)] = NodeJson("n" + std::to_string(n), 4, "A100", 40960);
  core::Rng rng(7);
  std::map<std::pair<int, int>, int> used;  // (node, gpu) -> percent
  for (int i = 0; i < 60; ++i) {
    const int node = static_cast<int>(rng.Below(4)), gpu = static_cast<int>(rng.Below(4));
    const int percent = 10 * static_cast<int>(1 + rng.Below(3));
    if (used[{node, gpu}] + percent > 100) continue;
    used[{node, gpu}] += percent;
    json pod = Bound("p" + std::to_string(i), "n" + std::to_string(node), gpu, 1024, percent);
    world.pods[pod["metadata"]["namespace"].get<std::string>() + "/" + pod["metadata"]["name"].get<std::string>()] = pod;
  }
  // Live: pods arrive before their nodes, in random order.
  ClusterState live(Options());
  std::vector<json> events;
  for (const auto& [k, p] : world.pods) events.push_back(p);
  rng.Shuffle(events);
  for (const auto& p : events) live.UpsertPod(p);
  for (const auto& [k, n] : world.nodes) live.UpsertNode(n);
  ClusterState restarted(Options());
  for (const auto& [k, n] : world.nodes) restarted.UpsertNode(n);
  for (const auto& [k, p] : world.pods) restarted.UpsertPod(p);
  const StateSummary a = live.Snapshot(), b = restarted.Snapshot();
  EXPECT_EQ(a.pods_held, static_cast<int>(world.pods.size()));
  EXPECT_EQ(b.pods_held, a.pods_held);
  ASSERT_EQ(a.gpu_use.size(), b.gpu_use.size());
  for (const auto& g : a.gpu_use) {
    const GpuSummary& h = Gpu(b, g.node, g.index);
    EXPECT_EQ(g.core_used_milli, h.core_used_milli);
    EXPECT_EQ(g.mem_used_mib, h.mem_used_mib);
    EXPECT_EQ(g.sharers, h.sharers);
  }
  CheckAgainst(live, world);
}

TEST(ClusterStateTest, NewHoldsFeedTheWorkload) {
  ClusterState state(Options());
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960));
  state.UpsertPod(Bound("a", "n1", 0, 1024, 10));
  state.UpsertPod(Bound("b", "n1", 1, 1024, 10));
  uint64_t cursor = 0;
  auto first = state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); });
  EXPECT_EQ(first.size(), 2u);
  state.UpsertPod(Bound("a", "n1", 0, 1024, 10));  // no change: not new
  state.UpsertPod(Bound("c", "n1", 0, 1024, 10));
  auto second = state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); });
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].key, "ns/c");
  EXPECT_EQ(state.Summary().ToString(), "nodes=1 gpu_nodes=1 gpus=2 held=3 assumed=0 waiting=0 conflicts=0 pending=0 host_pods=0");
}

}  // namespace
}  // namespace tessera::scheduler
