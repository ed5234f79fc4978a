// LoadTracker and WorkloadOf, and the predicted loads the ClusterState and
// the tessera-interference extender learn from tessera.io/usage.
#include "scheduler/load_tracker.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "core/codec.h"
#include "scheduler/cluster_state.h"
#include "scheduler/extender.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BoundPodJson;
using testing::FilterBody;
using testing::GpuUuid;
using testing::NodeJson;
using testing::PodJson;

constexpr int64_t kNow = 1'790'000'000;  // unix seconds, in 2026

using testing::QuietLogger;

json Owned(json pod, const std::string& kind, const std::string& name, bool controller = true) {
  pod["metadata"]["ownerReferences"] =
      json::array({{{"apiVersion", "apps/v1"}, {"kind", kind}, {"name", name}, {"uid", "u-" + name},
                    {"controller", controller}}});
  return pod;
}

// The tessera.io/usage text of a one-container pod ("main") on GPU `gpu`.
std::string UsageText(int gpu, double utilization, int64_t at_s = kNow) {
  core::PodUsage u;
  u.at = core::WallTime(std::chrono::seconds(at_s));
  u.containers.push_back({"main", {{gpu, "", 1024, utilization}}});
  return core::EncodeUsage(u).value();
}

core::PodRequest Request(const std::string& key, int64_t core_milli) {
  return core::PodRequest{key, 1000, 1024, {{"main", 1, 4096, core_milli, {}}}};
}

core::Assignment On(const std::string& node, int gpu, int64_t core_milli) {
  return {node, {{"main", {{gpu, GpuUuid(node, gpu), 4096, core_milli}}}}};
}

TEST(WorkloadOfTest, LabelThenControllingOwnerThenThePodItself) {
  json pod = PodJson("ml", "web-7d9f8-abcde", {{"main", 1, 1024, 10}});
  EXPECT_EQ(core::WorkloadOf(pod), "Pod/ml/web-7d9f8-abcde");

  // A Deployment's pods (through a ReplicaSet DEPLOYMENT-HASH) are the Deployment.
  json rs = Owned(pod, "ReplicaSet", "web-7d9f8");
  rs["metadata"]["labels"]["pod-template-hash"] = "7d9f8";
  EXPECT_EQ(core::WorkloadOf(rs), "Deployment/ml/web");
  // A ReplicaSet that is not named after the hash stays a ReplicaSet.
  rs["metadata"]["labels"]["pod-template-hash"] = "other";
  EXPECT_EQ(core::WorkloadOf(rs), "ReplicaSet/ml/web-7d9f8");

  EXPECT_EQ(core::WorkloadOf(Owned(pod, "Job", "train-42")), "Job/ml/train-42");
  EXPECT_EQ(core::WorkloadOf(Owned(pod, "StatefulSet", "db")), "StatefulSet/ml/db");

  // The controller wins over other owners.
  json two = Owned(pod, "ConfigMap", "not-it", /*controller=*/false);
  two["metadata"]["ownerReferences"].push_back({{"kind", "Job"}, {"name", "the-job"}, {"controller", true}});
  EXPECT_EQ(core::WorkloadOf(two), "Job/ml/the-job");

  // The label wins over everything.
  json labelled = Owned(pod, "Job", "train-42");
  labelled["metadata"]["labels"][std::string(core::kWorkloadLabel)] = "bert-serving";
  EXPECT_EQ(core::WorkloadOf(labelled), "label/ml/bert-serving");

  json nameless = pod;
  nameless["metadata"].erase("name");
  EXPECT_EQ(core::WorkloadOf(nameless), "");
  EXPECT_EQ(core::WorkloadOf(json::array()), "");
}

TEST(LoadTrackerTest, SharesArePredictedFromTheirRequestUntilMeasured) {
  LoadTracker load(LoadTrackerOptions{.learn = true, .default_factor = 0.5, .history = {}});
  load.Pending("ml/a", "Deployment/ml/web", Request("ml/a", 400), kNow);
  ASSERT_NE(load.book().Expected("ml/a"), nullptr);
  EXPECT_EQ(*load.book().Expected("ml/a"), std::vector<int64_t>{200});  // 0.5 x 400
  load.Placed("ml/a", "Deployment/ml/web", Request("ml/a", 400), On("n1", 0, 400), kNow);
  EXPECT_EQ(load.book().GpuBusy("n1", 0), 200);

  // The first report: the Deployment's history now says 0.1 of a GPU.
  Result<bool> changed = load.Measured("ml/a", "", UsageText(0, 0.1), core::DecodeUsage(UsageText(0, 0.1)), kNow);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(load.book().GpuBusy("n1", 0), 100);
  EXPECT_EQ(load.samples(), 1);
  // The same text again (an unrelated pod update) is not a new sample.
  EXPECT_FALSE(*load.Measured("ml/a", "", UsageText(0, 0.1), core::DecodeUsage(UsageText(0, 0.1)), kNow));
  EXPECT_EQ(load.samples(), 1);

  // A new replica of the Deployment is predicted from its history, not its request.
  load.Pending("ml/b", "Deployment/ml/web", Request("ml/b", 400), kNow);
  EXPECT_EQ(*load.book().Expected("ml/b"), std::vector<int64_t>{100});
  // A pod of another workload is not.
  load.Pending("ml/c", "Deployment/ml/other", Request("ml/c", 400), kNow);
  EXPECT_EQ(*load.book().Expected("ml/c"), std::vector<int64_t>{200});

  // Never above the request, however busy it was measured.
  EXPECT_TRUE(*load.Measured("ml/a", "", UsageText(0, 1.0), core::DecodeUsage(UsageText(0, 1.0)), kNow + 10));
  EXPECT_LE(load.book().GpuBusy("n1", 0), 400);

  load.Released("ml/a");
  EXPECT_EQ(load.book().GpuBusy("n1", 0), 0);
  EXPECT_EQ(load.book().Expected("ml/a"), nullptr);
}

TEST(LoadTrackerTest, MalformedReportsAreRefusedOnceAndChangeNothing) {
  LoadTracker load;
  load.Placed("ml/a", "Job/ml/t", Request("ml/a", 300), On("n1", 1, 300), kNow);
  const std::string bad = R"({"v":1})";
  Result<bool> r = load.Measured("ml/a", "", bad, core::DecodeUsage(bad), kNow);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tessera.io/usage"), std::string::npos) << r.status().message();
  EXPECT_EQ(load.book().GpuBusy("n1", 1), 300);
  EXPECT_EQ(load.samples(), 0);
  // Seen once: the same text on the next pod update is not refused again.
  EXPECT_TRUE(load.Measured("ml/a", "", bad, core::DecodeUsage(bad), kNow).ok());
  // Shares the launch gate does not measure report 0; that is not idleness.
  for (int64_t core : {int64_t{0}, int64_t{1000}}) {
    load.Placed("ml/whole", "Job/ml/w", Request("ml/whole", core), On("n2", 0, core), kNow);
    const int64_t before = load.book().GpuBusy("n2", 0);
    EXPECT_FALSE(*load.Measured("ml/whole", "", UsageText(0, 0.0, kNow + core),
                                core::DecodeUsage(UsageText(0, 0.0, kNow + core)), kNow));
    EXPECT_EQ(load.book().GpuBusy("n2", 0), before) << core;
    load.Released("ml/whole");
  }
  core::PodRequest mps = Request("ml/mps", 300);
  mps.isolation = core::Isolation::kMps;
  load.Placed("ml/mps", "Job/ml/m", mps, On("n2", 1, 300), kNow);
  EXPECT_FALSE(*load.Measured("ml/mps", "", UsageText(1, 0.0), core::DecodeUsage(UsageText(1, 0.0)), kNow));
  EXPECT_EQ(load.book().GpuBusy("n2", 1), 300);
  EXPECT_EQ(load.samples(), 0);
  // Unknown pods and learning off change nothing.
  EXPECT_FALSE(*load.Measured("ml/zz", "", UsageText(0, 0.1), core::DecodeUsage(UsageText(0, 0.1)), kNow));
  LoadTracker off(LoadTrackerOptions{.learn = false, .default_factor = 1.0, .history = {}});
  off.Placed("ml/a", "Job/ml/t", Request("ml/a", 300), On("n1", 1, 300), kNow);
  EXPECT_FALSE(*off.Measured("ml/a", "", UsageText(1, 0.1), core::DecodeUsage(UsageText(1, 0.1)), kNow));
  EXPECT_EQ(off.book().GpuBusy("n1", 1), 300);
}

// ClusterState feeding the tracker from pod events.
class LoadStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterStateOptions o = testing::QuietStateOptions();
    o.wall_now = [] { return core::WallTime(std::chrono::seconds(kNow)); };
    state_ = std::make_unique<ClusterState>(o);
    state_->UpsertNode(NodeJson("n1", 2, "A100", 40960));
  }
  // A pod of Deployment ml/web bound to GPU `gpu` of n1 with `percent` core.
  json WebPod(const std::string& name, int gpu, int percent) {
    json pod = Owned(PodJson("ml", name, {{"main", 1, 4096, percent}}), "ReplicaSet", "web-5c4b");
    pod["metadata"]["labels"]["pod-template-hash"] = "5c4b";
    return BoundPodJson(pod, On("n1", gpu, percent * 10));
  }
  int64_t Busy(int gpu) const {
    return state_->Read([gpu](const ClusterView& v) { return v.load().book().GpuBusy("n1", gpu); });
  }
  uint64_t Version() const {
    return state_->Read([](const ClusterView& v) { return v.ledger().FindNode("n1")->version; });
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(LoadStateTest, UsageReportsRebookTheirPodAndTeachItsWorkload) {
  json a = WebPod("web-5c4b-aaaaa", 0, 60);
  state_->UpsertPod(a);
  EXPECT_EQ(Busy(0), 600);  // no report yet: its request
  const uint64_t before = Version();

  a["metadata"]["annotations"][std::string(core::kUsageAnnotation)] = UsageText(0, 0.05);
  state_->UpsertPod(a);
  EXPECT_EQ(Busy(0), 50);
  EXPECT_NE(Version(), before) << "cached scores of n1 must be recomputed";
  const StateSummary s = state_->Snapshot();
  EXPECT_EQ(s.workloads_learned, 1);
  EXPECT_EQ(s.usage_samples_total, 1);
  EXPECT_EQ(s.gpu_use[0].predicted_busy_milli, 50);

  // An unchanged report does not touch the node again.
  const uint64_t after = Version();
  state_->UpsertPod(a);
  EXPECT_EQ(Version(), after);

  // A pending replica of the same Deployment is expected at the learned load.
  json b = Owned(PodJson("ml", "web-5c4b-bbbbb", {{"main", 1, 4096, 60}}), "ReplicaSet", "web-5c4b");
  b["metadata"]["labels"]["pod-template-hash"] = "5c4b";
  state_->UpsertPod(b);
  state_->Read([](const ClusterView& v) {
    const std::vector<int64_t>* e = v.load().book().Expected("ml/web-5c4b-bbbbb");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(*e, std::vector<int64_t>{50});
  });

  // A report that cannot be read is counted, logged and changes nothing.
  a["metadata"]["annotations"][std::string(core::kUsageAnnotation)] = "{not json";
  state_->UpsertPod(a);
  EXPECT_EQ(Busy(0), 50);
  EXPECT_EQ(state_->Summary().usage_rejected_total, 1);

  // Deleting the pod drops its load.
  state_->DeletePod(a);
  EXPECT_EQ(Busy(0), 0);
}

// The extender's tessera-interference places by measured load: two GPUs
// hold equal requests, but only one is busy.
TEST(InterferenceExtenderTest, MeasuredLoadSteersPodsAwayFromTheBusyGpu) {
  for (const bool learn : {false, true}) {
    SCOPED_TRACE(learn ? "learning from tessera.io/usage" : "requests only");
    ClusterStateOptions so = testing::QuietStateOptions();
    so.load.learn = learn;
    so.wall_now = [] { return core::WallTime(std::chrono::seconds(kNow)); };
    ClusterState state(so);
    state.UpsertNode(NodeJson("n1", 1, "A100", 40960));
    state.UpsertNode(NodeJson("n2", 1, "A100", 40960));
    // Both GPUs hold 60 % requests; n1's pod runs flat out, n2's is nearly idle.
    json busy = BoundPodJson(PodJson("ml", "busy", {{"main", 1, 4096, 60}}), On("n1", 0, 600));
    busy["metadata"]["annotations"][std::string(core::kUsageAnnotation)] = UsageText(0, 0.6);
    json idle = BoundPodJson(PodJson("ml", "idle", {{"main", 1, 4096, 60}}), On("n2", 0, 600));
    idle["metadata"]["annotations"][std::string(core::kUsageAnnotation)] = UsageText(0, 0.05);
    state.UpsertPod(busy);
    state.UpsertPod(idle);

    testing::FakeBinder binder;
    ExtenderOptions eo;
    eo.policy = "tessera-interference";
    eo.logger = QuietLogger();
    auto extender = Extender::Create(state, binder, eo);
    ASSERT_TRUE(extender.ok()) << extender.status().ToString();
    // A 30 % pod of unknown history is predicted at its request: 0.6 + 0.3
    // is over the 0.7 ceiling on a GPU as busy as its requests say.
    const json pod = PodJson("ml", "new", {{"main", 1, 4096, 30}});
    state.UpsertPod(pod);
    HttpReply r = (*extender)->Prioritize(FilterBody(pod, {"n1", "n2"}));
    ASSERT_EQ(r.status, 200) << r.body;
    std::map<std::string, int64_t> scores;
    for (const auto& h : json::parse(r.body)) scores[h.at("Host").get<std::string>()] = h.at("Score").get<int64_t>();
    if (learn) {
      EXPECT_EQ(scores["n2"], 10) << r.body;
      EXPECT_LT(scores["n1"], 10) << r.body;
    } else {
      // Equal requests, equal predictions: the tie goes to the first name.
      EXPECT_EQ(scores["n1"], 10) << r.body;
      EXPECT_LT(scores["n2"], 10) << r.body;
    }
  }
}

}  // namespace
}  // namespace tessera::scheduler
