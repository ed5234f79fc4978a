#include "scheduler/preemptor.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "core/timestamp.h"
#include "scheduler/extender.h"
#include "scheduler/test_cluster.h"
#include "scheduler/wire.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BindBody;
using testing::FilterBody;
using testing::NodeJson;
using testing::PodJson;

using testing::QuietLogger;

// Records evictions and events; refuses (as a PodDisruptionBudget would) the pods in `protected_`.
class FakeApi : public PreemptionApi {
 public:
  struct Eviction {
    std::string key;
    bool dry_run;
  };
  struct Event {
    std::string key, type, reason, message;
  };
  Status Evict(const std::string& ns, const std::string& name, const std::string&, bool dry_run) override {
    evictions.push_back({ns + "/" + name, dry_run});
    if (protected_pods.contains(ns + "/" + name)) return ResourceExhausted("429: disruption budget");
    return Status::Ok();
  }
  void RecordEvent(const std::string& ns, const std::string& name, const std::string&, const std::string& type,
                   const std::string& reason, const std::string& message) override {
    events.push_back({ns + "/" + name, type, reason, message});
  }
  std::vector<std::string> Evicted() const {
    std::vector<std::string> out;
    for (const auto& e : evictions)
      if (!e.dry_run) out.push_back(e.key);
    return out;
  }
  std::vector<Event> EventsWith(const std::string& reason) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e.reason == reason) out.push_back(e);
    return out;
  }
  std::set<std::string> protected_pods;
  std::vector<Eviction> evictions;
  std::vector<Event> events;
};

class PreemptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::make_unique<ClusterState>(testing::QuietStateOptions());
    PreemptorOptions po;
    po.logger = QuietLogger();
    po.delay = std::chrono::milliseconds(0);
    po.unix_now = [] { return int64_t{1'000'000}; };
    preemptor_ = std::make_unique<GpuPreemptor>(*state_, api_, po);
    ExtenderOptions eo;
    eo.logger = QuietLogger();
    eo.preemptor = preemptor_.get();
    auto e = Extender::Create(*state_, binder_, eo);
    ASSERT_TRUE(e.ok());
    extender_ = std::move(e).value();
  }

  // A pod of `priority` holding `core` % and `mem` MiB of GPU `gpu` on `node`,
  // started `age` seconds before the test clock.
  json Running(const std::string& name, const std::string& node, int gpu, int core, int64_t mem, int priority,
               int64_t age) {
    json pod = PodJson("ns", name, {{"main", 1, mem, core}});
    pod["spec"]["priority"] = priority;
    core::Assignment a;
    a.node = node;
    core::ContainerAssignment ca;
    ca.name = "main";
    core::GpuShare s;
    s.index = gpu;
    s.uuid = testing::GpuUuid(node, gpu);
    s.mem_mib = mem;
    s.core_milli = core * 10;
    ca.gpus.push_back(s);
    a.containers.push_back(ca);
    json bound = testing::BoundPodJson(pod, a);
    bound["status"]["startTime"] = core::FormatRfc3339(std::chrono::system_clock::time_point(
        std::chrono::seconds(1'000'000 - age)));
    state_->UpsertPod(bound);
    return bound;
  }
  json Pending(const std::string& name, int core, int64_t mem, int priority) {
    json pod = PodJson("ns", name, {{"main", 1, mem, core}});
    pod["spec"]["priority"] = priority;
    state_->UpsertPod(pod);
    return pod;
  }
  std::vector<std::string> Passed(const json& pod, const std::vector<std::string>& nodes) {
    HttpReply r = extender_->Filter(FilterBody(pod, nodes));
    EXPECT_EQ(r.status, 200);
    json body = json::parse(r.body);
    std::vector<std::string> out;
    for (const auto& n : body["NodeNames"]) out.push_back(n.get<std::string>());
    return out;
  }

  // The victims' UIDs the preempt verb answers for `pod` on `node` when
  // kube-scheduler names none there (its own filters do not see GPU shares
  // or slots).
  std::vector<std::string> PreemptVictims(const json& pod, const std::string& node) {
    const json args = {{"Pod", pod},
                       {"NodeNameToMetaVictims", {{node, {{"Pods", json::array()}, {"NumPDBViolations", 0}}}}}};
    HttpReply r = extender_->Preempt(args.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    std::vector<std::string> out;
    if (!body.is_object() || !body["NodeNameToMetaVictims"].contains(node)) return out;
    for (const auto& p : body["NodeNameToMetaVictims"][node]["Pods"]) out.push_back(p.value("UID", ""));
    return out;
  }

  std::unique_ptr<ClusterState> state_;
  FakeApi api_;
  testing::FakeBinder binder_;
  std::unique_ptr<GpuPreemptor> preemptor_;
  std::unique_ptr<Extender> extender_;
};

TEST_F(PreemptorTest, EvictsTheMinimalVictimsAndKeepsTheirShareForThePreemptor) {
  state_->UpsertNode(NodeJson("n1", 1, "A100", 40960));
  const json a = Running("low-a", "n1", 0, 30, 8192, 0, 9000);
  const json b = Running("low-b", "n1", 0, 30, 8192, 0, 60);
  const json c = Running("low-c", "n1", 0, 30, 8192, 0, 120);
  const json high = Pending("high", 50, 8192, 1000);
  EXPECT_TRUE(Passed(high, {"n1"}).empty());
  EXPECT_EQ(preemptor_->RunPending(), 1);
  // 10 % free, 50 % needed: two 30 % pods must go, the two youngest.
  EXPECT_EQ(api_.Evicted(), (std::vector<std::string>{"ns/low-b", "ns/low-c"}));
  ASSERT_EQ(api_.EventsWith("TesseraPreempted").size(), 2u);
  EXPECT_NE(api_.EventsWith("TesseraPreempted")[0].message.find("Preempted by ns/high (priority 1000) on node n1"),
            std::string::npos)
      << api_.EventsWith("TesseraPreempted")[0].message;
  ASSERT_EQ(api_.EventsWith("TesseraPreempting").size(), 1u);
  EXPECT_EQ(api_.EventsWith("TesseraPreempting")[0].key, "ns/high");
  EXPECT_NE(api_.EventsWith("TesseraPreempting")[0].message.find("ns/low-b (priority 0), ns/low-c (priority 0)"),
            std::string::npos)
      << api_.EventsWith("TesseraPreempting")[0].message;
  ASSERT_EQ(preemptor_->nominations().size(), 1u);
  EXPECT_EQ(preemptor_->nominations()[0].node, "n1");

  // Retries of the same pod while the victims terminate plan nothing new.
  EXPECT_TRUE(Passed(high, {"n1"}).empty());
  EXPECT_EQ(preemptor_->RunPending(), 0);
  EXPECT_EQ(api_.Evicted().size(), 2u);

  // The victims are gone: a low-priority pod may not take the freed share...
  state_->DeletePod(b);
  state_->DeletePod(c);
  const json sneaky = Pending("sneaky", 30, 4096, 0);
  HttpReply r = extender_->Filter(FilterBody(sneaky, {"n1"}));
  EXPECT_NE(r.body.find("reserved for preempting pod ns/high"), std::string::npos) << r.body;
  // ...the preemptor takes it, and its nomination ends when it binds.
  EXPECT_EQ(Passed(high, {"n1"}), std::vector<std::string>{"n1"});
  HttpReply bound = extender_->Bind(BindBody("ns", "high", "uid-ns-high", "n1"));
  EXPECT_EQ(bound.decision, Decision::kBound) << bound.body;
  EXPECT_TRUE(preemptor_->nominations().empty());
  // Room the nomination does not need stays usable: 20 % is left.
  const json small = Pending("small", 20, 4096, 0);
  EXPECT_EQ(Passed(small, {"n1"}), std::vector<std::string>{"n1"});
  (void)a;
}

TEST_F(PreemptorTest, ADisruptionBudgetMovesToTheNextPlanBeforeEvictingAnything) {
  state_->UpsertNode(NodeJson("n1", 1, "A100", 40960));
  state_->UpsertNode(NodeJson("n2", 1, "A100", 40960));
  Running("cheap", "n1", 0, 80, 8192, 0, 10);
  Running("dear", "n2", 0, 80, 8192, 0, 5000);
  api_.protected_pods = {"ns/cheap"};
  const json high = Pending("high", 50, 8192, 100);
  EXPECT_TRUE(Passed(high, {"n1", "n2"}).empty());
  EXPECT_EQ(preemptor_->RunPending(), 1);
  EXPECT_EQ(api_.Evicted(), std::vector<std::string>{"ns/dear"});
  ASSERT_EQ(preemptor_->nominations().size(), 1u);
  EXPECT_EQ(preemptor_->nominations()[0].node, "n2");
}

TEST_F(PreemptorTest, GivesUpWithAReasonWhenEveryPlanIsRefused) {
  state_->UpsertNode(NodeJson("n1", 1, "A100", 40960));
  Running("guarded", "n1", 0, 80, 8192, 0, 10);
  api_.protected_pods = {"ns/guarded"};
  const json high = Pending("high", 50, 8192, 100);
  EXPECT_TRUE(Passed(high, {"n1"}).empty());
  EXPECT_EQ(preemptor_->RunPending(), 1);
  EXPECT_TRUE(api_.Evicted().empty());
  EXPECT_TRUE(preemptor_->nominations().empty());
  ASSERT_EQ(api_.EventsWith("TesseraPreemptionFailed").size(), 1u);
  EXPECT_NE(api_.EventsWith("TesseraPreemptionFailed")[0].message.find("PodDisruptionBudgets forbid evicting ns/guarded"),
            std::string::npos)
      << api_.EventsWith("TesseraPreemptionFailed")[0].message;
  // The next retry within retry_after is not planned again.
  EXPECT_TRUE(Passed(high, {"n1"}).empty());
  EXPECT_EQ(preemptor_->RunPending(), 0);
}

TEST_F(PreemptorTest, NoPreemptionForPodsThatFitOrMayNotPreempt) {
  state_->UpsertNode(NodeJson("n1", 1, "A100", 40960));
  Running("low", "n1", 0, 80, 8192, 0, 10);
  const json fits = Pending("fits", 10, 4096, 1000);
  EXPECT_EQ(Passed(fits, {"n1"}), std::vector<std::string>{"n1"});
  json never = Pending("never", 50, 4096, 1000);
  never["spec"]["preemptionPolicy"] = "Never";
  EXPECT_TRUE(Passed(never, {"n1"}).empty());
  const json peer = Pending("peer", 50, 4096, 0);  // same priority as the holder
  EXPECT_TRUE(Passed(peer, {"n1"}).empty());
  preemptor_->RunPending();
  EXPECT_TRUE(api_.evictions.empty());
  EXPECT_TRUE(api_.EventsWith("TesseraPreemptionFailed").empty()) << "nothing of lower priority: no event";
}

TEST_F(PreemptorTest, PreemptVerbAddsGpuVictimsToKubeSchedulersAndDropsHopelessNodes) {
  state_->UpsertNode(NodeJson("n1", 1, "A100", 40960));
  state_->UpsertNode(NodeJson("n2", 1, "A100", 40960));
  Running("a", "n1", 0, 30, 8192, 0, 10);
  Running("b", "n1", 0, 60, 8192, 0, 20);
  Running("keep", "n2", 0, 90, 8192, 500, 20);
  json high = Pending("high", 50, 8192, 100);
  const json args = {{"Pod", high},
                     {"NodeNameToMetaVictims",
                      {{"n1", {{"Pods", json::array({{{"UID", "uid-ns-a"}}})}, {"NumPDBViolations", 0}}},
                       {"n2", {{"Pods", json::array()}, {"NumPDBViolations", 0}}}}}};
  HttpReply r = extender_->Preempt(args.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.decision, Decision::kVictims);
  const json out = json::parse(r.body);
  ASSERT_TRUE(out["NodeNameToMetaVictims"].contains("n1")) << r.body;
  EXPECT_FALSE(out["NodeNameToMetaVictims"].contains("n2")) << "n2's GPU is held by a higher-priority pod";
  const json& pods = out["NodeNameToMetaVictims"]["n1"]["Pods"];
  ASSERT_EQ(pods.size(), 2u) << r.body;
  EXPECT_EQ(pods[0]["UID"], "uid-ns-a");
  EXPECT_EQ(pods[1]["UID"], "uid-ns-b");
  // kube-scheduler drives this pod now: the extender's own preemption stands aside.
  EXPECT_TRUE(Passed(high, {"n1"}).empty());
  preemptor_->RunPending();
  EXPECT_TRUE(api_.evictions.empty());
}

TEST_F(PreemptorTest, PreemptVerbCountsTheCpuOfVictimsWithoutGpus) {
  // n1 has 2 CPUs: one taken by a GPU pod, one by a pod without GPUs. The
  // pending pod's GPU share fits beside the GPU pod; it lacks only the CPU
  // that kube-scheduler's victim, the pod without GPUs, gives back.
  state_->UpsertNode(NodeJson("n1", 1, "A100", 40960, "2"));
  Running("a", "n1", 0, 30, 8192, 0, 10);
  json web = PodJson("ns", "web", {{"main", 0, 0, 0}});
  web["spec"]["nodeName"] = "n1";
  web["status"]["phase"] = "Running";
  state_->UpsertPod(web);
  json high = Pending("high", 50, 8192, 100);
  const json args = {{"Pod", high},
                     {"NodeNameToMetaVictims",
                      {{"n1", {{"Pods", json::array({{{"UID", "uid-ns-web"}}})}, {"NumPDBViolations", 0}}}}}};
  HttpReply r = extender_->Preempt(args.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(r.body);
  ASSERT_TRUE(out["NodeNameToMetaVictims"].contains("n1")) << r.body;
  const json& pods = out["NodeNameToMetaVictims"]["n1"]["Pods"];
  ASSERT_EQ(pods.size(), 1u) << "no GPU victim is needed: " << r.body;
  EXPECT_EQ(pods[0]["UID"], "uid-ns-web");
}

// A node whose kubelet has fewer tessera.io/gpu slots allocatable than its
// inventory lists (some GPUs' slots unhealthy): 1 GPU, 4 slots listed, 2
// allocatable.
json ShortOfSlots(const std::string& name, const std::string& allocatable) {
  std::vector<core::GpuInfo> gpus(1);
  gpus[0] = {.index = 0, .uuid = testing::GpuUuid(name, 0), .model = "A100", .memory_mib = 40960, .sm_count = 108};
  gpus[0].max_sharers = 4;
  json node = NodeJson(name, gpus);
  node["status"]["allocatable"]["tessera.io/gpu"] = allocatable;
  return node;
}

TEST_F(PreemptorTest, FreesTheSlotsAKubeletIsShortOf) {
  state_->UpsertNode(ShortOfSlots("s1", "2"));
  Running("old", "s1", 0, 10, 1024, 0, 9000);
  const json young = Running("young", "s1", 0, 10, 1024, 0, 60);
  // The GPU has room; the slots do not. Evicting frees one: left to preemption.
  const json high = Pending("high", 10, 1024, 1000);
  HttpReply r = extender_->Filter(FilterBody(high, {"s1"}));
  EXPECT_NE(json::parse(r.body)["FailedNodes"]["s1"].get<std::string>().find(
                "2 tessera.io/gpu slots allocatable, 2 of them taken, and the pod asks for 1"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(preemptor_->RunPending(), 1);
  EXPECT_EQ(api_.Evicted(), std::vector<std::string>{"ns/young"}) << "one slot, the least work lost";
  ASSERT_EQ(api_.EventsWith("TesseraPreempted").size(), 1u);
  EXPECT_NE(api_.EventsWith("TesseraPreempted")[0].message.find(
                "it needs 1024 MiB and 10 percent of 1 GPU, with 1 tessera.io/gpu slot (its kubelet has 2 "
                "allocatable) and this pod (priority 0) held [0:1024MiB/10%] and 1 tessera.io/gpu slot"),
            std::string::npos)
      << api_.EventsWith("TesseraPreempted")[0].message;
  ASSERT_EQ(preemptor_->nominations().size(), 1u);
  EXPECT_EQ(preemptor_->nominations()[0].slots.count, 1);

  // While the victim terminates, and once it is gone, its slot is the preemptor's.
  const json sneaky = Pending("sneaky", 10, 1024, 0);
  r = extender_->Filter(FilterBody(sneaky, {"s1"}));
  EXPECT_NE(r.body.find("2 of them taken, and the pod asks for 1"), std::string::npos) << r.body;
  state_->DeletePod(young);
  r = extender_->Filter(FilterBody(sneaky, {"s1"}));
  EXPECT_NE(r.body.find("2 of them taken (1 by pods being bound or preempting)"), std::string::npos) << r.body;
  HttpReply bound = extender_->Bind(BindBody("ns", "sneaky", "uid-ns-sneaky", "s1"));
  EXPECT_NE(bound.body.find("no longer fits"), std::string::npos) << "Bind counts the nomination too: " << bound.body;
  EXPECT_EQ(Passed(high, {"s1"}), std::vector<std::string>{"s1"});
  bound = extender_->Bind(BindBody("ns", "high", "uid-ns-high", "s1"));
  EXPECT_EQ(bound.decision, Decision::kBound) << bound.body;
  EXPECT_TRUE(preemptor_->nominations().empty());
  EXPECT_EQ(api_.Evicted().size(), 1u);
}

TEST_F(PreemptorTest, NoPreemptionForMoreSlotsThanTheKubeletHas) {
  state_->UpsertNode(ShortOfSlots("s1", "0"));  // the node agent has not registered yet
  const json high = Pending("high", 10, 1024, 1000);
  HttpReply r = extender_->Filter(FilterBody(high, {"s1"}));
  EXPECT_NE(json::parse(r.body)["FailedAndUnresolvableNodes"]["s1"].get<std::string>().find(
                "0 tessera.io/gpu slots allocatable"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(preemptor_->RunPending(), 0) << "no node for preemption: nothing queued";
}

TEST_F(PreemptorTest, PreemptVerbFreesSlotsToo) {
  state_->UpsertNode(ShortOfSlots("s1", "2"));
  Running("old", "s1", 0, 10, 1024, 0, 9000);
  Running("young", "s1", 0, 10, 1024, 0, 60);
  const json high = Pending("high", 10, 1024, 1000);
  EXPECT_EQ(PreemptVictims(high, "s1"), std::vector<std::string>{"uid-ns-young"});
}

TEST_F(PreemptorTest, PreemptVerbCountsTheSlotsOfPodsBeingBound) {
  ExtenderOptions eo;  // as deployed: Filter keeps its choice for Bind
  eo.logger = QuietLogger();
  eo.preemptor = preemptor_.get();
  eo.filter_returns_best = true;
  auto e = Extender::Create(*state_, binder_, eo);
  ASSERT_TRUE(e.ok());
  extender_ = std::move(e).value();
  state_->UpsertNode(ShortOfSlots("s1", "2"));
  Running("old", "s1", 0, 10, 1024, 0, 9000);
  // Filter chose s1 for another pod, not bound yet: its slot is taken.
  EXPECT_EQ(Passed(Pending("other", 10, 1024, 0), {"s1"}), std::vector<std::string>{"s1"});
  const json high = Pending("high", 10, 1024, 1000);
  EXPECT_EQ(PreemptVictims(high, "s1"), std::vector<std::string>{"uid-ns-old"})
      << "the slot of the pod being bound is not free";
}

}  // namespace
}  // namespace tessera::scheduler
