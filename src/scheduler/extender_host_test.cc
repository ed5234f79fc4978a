// The extender's prioritize for pods without GPUs (extender.h,
// "place_pods_without_gpus"): scored by the policy on GPU nodes, the best
// score on nodes without GPUs, no opinion on GPU pods or with the option off.
#include <gtest/gtest.h>

#include "core/codec.h"
#include "scheduler/extender.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BoundPodJson;
using testing::FakeBinder;
using testing::FilterBody;
using testing::GpuUuid;
using testing::NodeJson;
using testing::PodJson;

class ExtenderHostTest : public ::testing::Test {
 protected:
  void Make(const std::string& policy, bool place = true) {
    ExtenderOptions o;
    o.policy = policy;
    o.logger = testing::QuietLogger();
    o.place_pods_without_gpus = place;
    auto e = Extender::Create(state_, binder_, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    extender_ = std::move(e).value();
  }
  // Node `name` with 2 A100s and 16 CPUs; `busy`: both GPUs held whole by
  // one pod that asks for 2 CPUs.
  void AddGpuNode(const std::string& name, bool busy) {
    state_.UpsertNode(NodeJson(name, 2, "A100", 40960, "16", "128Gi"));
    if (!busy) return;
    json pod = PodJson("ns", "train-" + name, {{"main", 2, 0, 0}});
    pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "2"}, {"memory", "8Gi"}};
    state_.UpsertPod(BoundPodJson(pod, {name,
                                        {{"main",
                                          {{0, GpuUuid(name, 0), 40960, 1000},
                                           {1, GpuUuid(name, 1), 40960, 1000}}}}}));
  }
  // The workload the policies learn (both start learning at 32 pods): node
  // z9's 32 GPUs each held by a pod that asks for 8 CPUs, so a GPU left with
  // fewer than 8 CPUs takes none.
  void SeedWorkload() {
    state_.UpsertNode(NodeJson("z9", 32, "A100", 40960, "256", "1024Gi"));
    for (int i = 0; i < 32; ++i) {
      json pod = PodJson("seed", "s" + std::to_string(i), {{"main", 1, 0, 0}});
      pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "8"}, {"memory", "8Gi"}};
      state_.UpsertPod(BoundPodJson(pod, {"z9", {{"main", {{i, GpuUuid("z9", i), 40960, 1000}}}}}));
    }
  }
  // A node that kube-scheduler may place pods on but that has no GPU inventory.
  void AddCpuNode(const std::string& name) {
    json node = NodeJson(name, 0, "A100", 40960, "16", "128Gi");
    node["metadata"]["annotations"] = json::object();
    node["status"]["allocatable"].erase("tessera.io/gpu");
    state_.UpsertNode(node);
  }
  // A pending pod with one container asking for `cpu` CPUs and no GPU.
  static json CpuPod(const std::string& name, const std::string& cpu) {
    json pod = PodJson("ns", name, {{"main", 0, 0, 0}});
    pod["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", cpu}, {"memory", "4Gi"}}}};
    return pod;
  }
  HttpReply Ask(const json& pod, const std::vector<std::string>& nodes) {
    return extender_->PrioritizeClaims(FilterBody(pod, nodes));
  }
  std::map<std::string, int64_t> Scores(const json& pod, const std::vector<std::string>& nodes) {
    HttpReply r = Ask(pod, nodes);
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, int64_t> out;
    for (const auto& hp : json::parse(r.body)) out[hp["Host"]] = hp["Score"];
    return out;
  }

  ClusterState state_{testing::QuietStateOptions()};
  FakeBinder binder_;
  std::unique_ptr<Extender> extender_;
};

TEST_F(ExtenderHostTest, ABigCpuPodGoesWhereTheGpusAreAlreadyTaken) {
  // 12 of 16 CPUs on the empty node would leave its two free GPUs 4 CPUs,
  // too few for the pods the policy has seen; on the busy node the GPUs are
  // taken already, so nothing is stranded. kube-scheduler's least-allocated
  // scoring would prefer the empty node, and so would a tie (first name).
  for (const std::string policy : {"tessera", "fgd"}) {
    SCOPED_TRACE(policy);
    Make(policy);
    SeedWorkload();
    AddGpuNode("a-empty", false);
    AddGpuNode("b-busy", true);
    const auto scores = Scores(CpuPod("big", "12"), {"a-empty", "b-busy"});
    ASSERT_EQ(scores.size(), 2u);
    EXPECT_EQ(scores.at("b-busy"), 10);
    EXPECT_LT(scores.at("a-empty"), 10);
  }
}

TEST_F(ExtenderHostTest, NodesWithoutGpusScoreAsTheBestAndUnknownOrFullNodesZero) {
  Make("tessera");
  AddGpuNode("a-empty", false);
  AddGpuNode("b-busy", true);
  AddCpuNode("plain");
  // "nowhere" is not in the node watch yet; "b-busy" has 14 CPUs free, too few.
  const auto scores = Scores(CpuPod("big", "15"), {"a-empty", "b-busy", "plain", "nowhere"});
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_EQ(scores.at("plain"), 10);
  EXPECT_EQ(scores.at("a-empty"), 10);  // the only GPU node with room: the policy's choice
  EXPECT_EQ(scores.at("b-busy"), 0);
  EXPECT_EQ(scores.at("nowhere"), 0);
  // Only nodes without GPUs: they all get 10.
  const auto plain = Scores(CpuPod("small", "1"), {"plain"});
  EXPECT_EQ(plain.at("plain"), 10);
}

TEST_F(ExtenderHostTest, GpuPodsPodsWithPreferencesAndThePodsOfTheOptionOffGetNoOpinion) {
  Make("tessera");
  AddGpuNode("a-empty", false);
  HttpReply gpu = Ask(PodJson("ns", "share", {{"main", 1, 1024, 30}}), {"a-empty"});
  EXPECT_EQ(gpu.status, 200);
  EXPECT_EQ(gpu.body, "[]");  // the first entry's pod
  // A pod with placement preferences of its own keeps them.
  json spread = CpuPod("spread", "12");
  spread["spec"]["topologySpreadConstraints"] = json::parse(
      R"([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}])");
  EXPECT_EQ(Ask(spread, {"a-empty"}).body, "[]");
  json anti = CpuPod("anti", "12");
  anti["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
      json::parse(R"([{"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}])");
  EXPECT_EQ(Ask(anti, {"a-empty"}).body, "[]");
  json best_effort = PodJson("ns", "best-effort", {{"main", 0, 0, 0}});
  best_effort["spec"]["containers"][0].erase("resources");  // asks for nothing: every node would tie
  EXPECT_EQ(Ask(best_effort, {"a-empty"}).body, "[]");
  json mention = CpuPod("mention", "12");  // the word in an annotation does not make it a claim pod
  mention["metadata"]["annotations"]["resourceClaims"] = "none yet";
  EXPECT_EQ(Scores(mention, {"a-empty"}).at("a-empty"), 10);
  json hard = CpuPod("hard", "12");  // a required term is kube-scheduler's filter: still scored
  hard["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      json::parse(R"([{"topologyKey": "kubernetes.io/hostname"}])");
  EXPECT_NE(Ask(hard, {"a-empty"}).body, "[]");
  Make("tessera", /*place=*/false);
  HttpReply off = Ask(CpuPod("big", "12"), {"a-empty"});
  EXPECT_EQ(off.status, 200);
  EXPECT_EQ(off.body, "[]");
  // Not an ExtenderArgs: 400, with the option on.
  Make("tessera");
  EXPECT_EQ(extender_->PrioritizeClaims("{\"Pod\": 1}").status, 400);
}

TEST_F(ExtenderHostTest, ThePodIsBookedOnceKubeSchedulerBindsIt) {
  // The extender does not bind such pods: kube-scheduler does, and the pod
  // watch books the pod's CPU on its node, so the next pod is scored with it.
  Make("tessera");
  SeedWorkload();
  AddGpuNode("a-empty", false);
  AddGpuNode("b-busy", true);
  json first = CpuPod("first", "12");
  EXPECT_EQ(Scores(first, {"a-empty", "b-busy"}).at("b-busy"), 10);
  first["spec"]["nodeName"] = "b-busy";
  first["status"]["phase"] = "Running";
  state_.UpsertPod(first);
  // busy has 2 CPUs left: a second 12-CPU pod fits only the empty node.
  const auto scores = Scores(CpuPod("second", "12"), {"a-empty", "b-busy"});
  EXPECT_EQ(scores.at("a-empty"), 10);
  EXPECT_EQ(scores.at("b-busy"), 0);
}

TEST_F(ExtenderHostTest, ThePodIsBookedWhereItScoredBestBeforeTheWatchShowsIt) {
  // kube-scheduler may score the next pod before the pod watch shows the
  // last one bound: the last one is booked where it scored best already.
  Make("tessera");
  SeedWorkload();
  AddGpuNode("a-empty", false);
  AddGpuNode("b-busy", true);
  EXPECT_EQ(Scores(CpuPod("first", "12"), {"a-empty", "b-busy"}).at("b-busy"), 10);
  EXPECT_EQ(state_.Summary().host_pods_assumed, 1);
  auto scores = Scores(CpuPod("second", "12"), {"a-empty", "b-busy"});
  EXPECT_EQ(scores.at("a-empty"), 10);
  EXPECT_EQ(scores.at("b-busy"), 0);  // 2 CPUs left there
  // Asked again about the first pod (a retry): scored without its own
  // booking, which would leave it 2 CPUs on b-busy (a-empty has 4 now).
  EXPECT_EQ(Scores(CpuPod("first", "12"), {"a-empty", "b-busy"}).at("b-busy"), 10);
  // With a node without GPUs among the candidates kube-scheduler's own
  // scores break the tie: nothing is booked.
  AddCpuNode("plain");
  EXPECT_EQ(Scores(CpuPod("third", "1"), {"a-empty", "b-busy", "plain"}).at("plain"), 10);
  EXPECT_EQ(state_.Summary().host_pods_assumed, 2);
}

TEST_F(ExtenderHostTest, ManyShapesWithoutGpusKeepEveryAnswerRight) {
  // Pods without GPUs come in many shapes; beyond the extender's cache of
  // shapes the least recently asked one gives way. Answers stay what a
  // fresh extender gives, for them and for a GPU pod asked in between.
  Make("tessera");
  SeedWorkload();
  AddGpuNode("a-empty", false);
  AddGpuNode("b-busy", true);
  const std::string gpu_body = FilterBody(PodJson("ns", "share", {{"main", 1, 1024, 30}}), {"a-empty", "b-busy"});
  const std::string gpu_answer = extender_->Prioritize(gpu_body).body;
  for (int i = 0; i < 150; ++i) {
    const std::string cpu = std::to_string(100 + i) + "m";
    const std::string name = "p" + std::to_string(i);
    const auto scores = Scores(CpuPod(name, cpu), {"a-empty", "b-busy"});
    ASSERT_EQ(scores.size(), 2u);
    // Booked where it scored best; never bound here: dropped, so that every
    // answer below is asked of the same cluster.
    EXPECT_TRUE(state_.DropHostAssumption("ns/" + name, "uid-ns-" + name)) << i;
    if (i % 10 == 0) {
      EXPECT_EQ(extender_->Prioritize(gpu_body).body, gpu_answer) << i;
    }
  }
  // The big pod's shape was evicted long ago: scored again, the same.
  const auto big = Scores(CpuPod("big", "12"), {"a-empty", "b-busy"});
  EXPECT_EQ(big.at("b-busy"), 10);
  EXPECT_LT(big.at("a-empty"), 10);
}

}  // namespace
}  // namespace tessera::scheduler
