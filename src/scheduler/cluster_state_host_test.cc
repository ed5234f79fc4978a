// Bound pods without GPUs in ClusterState (cluster_state.h, "Pods without
// GPUs"): their CPU and memory in the ledger, their arrivals for the policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/codec.h"
#include "core/policy.h"
#include "scheduler/cluster_state.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BoundPodJson;
using testing::GpuUuid;
using testing::NodeJson;
using testing::PodJson;

// A pod with one container asking for CPU "1" and memory "1Gi" and no GPU,
// bound to `node` (no assignment annotation: kube-scheduler placed it).
json HostPod(const std::string& name, const std::string& node, const std::string& phase = "Running",
             const std::string& uid = "") {
  json pod = PodJson("ns", name, {{"main", 0, 0, 0}}, {}, uid);
  pod["spec"]["nodeName"] = node;
  pod["status"]["phase"] = phase;
  return pod;
}

json GpuPod(const std::string& name, const std::string& node, int gpu) {
  return BoundPodJson(PodJson("ns", name, {{"main", 1, 1024, 10}}),
                      {node, {{"main", {{gpu, GpuUuid(node, gpu), 1024, 100}}}}});
}

int64_t CpuFree(const ClusterState& state, const std::string& node) {
  return state.Read([&](const ClusterView& v) {
    const core::NodeState* n = v.ledger().FindNode(node);
    return n == nullptr ? int64_t{-1} : n->CpuFree();
  });
}

int64_t MemFree(const ClusterState& state, const std::string& node) {
  return state.Read([&](const ClusterView& v) { return v.ledger().FindNode(node)->MemFree(); });
}

TEST(ClusterStateHostPods, BookTheirCpuAndMemoryUntilTheyEnd) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960, "8", "16Gi"));
  state.UpsertPod(HostPod("web", "n1"));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  EXPECT_EQ(MemFree(state, "n1"), 15 * 1024);
  EXPECT_EQ(state.Summary().host_pods, 1);
  EXPECT_EQ(state.Summary().pods_held, 0);  // not a GPU pod
  EXPECT_TRUE(state.Read([](const ClusterView& v) { return v.ledger().StateOf("host:ns/web").value(); }) ==
              core::HoldState::kConfirmed);
  const auto on = state.Read([](const ClusterView& v) { return v.HostPodsOn("n1"); });
  ASSERT_EQ(on.size(), 1u);
  EXPECT_EQ(on[0].key, "ns/web");
  EXPECT_EQ(on[0].uid, "uid-ns-web");
  EXPECT_EQ(on[0].cpu_milli, 1000);

  // A status update changes nothing (not even the node's version).
  const uint64_t version = state.Read([](const ClusterView& v) { return v.ledger().FindNode("n1")->version; });
  json update = HostPod("web", "n1");
  update["status"]["podIP"] = "10.0.0.7";
  state.UpsertPod(update);
  EXPECT_EQ(state.Read([](const ClusterView& v) { return v.ledger().FindNode("n1")->version; }), version);

  // Finished: released. Deleted: released.
  state.UpsertPod(HostPod("web", "n1", "Succeeded"));
  EXPECT_EQ(CpuFree(state, "n1"), 8000);
  state.UpsertPod(HostPod("db", "n1"));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  state.DeletePod(HostPod("db", "n1", "Running", "another-uid"));  // a newer pod of that name: kept
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  state.DeletePod(HostPod("db", "n1"));
  EXPECT_EQ(CpuFree(state, "n1"), 8000);
  EXPECT_EQ(state.Summary().host_pods, 0);
  EXPECT_EQ(state.Read([](const ClusterView& v) { return v.ledger().pod_count(); }), 0u);
}

TEST(ClusterStateHostPods, AReplacedOrResizedPodIsBookedAnew) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960, "8"));
  state.UpsertPod(HostPod("web", "n1"));
  json bigger = HostPod("web", "n1");
  bigger["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3";
  state.UpsertPod(bigger);
  EXPECT_EQ(CpuFree(state, "n1"), 5000);
  state.UpsertPod(HostPod("web", "n1", "Running", "uid-2"));  // same name, new pod
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  EXPECT_EQ(state.Summary().host_pods, 1);
}

TEST(ClusterStateHostPods, WaitForTheirNodeToBeAGpuNode) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertPod(HostPod("web", "n1"));  // node not seen yet
  EXPECT_EQ(state.Summary().host_pods, 0);
  EXPECT_TRUE(state.Problems().empty());  // nothing wrong: most pods run on nodes without GPUs
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960, "8"));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);

  // The node loses its inventory: it leaves the ledger, the pod with it;
  // back with it.
  json plain = NodeJson("n1", 2, "A100", 40960, "8");
  plain["metadata"]["annotations"].erase(std::string(core::kInventoryAnnotation));
  state.UpsertNode(plain);
  EXPECT_EQ(state.Summary().gpu_nodes, 0);
  EXPECT_EQ(state.Summary().host_pods, 0);
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960, "8"));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);

  // A node that shrinks under its pods re-books them, pods without GPUs
  // first (the kubelet has admitted them); the GPU pod that no longer fits
  // is a conflict.
  state.UpsertPod(GpuPod("g", "n1", 0));
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960, "1"));
  EXPECT_EQ(CpuFree(state, "n1"), 0);
  EXPECT_EQ(state.Summary().host_pods, 1);
  EXPECT_EQ(state.Summary().pods_conflict, 1);

  // Deleted: nothing left on it, and the pod is booked again if it returns.
  state.DeleteNode("n1");
  EXPECT_EQ(state.Summary().host_pods, 0);
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960, "8"));
  EXPECT_EQ(CpuFree(state, "n1"), 6000);
}

TEST(ClusterStateHostPods, OneThatDoesNotFitIsListedAndBookedWhenRoomFrees) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960, "2"));
  state.UpsertPod(GpuPod("g", "n1", 0));  // 1 CPU
  state.UpsertPod(HostPod("a", "n1"));
  state.UpsertPod(HostPod("b", "n1"));  // the book has no CPU left for it
  EXPECT_EQ(state.Summary().host_pods, 1);
  EXPECT_EQ(state.Summary().host_pods_unfit, 1);
  const std::vector<std::string> problems = state.Problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("ns/b (no GPU)"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("CPU"), std::string::npos) << problems[0];
  EXPECT_EQ(state.Summary().pods_conflict, 0);  // GPU pods are not blamed for it

  // The node leaves the ledger and comes back: the pod that did not fit is
  // no problem while its node is not a GPU node, and is judged again after.
  json plain = NodeJson("n1", 1, "A100", 40960, "2");
  plain["metadata"]["annotations"].erase(std::string(core::kInventoryAnnotation));
  state.UpsertNode(plain);
  EXPECT_EQ(state.Summary().host_pods_unfit, 0);
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960, "2"));
  EXPECT_EQ(state.Summary().host_pods, 2);  // pods without GPUs first: they run there
  EXPECT_EQ(state.Summary().pods_conflict, 1);
  state.DeletePod(GpuPod("g", "n1", 0));
  EXPECT_EQ(state.Summary().host_pods, 2);
  EXPECT_EQ(state.Summary().host_pods_unfit, 0);
  EXPECT_EQ(CpuFree(state, "n1"), 0);
  EXPECT_TRUE(state.Problems().empty());
}

TEST(ClusterStateHostPods, FilterSeesTheirCpu) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertNode(NodeJson("n1", 2, "A100", 40960, "2"));
  state.UpsertPod(HostPod("a", "n1"));
  state.UpsertPod(HostPod("b", "n1"));
  core::PodRequest gpu_pod;
  gpu_pod.key = "ns/train";
  gpu_pod.cpu_milli = 1000;
  gpu_pod.containers.push_back({"main", 1, 1024, 100, {}});
  EXPECT_EQ(state.Read([&](const ClusterView& v) { return core::FitsNode(gpu_pod, *v.ledger().FindNode("n1")); }),
            core::FitFailure::kCpu);
}

TEST(ClusterStateHostPods, AreArrivalsForThePolicyWhereverTheyRun) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960, "8"));
  uint64_t cursor = 0;
  (void)state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); });
  state.UpsertPod(HostPod("web", "n1"));
  state.UpsertPod(HostPod("batch", "cpu-node-7"));  // not a GPU node: counted all the same
  state.UpsertPod(HostPod("web", "n1"));            // seen again: not new
  json resized = HostPod("web", "n1");
  resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2";
  state.UpsertPod(resized);  // resized in place: booked anew, not a new arrival
  const auto fresh = state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); });
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].key, "host:ns/web");
  EXPECT_EQ(fresh[0].cpu_milli, 1000);
  EXPECT_FALSE(fresh[0].UsesGpu());
  EXPECT_EQ(fresh[1].key, "host:ns/batch");
  const auto held = state.Read([](const ClusterView& v) { return v.HeldRequests(); });
  EXPECT_EQ(held.size(), 2u);

  // A pod asking for a GPU resource, bound without an assignment, is not a
  // pod without GPUs (it is warned about, and holds nothing).
  json gpu = PodJson("ns", "rogue", {{"main", 1, 1024, 10}});
  gpu["spec"]["nodeName"] = "n1";
  gpu["status"]["phase"] = "Running";
  state.UpsertPod(gpu);
  EXPECT_EQ(state.Summary().host_pods, 1);
  EXPECT_EQ(CpuFree(state, "n1"), 6000);  // web's 2 CPUs only
}

// Booked on the node prioritize scored best before the pod watch shows it
// bound (cluster_state.h, "Pods without GPUs": AssumeHostPod).
TEST(ClusterStateHostPods, AnAssumedPodIsBookedUntilTheWatchShowsWhereItRuns) {
  ClusterState state(testing::QuietStateOptions());
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960, "8"));
  state.UpsertNode(NodeJson("n2", 1, "A100", 40960, "8"));
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  uint64_t cursor = 0;
  (void)state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); });
  const json pending = HostPod("web", "", "Pending");
  const auto view = state.UpsertPod(pending);  // unbound: nothing booked yet
  EXPECT_EQ(CpuFree(state, "n1"), 8000);
  state.AssumeHostPod(*view, "n1", t0);
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  EXPECT_EQ(state.Summary().host_pods_assumed, 1);
  state.UpsertPod(pending);  // the watch behind kube-scheduler: the pod as it was before its binding
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  state.UpsertPod(HostPod("web", "n1"));  // bound where it was booked: confirmed
  EXPECT_EQ(state.Summary().host_pods_assumed, 0);
  EXPECT_EQ(state.Summary().host_pods, 1);
  state.AssumeHostPod(*view, "n2", t0);  // the watch has shown it bound: nothing changes
  EXPECT_EQ(state.ExpireAssumed(t0 + std::chrono::hours(1)), 0);
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  EXPECT_EQ(CpuFree(state, "n2"), 8000);
  // One arrival for the policy, when it was booked first.
  const auto fresh = state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); });
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].key, "host:ns/web");

  // Bound elsewhere than assumed: moved there, not a second arrival.
  const auto db = state.UpsertPod(HostPod("db", "", "Pending"));
  state.AssumeHostPod(*db, "n1", t0);
  EXPECT_EQ(CpuFree(state, "n1"), 6000);
  state.UpsertPod(HostPod("db", "n2"));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  EXPECT_EQ(CpuFree(state, "n2"), 7000);
  EXPECT_EQ(state.Read([&](const ClusterView& v) { return v.NewHoldsSince(&cursor); }).size(), 1u);

  // Deleted while assumed: released.
  const auto gone = state.UpsertPod(HostPod("gone", "", "Pending"));
  state.AssumeHostPod(*gone, "n2", t0);
  EXPECT_EQ(CpuFree(state, "n2"), 6000);
  state.DeletePod(HostPod("gone", "", "Pending"));
  EXPECT_EQ(CpuFree(state, "n2"), 7000);
  EXPECT_EQ(state.Summary().host_pods_assumed, 0);
}

TEST(ClusterStateHostPods, AnAssumptionTheWatchNeverConfirmsExpiresOrIsDropped) {
  ClusterState state(testing::QuietStateOptions());  // host_assume_ttl 10 s
  state.UpsertNode(NodeJson("n1", 1, "A100", 40960, "8"));
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  const auto view = state.UpsertPod(HostPod("web", "", "Pending"));
  state.AssumeHostPod(*view, "n1", t0);
  state.AssumeHostPod(*view, "n1", t0 + std::chrono::seconds(5));  // scored again: booked once, from then
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  state.ExpireAssumed(t0 + std::chrono::seconds(14));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  state.ExpireAssumed(t0 + std::chrono::seconds(15));
  EXPECT_EQ(CpuFree(state, "n1"), 8000);
  EXPECT_EQ(state.Summary().host_expired_total, 1);
  EXPECT_EQ(state.Summary().host_pods, 0);

  // Dropped (kube-scheduler asks about the pod again): only an assumption,
  // and only the same pod's.
  state.AssumeHostPod(*view, "n1", t0);
  EXPECT_FALSE(state.DropHostAssumption("ns/web", "another-uid"));
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  EXPECT_TRUE(state.DropHostAssumption("ns/web", view->uid));
  EXPECT_EQ(CpuFree(state, "n1"), 8000);
  state.UpsertPod(HostPod("web", "n1"));
  EXPECT_FALSE(state.DropHostAssumption("ns/web", view->uid));  // bound and seen: stays
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
  // A bound pod, or one asking for a GPU, is never assumed.
  const auto gpu = state.UpsertPod(PodJson("ns", "share", {{"main", 1, 1024, 10}}));
  state.AssumeHostPod(*gpu, "n1", t0);
  EXPECT_EQ(CpuFree(state, "n1"), 7000);
}

}  // namespace
}  // namespace tessera::scheduler
