#include "scheduler/extender.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/codec.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BindBody;
using testing::BoundPodJson;
using testing::Container;
using testing::FakeBinder;
using testing::FilterBody;
using testing::GpuUuid;
using testing::NodeJson;
using testing::NodesFilterBody;
using testing::PodJson;

using testing::QuietLogger;

// n1: 2 x A100 40 GiB, free. n2: 1 x T4 15 GiB, 6 GiB / 60 % used.
// cpu1: no inventory.
class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::make_unique<ClusterState>(testing::QuietStateOptions());
    state_->UpsertNode(NodeJson("n1", 2, "A100", 40960));
    state_->UpsertNode(NodeJson("n2", 1, "T4", 15360));
    json cpu = NodeJson("cpu1", 0, "", 0);
    cpu["metadata"]["annotations"] = json::object();
    state_->UpsertNode(cpu);
    state_->UpsertPod(BoundPodJson(PodJson("ns", "busy", {{"main", 1, 6144, 60}}),
                                   {"n2", {{"main", {{0, GpuUuid("n2", 0), 6144, 600}}}}}));
    Make("tessera");
  }
  void Make(const std::string& policy, std::function<Status()> may_bind = nullptr) {
    ExtenderOptions o;
    o.policy = policy;
    o.logger = log_ ? log_ : QuietLogger();
    o.may_bind = std::move(may_bind);
    o.filter_returns_best = best_;
    o.now = [this] { return now_; };
    o.wall_now = [] { return std::chrono::system_clock::time_point(std::chrono::seconds(1714566896)); };
    o.after_pick_for_test = after_pick_;
    o.isolation_none_namespaces = unenforced_;
    auto e = Extender::Create(*state_, binder_, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    extender_ = std::move(e).value();
  }
  json Filter(const std::string& body, int status = 200) {
    HttpReply r = extender_->Filter(body);
    EXPECT_EQ(r.status, status) << r.body;
    return r.status == 200 ? json::parse(r.body) : json();
  }
  std::map<std::string, int64_t> Prioritize(const std::string& body) {
    HttpReply r = extender_->Prioritize(body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, int64_t> out;
    for (const auto& hp : json::parse(r.body)) out[hp["Host"]] = hp["Score"];
    return out;
  }
  json Bind(const std::string& body) {
    HttpReply r = extender_->Bind(body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  const std::vector<std::string> all_ = {"n1", "n2", "cpu1"};
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<ClusterState> state_;
  FakeBinder binder_;
  std::unique_ptr<Extender> extender_;
  Clock::time_point now_{};
  // Given to the extender by Make: runs between Bind's pick and its booking.
  std::function<void(const std::string&, const core::Assignment&)> after_pick_;
  bool best_ = false;  // ExtenderOptions::filter_returns_best for Make
  std::vector<std::string> unenforced_;  // ExtenderOptions::isolation_none_namespaces for Make
};

TEST_F(ExtenderTest, FilterKeepsFittingNodesAndExplainsTheRest) {
  json r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 12288, 30}}), all_));
  EXPECT_EQ(r["NodeNames"], json({"n1"}));
  EXPECT_TRUE(r["Nodes"].is_null());
  EXPECT_EQ(r["Error"], "");
  EXPECT_EQ(r["FailedNodes"].size(), 1u);  // n2 would fit when empty
  ASSERT_EQ(r["FailedAndUnresolvableNodes"].size(), 1u);
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["cpu1"],
            "node cpu1: not a GPU node (no tessera.io/gpu-inventory annotation)");

  // Fits n2's T4 only when empty: a preemption could help there.
  r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 10240, 30}}), all_));
  EXPECT_EQ(r["NodeNames"], json({"n1"}));
  EXPECT_EQ(r["FailedNodes"]["n2"],
            "node n2: no GPU with 10240 MiB and 30 percent free; largest free share is 9216 MiB and 40 percent on GPU 0 (T4)");
  r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 50}}), all_));
  EXPECT_EQ(r["FailedNodes"]["n2"],
            "node n2: no GPU with 1024 MiB and 50 percent free; largest free share is 9216 MiB and 40 percent on GPU 0 (T4)");
  // Larger than the T4 itself: unresolvable there.
  r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 20480, 10}}), all_));
  EXPECT_NE(r["FailedAndUnresolvableNodes"]["n2"].get<std::string>().find("its largest GPU has 15360 MiB"),
            std::string::npos)
      << r;
}

// kube-scheduler does not count tessera.io/gpu (ignoredByScheduler): the
// extender refuses a node whose kubelet has fewer slots allocatable than the
// pod needs beside its GPUs' sharers, as unresolvable (no eviction helps),
// and takes it again once the slots are there.
TEST_F(ExtenderTest, NodesWithoutAllocatableSlotsWaitForThem) {
  std::vector<core::GpuInfo> gpus(2);
  for (int i = 0; i < 2; ++i) {
    gpus[i] = {.index = i, .uuid = GpuUuid("s1", i), .model = "A100", .memory_mib = 40960, .sm_count = 108};
    gpus[i].max_sharers = 4;
  }
  json node = NodeJson("s1", gpus);
  node["status"]["allocatable"]["tessera.io/gpu"] = "0";  // the agent has not registered yet
  state_->UpsertNode(node);
  const json one = PodJson("ns", "p", {{"main", 1, 1024, 10}});
  json r = Filter(FilterBody(one, {"s1", "n1"}));
  EXPECT_EQ(r["NodeNames"], json({"n1"}));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["s1"],
            "node s1: its kubelet reports 0 tessera.io/gpu slots allocatable, 0 of them taken, and the pod asks for 1 "
            "(its inventory lists 8: the node agent is starting or restarting, or some GPUs' slots are unhealthy)")
      << r;

  node["status"]["allocatable"]["tessera.io/gpu"] = "8";
  state_->UpsertNode(node);
  EXPECT_EQ(Filter(FilterBody(one, {"s1"}))["NodeNames"], json({"s1"}));

  // Some allocatable again (a GPU's slots unhealthy), one of them held.
  state_->UpsertPod(BoundPodJson(PodJson("ns", "held", {{"main", 1, 1024, 10}}),
                                 {"s1", {{"main", {{0, GpuUuid("s1", 0), 1024, 100}}}}}));
  node["status"]["allocatable"]["tessera.io/gpu"] = "2";
  state_->UpsertNode(node);
  EXPECT_EQ(Filter(FilterBody(one, {"s1"}))["NodeNames"], json({"s1"}));
  // Evicting the holder would free its slot: left to preemption (FailedNodes),
  // where a pod asking more than the kubelet has is not (above).
  r = Filter(FilterBody(PodJson("ns", "two", {{"main", 2, 0, 100}}), {"s1"}));
  EXPECT_EQ(r["NodeNames"], json::array());
  EXPECT_NE(r["FailedNodes"]["s1"].get<std::string>().find(
                "reports 2 tessera.io/gpu slots allocatable, 1 of them taken, and the pod asks for 2"),
            std::string::npos)
      << r;
  r = Filter(FilterBody(PodJson("ns", "pair", {{"a", 1, 1024, 10}, {"b", 1, 1024, 10}}), {"s1"}));
  EXPECT_EQ(r["NodeNames"], json::array()) << "two containers, a slot each";

  // GPUs whose inventory lists no slots: what is allocatable is the limit.
  json open = NodeJson("u1", 1, "A100", 40960);
  open["status"]["allocatable"]["tessera.io/gpu"] = "1";
  state_->UpsertNode(open);
  EXPECT_EQ(Filter(FilterBody(one, {"u1"}))["NodeNames"], json({"u1"}));
  state_->UpsertPod(BoundPodJson(PodJson("ns", "first", {{"main", 1, 1024, 10}}),
                                 {"u1", {{"main", {{0, GpuUuid("u1", 0), 1024, 100}}}}}));
  r = Filter(FilterBody(one, {"u1"}));
  EXPECT_EQ(r["FailedNodes"]["u1"],
            "node u1: its kubelet reports 1 tessera.io/gpu slots allocatable, 1 of them taken, and the pod asks for 1")
      << r;
}

// kube-scheduler filters the next pod while the last one binds. Filter
// counts the slots its own choices for pods being bound will take (with
// filter_returns_best), but not binds it did not choose for, so Bind counts
// them again on the node version it books against: a pod one slot too many
// is refused, for kube-scheduler to try again, instead of being bound where
// its kubelet would fail it. With or without Filter's choice kept for Bind,
// and for a pod known from the watch or from Filter.
TEST_F(ExtenderTest, BindCountsTheSlotsAgain) {
  for (const bool best : {false, true}) {
    SCOPED_TRACE(best ? "filter returns its choice" : "bind chooses");
    best_ = best;
    Make("tessera");
    const std::string name = best ? "s2" : "s1";
    std::vector<core::GpuInfo> gpus(1);
    gpus[0] = {.index = 0, .uuid = GpuUuid(name, 0), .model = "A100", .memory_mib = 40960, .sm_count = 108};
    gpus[0].max_sharers = 4;
    json node = NodeJson(name, gpus);
    node["status"]["allocatable"]["tessera.io/gpu"] = "1";  // three of its slots unhealthy
    state_->UpsertNode(node);
    const std::string a = "a-" + name, b = "b-" + name, c = "c-" + name;
    const std::string why = " (its inventory lists 4: the node agent is starting or restarting, or some GPUs' "
                            "slots are unhealthy)";
    EXPECT_EQ(Filter(FilterBody(PodJson("ns", a, {{"main", 1, 1024, 10}}), {name}))["NodeNames"], json({name}));
    json r = Filter(FilterBody(PodJson("ns", b, {{"main", 1, 1024, 10}}), {name}));
    if (best) {  // a's choice takes the slot
      EXPECT_EQ(r["FailedNodes"][name],
                "node " + name + ": its kubelet reports 1 tessera.io/gpu slots allocatable, 1 of them taken (1 by "
                "pods being bound or preempting), and the pod asks for 1" + why)
          << r;
    } else {
      EXPECT_EQ(r["NodeNames"], json({name}));
    }
    state_->UpsertPod(PodJson("ns", c, {{"main", 1, 1024, 10}}));  // from the watch
    EXPECT_EQ(Bind(BindBody("ns", a, "uid-ns-" + a, name))["Error"], "");
    const std::string taken =
        "node " + name + ": its kubelet reports 1 tessera.io/gpu slots allocatable, 1 of them taken, and the pod "
        "asks for 1" + why;
    EXPECT_EQ(Bind(BindBody("ns", b, "uid-ns-" + b, name))["Error"], "pod ns/" + b + " no longer fits: " + taken);
    EXPECT_EQ(Bind(BindBody("ns", c, "uid-ns-" + c, name))["Error"], "pod ns/" + c + " no longer fits: " + taken);
    EXPECT_EQ(state_->Read([&](const ClusterView& v) { return v.ledger().FindNode(name)->gpus[0].sharers; }), 1);

    node["status"]["allocatable"]["tessera.io/gpu"] = "4";  // healthy again
    state_->UpsertNode(node);
    EXPECT_EQ(Bind(BindBody("ns", b, "uid-ns-" + b, name))["Error"], "");
    EXPECT_EQ(Bind(BindBody("ns", c, "uid-ns-" + c, name))["Error"], "");
  }
  EXPECT_EQ(binder_.calls().size(), 6u);
}

// The pod watch's view of a pending pod stands in for the filter call's
// copy at the same resourceVersion; another version, or a pod the watch saw
// bound, is decoded from the call. The answers do not change.
TEST_F(ExtenderTest, FilterTakesThePodTheWatchDecoded) {
  json pod = PodJson("ns", "p", {{"main", 1, 1024, 10}});
  pod["metadata"]["resourceVersion"] = "7";
  extender_->RememberPendingPod(state_->UpsertPod(pod));
  const json first = Filter(FilterBody(pod, all_));
  EXPECT_EQ(extender_->pods_reused(), 1u);
  pod["metadata"]["resourceVersion"] = "8";
  EXPECT_EQ(Filter(FilterBody(pod, all_)), first);
  EXPECT_EQ(extender_->pods_reused(), 1u);
  EXPECT_EQ(Filter(FilterBody(pod, all_)), first);  // remembered by the call before
  EXPECT_EQ(extender_->pods_reused(), 2u);

  json bound = BoundPodJson(PodJson("ns", "q", {{"main", 1, 1024, 10}}), {"n1", {{"main", {{1, GpuUuid("n1", 1), 1024, 100}}}}});
  bound["metadata"]["resourceVersion"] = "9";
  extender_->RememberPendingPod(state_->UpsertPod(bound));
  extender_->RememberPendingPod(nullptr);  // a pod the watch could not decode
  (void)Filter(FilterBody(bound, all_));
  EXPECT_EQ(extender_->pods_reused(), 2u);
}

TEST_F(ExtenderTest, VerdictsAreNotSharedAcrossIsolationModes) {
  // A hook pod and an MPS pod of one shape: the first fits n1, the second
  // must not reuse that verdict (no GPU of n1 runs MPS).
  const json hook = PodJson("ns", "hook", {{"main", 1, 1024, 10}});
  EXPECT_EQ(Filter(FilterBody(hook, {"n1"}))["NodeNames"], json({"n1"}));
  const json mps = PodJson("ns", "mps", {{"main", 1, 1024, 10}}, {{"tessera.io/isolation", "mps"}});
  const json r = Filter(FilterBody(mps, {"n1"}));
  EXPECT_TRUE(r["NodeNames"].empty()) << r;
  const json& failed = r["FailedAndUnresolvableNodes"].empty() ? r["FailedNodes"] : r["FailedAndUnresolvableNodes"];
  EXPECT_NE(failed.dump().find("MPS"), std::string::npos) << r;
}

// tessera.io/isolation: none only where the operator allows it: elsewhere
// no node, saying why; allowed, it is placed like any share.
TEST_F(ExtenderTest, UnenforcedPodsOnlyInTheNamespacesTheConfigurationNames) {
  const json pod = PodJson("team-a", "raw", {{"main", 1, 1024, 10}}, {{"tessera.io/isolation", "none"}});
  json r = Filter(FilterBody(pod, all_));
  EXPECT_TRUE(r["NodeNames"].empty()) << r;
  ASSERT_EQ(r["FailedAndUnresolvableNodes"].size(), 3u) << r;
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n1"],
            "tessera.io/isolation: none (a share placed but not enforced) is not allowed in namespace team-a: "
            "tessera-scheduler's isolationNoneNamespaces names none; ask your cluster operator, or remove the "
            "annotation to have the share enforced");
  unenforced_ = {"team-b"};
  Make("tessera");
  r = Filter(FilterBody(pod, all_));
  EXPECT_NE(r["FailedAndUnresolvableNodes"]["n1"].get<std::string>().find("isolationNoneNamespaces does not name it"),
            std::string::npos)
      << r;
  for (const std::vector<std::string>& allowed : {std::vector<std::string>{"team-b", "team-a"}, {"*"}}) {
    unenforced_ = allowed;
    Make("tessera");
    r = Filter(FilterBody(pod, all_));
    EXPECT_EQ(r["NodeNames"], json({"n1", "n2"})) << r;
  }
  // Other pods are not concerned.
  unenforced_.clear();
  Make("tessera");
  EXPECT_EQ(Filter(FilterBody(PodJson("team-a", "hooked", {{"main", 1, 1024, 10}}), all_))["NodeNames"],
            json({"n1", "n2"}));
}

TEST_F(ExtenderTest, ModelsAreHonoured) {
  json r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}, {{"tessera.io/gpu-model", "A100|H100"}}),
                             {"n1", "n2"}));
  EXPECT_EQ(r["NodeNames"], json({"n1"}));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n2"], "node n2: GPU model T4 not allowed (wants A100|H100)");
  r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}, {{"tessera.io/gpu-model-avoid", "A100"}}),
                        {"n1", "n2"}));
  EXPECT_EQ(r["NodeNames"], json({"n2"}));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n1"],
            "node n1: GPU model A100 avoided (tessera.io/gpu-model-avoid: A100)");
}

TEST_F(ExtenderTest, ProblemsNoNodeCanSolveAreUnresolvableEverywhere) {
  json r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}, {{"tessera.io/gpu-model", "V100"}}), all_));
  EXPECT_EQ(r["NodeNames"], json::array());
  ASSERT_EQ(r["FailedAndUnresolvableNodes"].size(), 3u);
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n1"],
            "GPU model V100 (tessera.io/gpu-model) is not on any node in the cluster; its GPU models are A100, T4");
  r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 100000, 10}}), all_));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n2"],
            "container \"main\": asks for 100000 MiB per GPU, more than any GPU in the cluster has (largest: 40960 MiB)");
}

TEST_F(ExtenderTest, MalformedPodsAreUnschedulableWithTheirMessage) {
  for (const auto& [pod, fragment] : std::vector<std::pair<json, std::string>>{
           {PodJson("ns", "p", {{"worker", 1, 1024, 150}}), "container \"worker\": tessera.io/gpu-core: 150 is over 100"},
           {PodJson("ns", "p", {{"worker", 2, 1024, 30}}), "whole GPUs"},
           {PodJson("ns", "p", {{"worker", 1, 1024, 10}}, {{"tessera.io/priority", "asap"}}), "asap"}}) {
    json r = Filter(FilterBody(pod, all_));
    EXPECT_EQ(r["NodeNames"], json::array());
    ASSERT_EQ(r["FailedAndUnresolvableNodes"].size(), 3u);
    for (const auto& [node, reason] : r["FailedAndUnresolvableNodes"].items())
      EXPECT_NE(reason.get<std::string>().find(fragment), std::string::npos) << reason;
    // Prioritize gives them nothing; Bind refuses them.
    for (const auto& [host, score] : Prioritize(FilterBody(pod, all_))) EXPECT_EQ(score, 0) << host;
    EXPECT_NE(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"].get<std::string>().find(fragment),
              std::string::npos);
  }
}

TEST_F(ExtenderTest, BadBodiesAre400) {
  const json pod = PodJson("ns", "p", {{"main", 1, 1024, 10}});
  for (const std::string& body : std::vector<std::string>{
           "", "not json", "[]", "{}", R"({"Pod":1,"NodeNames":["n1"]})", R"({"Pod":null,"NodeNames":["n1"]})",
           json{{"Pod", pod}}.dump(), json{{"Pod", pod}, {"NodeNames", "n1"}}.dump(),
           json{{"Pod", pod}, {"NodeNames", {1}}}.dump(), json{{"Pod", pod}, {"Nodes", {{"items", {json::object()}}}}}.dump(),
           json{{"Pod", pod}, {"Nodes", {{"items", 3}}}}.dump(), json{{"Pod", pod}, {"Nodes", 3}}.dump(),
           json{{"Pod", {{"metadata", json::object()}}}, {"NodeNames", {"n1"}}}.dump(),
           std::string(300, '[') + std::string(300, ']')}) {
    for (auto verb : {&Extender::Filter, &Extender::Prioritize}) {
      HttpReply r = ((*extender_).*verb)(body);
      EXPECT_EQ(r.status, 400) << body;
      EXPECT_FALSE(r.body.empty());
    }
  }
  for (const std::string& body : std::vector<std::string>{
           "", "{", "[]", "{}", R"({"PodName":"p","PodNamespace":"ns","Node":3})",
           R"({"PodName":"p","PodNamespace":"ns"})", R"({"PodName":"","PodNamespace":"ns","Node":"n1"})"}) {
    EXPECT_EQ(extender_->Bind(body).status, 400) << body;
  }
}

TEST_F(ExtenderTest, NodesFormIsAnsweredInKind) {
  const std::vector<json> nodes = {NodeJson("n1", 2, "A100", 40960), NodeJson("n2", 1, "T4", 15360)};
  json r = Filter(NodesFilterBody(PodJson("ns", "p", {{"main", 1, 12288, 10}}), nodes));
  EXPECT_TRUE(r["NodeNames"].is_null());
  ASSERT_EQ(r["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(r["Nodes"]["items"][0], nodes[0]);
  EXPECT_EQ(r["FailedNodes"].size() + r["FailedAndUnresolvableNodes"].size(), 1u);
  auto scores = Prioritize(NodesFilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), nodes));
  EXPECT_EQ(scores.size(), 2u);
  // An empty NodeList is no error.
  r = Filter(json{{"Pod", PodJson("ns", "p", {{"main", 1, 1024, 10}})}, {"Nodes", {{"items", nullptr}}}}.dump());
  EXPECT_EQ(r["Nodes"]["items"], json::array());
}

TEST_F(ExtenderTest, UnknownNodesAreResolvableFailures) {
  json r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), {"ghost"}));
  EXPECT_EQ(r["FailedNodes"]["ghost"], "node ghost: not seen by tessera-scheduler's node watch yet");
}

TEST_F(ExtenderTest, LargeRequestsGetGroupableReasons) {
  std::vector<std::string> names;
  for (int i = 0; i < 70; ++i) {
    names.push_back("t" + std::to_string(i));
    state_->UpsertNode(NodeJson(names.back(), 1, "T4", 15360));
    state_->UpsertPod(BoundPodJson(PodJson("ns", "hog" + std::to_string(i), {{"main", 1, 15360, 100}}),
                                   {names.back(), {{"main", {{0, GpuUuid(names.back(), 0), 15360, 1000}}}}}));
  }
  json r = Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), names));
  std::set<std::string> reasons;
  for (const auto& [node, reason] : r["FailedNodes"].items()) reasons.insert(reason.get<std::string>());
  EXPECT_EQ(reasons, std::set<std::string>{"no GPU with 1024 MiB and 10 percent free"});
}

TEST_F(ExtenderTest, PrioritizeScoresFeasibleNodesFromZeroToTen) {
  for (int i = 3; i < 8; ++i) state_->UpsertNode(NodeJson("n" + std::to_string(i), 2, "A100", 40960));
  // n3 already has a small pod: packing policies prefer it.
  state_->UpsertPod(BoundPodJson(PodJson("ns", "small", {{"main", 1, 2048, 10}}),
                                 {"n3", {{"main", {{0, GpuUuid("n3", 0), 2048, 100}}}}}));
  const std::vector<std::string> names = {"n1", "n2", "cpu1", "n3", "n4", "n5", "n6", "n7", "ghost"};
  for (const std::string policy : {"tessera", "fgd", "bestfit", "packing", "dotprod", "clustering", "random"}) {
    Make(policy);
    auto scores = Prioritize(FilterBody(PodJson("ns", "p", {{"main", 1, 12288, 30}}), names));
    ASSERT_EQ(scores.size(), names.size()) << policy;
    int tens = 0;
    for (const auto& [host, score] : scores) {
      EXPECT_GE(score, 0) << policy;
      EXPECT_LE(score, 10) << policy;
      tens += score == 10;
    }
    for (const char* infeasible : {"n2", "cpu1", "ghost"}) EXPECT_EQ(scores[infeasible], 0) << policy << infeasible;
    if (policy != "random") {
      EXPECT_EQ(tens, 1) << policy;
    }
    if (policy == "bestfit" || policy == "packing") {
      EXPECT_EQ(scores["n3"], 10) << policy;
    }
  }
}

TEST_F(ExtenderTest, BindBooksTheShareAndAnnotatesThePod) {
  std::ostringstream logs;
  log_ = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_st>(logs));
  Make("fgd");
  const json pod = PodJson("ns", "p", {{"main", 1, 8192, 50}});
  ASSERT_EQ(Filter(FilterBody(pod, all_))["NodeNames"], json({"n1"}));
  json r = Bind(BindBody("ns", "p", "uid-ns-p", "n1"));
  EXPECT_EQ(r["Error"], "");
  ASSERT_EQ(binder_.calls().size(), 1u);
  const auto call = binder_.calls()[0];
  EXPECT_EQ(call.pod_namespace, "ns");
  EXPECT_EQ(call.pod_name, "p");
  EXPECT_EQ(call.pod_uid, "uid-ns-p");
  EXPECT_EQ(call.node, "n1");
  EXPECT_EQ(call.annotations.at("tessera.io/assigned-at"), "2024-05-01T12:34:56Z");
  auto a = core::DecodeAssignment(call.annotations.at("tessera.io/assignment"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->node, "n1");
  ASSERT_EQ(a->containers.size(), 1u);
  ASSERT_EQ(a->containers[0].gpus.size(), 1u);
  EXPECT_EQ(a->containers[0].gpus[0].mem_mib, 8192);
  EXPECT_EQ(a->containers[0].gpus[0].core_milli, 500);
  EXPECT_EQ(a->containers[0].gpus[0].uuid, GpuUuid("n1", a->containers[0].gpus[0].index));
  EXPECT_EQ(state_->Summary().pods_assumed, 1);
  EXPECT_NE(logs.str().find("bind ns/p -> node n1 GPUs [" + std::to_string(a->containers[0].gpus[0].index) +
                            ":8192MiB/50%] policy=fgd"),
            std::string::npos)
      << logs.str();
  // The watch then shows it bound: confirmed.
  state_->UpsertPod(BoundPodJson(pod, *a));
  EXPECT_EQ(state_->Summary().pods_assumed, 0);
  EXPECT_EQ(state_->Summary().pods_held, 2);
  // A second bind of the same pod is refused.
  EXPECT_NE(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"].get<std::string>().find("already"),
            std::string::npos);
}

TEST_F(ExtenderTest, FailedBindReleasesTheShare) {
  Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 8192, 30}}), all_));
  binder_.FailWith(Status(StatusCode::kUnavailable, "apiserver unreachable"));
  json r = Bind(BindBody("ns", "p", "uid-ns-p", "n1"));
  EXPECT_EQ(r["Error"], "binding pod ns/p to node n1: apiserver unreachable");
  EXPECT_EQ(state_->Summary().pods_held, 1);  // only "busy"
  EXPECT_EQ(state_->Summary().pods_assumed, 0);
  binder_.FailWith(Status());
  EXPECT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"], "");  // the retry works
}

TEST_F(ExtenderTest, BindFindsPodsFromTheWatchAndRefusesUnknownOnes) {
  state_->UpsertPod(PodJson("ns", "watched", {{"main", 1, 1024, 10}}));
  EXPECT_EQ(Bind(BindBody("ns", "watched", "uid-ns-watched", "n2"))["Error"], "");
  json r = Bind(BindBody("ns", "stranger", "uid-x", "n1"));
  EXPECT_NE(r["Error"].get<std::string>().find("unknown"), std::string::npos) << r;
  // Filter saw the pod under another uid: not the same pod.
  Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), all_));
  EXPECT_NE(Bind(BindBody("ns", "p", "uid-other", "n1"))["Error"].get<std::string>().find("unknown"),
            std::string::npos);
  EXPECT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "cpu1"))["Error"],
            "node cpu1: not a GPU node (no tessera.io/gpu-inventory annotation)");
}

TEST_F(ExtenderTest, APodIsDecodedOncePerUidAndVersionAcrossTheVerbs) {
  json pod = PodJson("ns", "p", {{"main", 1, 8192, 50}});
  pod["metadata"]["resourceVersion"] = "7";
  ASSERT_EQ(Filter(FilterBody(pod, all_))["NodeNames"], json({"n1"}));
  // The same uid and version is the same object in Kubernetes: what was
  // decoded is reused, so a (never sent) change under the same version is
  // not even read.
  json same_version = pod;
  same_version["spec"]["containers"][0]["resources"]["limits"]["tessera.io/gpu-core"] = "150";
  EXPECT_EQ(Filter(FilterBody(same_version, all_))["NodeNames"], json({"n1"}));
  EXPECT_EQ(Prioritize(FilterBody(same_version, all_)).at("n1"), 10);
  // A new version is decoded again.
  same_version["metadata"]["resourceVersion"] = "8";
  EXPECT_EQ(Filter(FilterBody(same_version, all_))["FailedAndUnresolvableNodes"].size(), 3u);
  // Bind takes the request of the newest version seen (the watch has not shown the pod).
  EXPECT_NE(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"].get<std::string>().find("150"), std::string::npos);
  pod["metadata"]["resourceVersion"] = "9";
  Filter(FilterBody(pod, all_));
  EXPECT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"], "");
}

TEST_F(ExtenderTest, BindOfAPodThatNoLongerFitsIsAnError) {
  Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 8192, 50}}), {"n2"}));
  json r = Bind(BindBody("ns", "p", "uid-ns-p", "n2"));
  EXPECT_NE(r["Error"].get<std::string>().find("no longer fits: node n2: no GPU with 8192 MiB and 50 percent free"),
            std::string::npos)
      << r;
  EXPECT_TRUE(binder_.calls().empty());
}

TEST_F(ExtenderTest, BindGateRefusesOnStandbyReplicas) {
  Make("tessera", [] { return FailedPrecondition("this replica is not the leader"); });
  Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), all_));
  EXPECT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"], "bind refused: this replica is not the leader");
  EXPECT_TRUE(binder_.calls().empty());
}

TEST_F(ExtenderTest, AssumptionsExpireWhenTheWatchNeverConfirms) {
  Filter(FilterBody(PodJson("ns", "p", {{"main", 1, 1024, 10}}), all_));
  EXPECT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"], "");
  EXPECT_EQ(state_->Summary().pods_assumed, 1);
  now_ += std::chrono::seconds(61);
  Filter(FilterBody(PodJson("ns", "q", {{"main", 1, 1024, 10}}), all_));
  EXPECT_EQ(Bind(BindBody("ns", "q", "uid-ns-q", "n1"))["Error"], "");  // expiry runs on bind
  EXPECT_EQ(state_->Summary().expired_total, 1);
  EXPECT_EQ(state_->Summary().pods_assumed, 1);
}

TEST_F(ExtenderTest, MultiContainerAndMultiGpuPodsGetConsistentAssignments) {
  state_->UpsertNode(NodeJson("big", 4, "H100", 81559));
  const json pod = PodJson("ns", "trainer", {{"trainer", 2, 0, 0}, {"sidecar", 1, 4096, 20}, {"log", 0, 0, 0}});
  json r = Filter(FilterBody(pod, {"n1", "big"}));
  EXPECT_EQ(r["NodeNames"], json({"big"}));
  EXPECT_EQ(r["FailedAndUnresolvableNodes"]["n1"],
            "node n1: its containers fit one by one but not together (trainer 2x a whole GPU, sidecar 4096 MiB and "
            "20 percent)");
  ASSERT_EQ(Bind(BindBody("ns", "trainer", "uid-ns-trainer", "big"))["Error"], "");
  auto a = core::DecodeAssignment(binder_.calls().back().annotations.at("tessera.io/assignment"));
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->containers.size(), 3u);
  EXPECT_EQ(a->containers[0].name, "trainer");
  EXPECT_EQ(a->containers[1].name, "sidecar");
  EXPECT_EQ(a->containers[2].name, "log");
  EXPECT_TRUE(a->containers[2].gpus.empty());
  ASSERT_EQ(a->containers[0].gpus.size(), 2u);
  std::set<int> whole;
  for (const auto& g : a->containers[0].gpus) {
    EXPECT_EQ(g.core_milli, 1000);
    whole.insert(g.index);
  }
  EXPECT_EQ(whole.size(), 2u);
  ASSERT_EQ(a->containers[1].gpus.size(), 1u);
  EXPECT_FALSE(whole.contains(a->containers[1].gpus[0].index));
  EXPECT_EQ(a->containers[1].gpus[0].core_milli, 200);
  // The same pod shape again: 2 GPUs are left, one shared: no second trainer.
  const json again = PodJson("ns", "trainer2", {{"trainer", 2, 0, 0}, {"sidecar", 1, 4096, 20}});
  r = Filter(FilterBody(again, {"big"}));
  EXPECT_EQ(r["NodeNames"], json::array()) << r;
  EXPECT_NE(r["FailedNodes"]["big"].get<std::string>().find("needs 2 whole GPUs, 1 of 4 fully free"),
            std::string::npos)
      << r;
}

// Neither the GPU's time nor the node's device-plugin slots: whichever runs
// out first stops the binds, however they interleave.
TEST_F(ExtenderTest, ConcurrentBindsNeverOvercommit) {
  Make("tessera");
  constexpr int kPods = 24;
  struct Case {
    std::string node, slots;
    int fit;
  };
  for (const Case& c : {Case{"one", "16", 10}, Case{"two", "6", 6}}) {  // 10 % each: 10 fit on the GPU
    const std::string& node = c.node;
    SCOPED_TRACE(node);
    json object = NodeJson(node, 1, "A100", 40960);  // its GPU lists no slots: the kubelet's count is the limit
    object["status"]["allocatable"]["tessera.io/gpu"] = c.slots;
    state_->UpsertNode(object);
    for (int i = 0; i < kPods; ++i)
      state_->UpsertPod(PodJson("ns", node + std::to_string(i), {{"main", 1, 1024, 10}}));
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = t; i < kPods; i += 4) {
          const std::string name = node + std::to_string(i);
          HttpReply r = extender_->Bind(BindBody("ns", name, "uid-ns-" + name, node));
          if (json::parse(r.body)["Error"] == "") ++ok;
          extender_->Filter(FilterBody(PodJson("ns", name, {{"main", 1, 1024, 10}}), {node, "n1"}));
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(ok.load(), c.fit);
    for (const auto& g : state_->Snapshot().gpu_use) EXPECT_LE(g.core_used_milli, 1000);
  }
}

// The GPU Bind chose is taken before Bind books it (the pod watch shows a
// pod another scheduler placed there): the booking is refused as stale, and
// Bind chooses again on the node as it is now: the other GPU.
TEST_F(ExtenderTest, BindChoosesAgainWhenItsGpuIsTakenBeforeTheBooking) {
  int picks = 0;
  int taken = -1;
  after_pick_ = [&](const std::string& key, const core::Assignment& chosen) {
    ++picks;
    if (key != "ns/p" || taken >= 0) return;
    taken = chosen.containers[0].gpus[0].index;
    state_->UpsertPod(BoundPodJson(PodJson("other", "rival", {{"main", 1, 30720, 50}}),
                                   {"n1", {{"main", {{taken, GpuUuid("n1", taken), 30720, 500}}}}}));
  };
  Make("tessera");
  state_->UpsertPod(PodJson("ns", "p", {{"main", 1, 20480, 50}}));
  EXPECT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "n1"))["Error"], "");
  EXPECT_EQ(picks, 2);
  ASSERT_EQ(binder_.calls().size(), 1u);
  auto a = core::DecodeAssignment(binder_.calls()[0].annotations.at("tessera.io/assignment"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_GE(taken, 0);
  EXPECT_EQ(a->containers[0].gpus[0].index, 1 - taken);
  const StateSummary s = state_->Snapshot();
  for (const auto& g : s.gpu_use) {
    if (g.node != "n1") continue;
    EXPECT_EQ(g.mem_used_mib, g.index == taken ? 30720 : 20480) << g.index;
  }
  EXPECT_EQ(s.pods_assumed, 1);
}

// A node that changes under every pick, or fills up under it, fails the bind
// with a message that says so; nothing is booked or posted.
TEST_F(ExtenderTest, BindFailsClearlyWhenItsNodeKeepsChangingOrFillsUp) {
  int picks = 0;
  after_pick_ = [&](const std::string&, const core::Assignment&) {  // a small pod lands on n1 every time
    const std::string name = "churn" + std::to_string(picks++);
    state_->UpsertPod(BoundPodJson(PodJson("other", name, {{"main", 1, 1024, 1}}),
                                   {"n1", {{"main", {{0, GpuUuid("n1", 0), 1024, 10}}}}}));
  };
  Make("tessera");
  state_->UpsertPod(PodJson("ns", "p", {{"main", 1, 4096, 10}}));
  HttpReply r = extender_->Bind(BindBody("ns", "p", "uid-ns-p", "n1"));
  const std::string error = json::parse(r.body)["Error"];
  EXPECT_EQ(r.decision, Decision::kConflict);
  EXPECT_NE(error.find("pod ns/p: node n1 changed between the choice of its GPUs and their booking 3 times"),
            std::string::npos)
      << error;
  EXPECT_EQ(picks, 3);
  EXPECT_TRUE(binder_.calls().empty());
  EXPECT_EQ(state_->Summary().pods_assumed, 0);

  // Here the room on n3 is taken meanwhile: the second pick finds none.
  state_->UpsertNode(NodeJson("n3", 1, "T4", 15360));
  picks = 0;
  after_pick_ = [&](const std::string&, const core::Assignment&) {
    if (picks++ > 0) return;
    state_->UpsertPod(BoundPodJson(PodJson("other", "filler", {{"main", 1, 12288, 95}}),
                                   {"n3", {{"main", {{0, GpuUuid("n3", 0), 12288, 950}}}}}));
  };
  Make("tessera");
  r = extender_->Bind(BindBody("ns", "p", "uid-ns-p", "n3"));
  EXPECT_EQ(r.decision, Decision::kConflict);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("pod ns/p no longer fits: node n3"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(picks, 1);
  EXPECT_TRUE(binder_.calls().empty());
  EXPECT_EQ(state_->Summary().pods_assumed, 0);
}

// 8 threads bind 50 pods each to one small node while the pod watch books
// and releases other pods there: the ledger never holds more than the node
// has, and holds exactly what the successful binds and the other pods hold.
TEST_F(ExtenderTest, ConcurrentBindsFromEightThreadsNeverOvercommitTheLedger) {
  // Memory bounds it: 2 x 15360 MiB hold 120 pods of 256 MiB (and 1 %).
  state_->UpsertNode(NodeJson("small", 2, "T4", 15360, /*cpu=*/"1000"));
  constexpr int kFit = 120;
  Make("tessera");
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  auto name_of = [](int t, int i) { return "b" + std::to_string(t) + "-" + std::to_string(i); };
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPerThread; ++i) state_->UpsertPod(PodJson("ns", name_of(t, i), {{"main", 1, 256, 1}}));
  std::atomic<int> ok{0};
  std::atomic<bool> stop{false};
  std::vector<std::string> unexpected;
  Mutex unexpected_mu;
  std::thread watch([&] {  // another scheduler's pods come and go on the node
    for (int round = 0; !stop.load(); ++round) {
      const int gpu = round % 2;
      const json pod = BoundPodJson(PodJson("other", "w" + std::to_string(round % 4), {{"main", 1, 512, 10}}),
                                    {"small", {{"main", {{gpu, GpuUuid("small", gpu), 512, 100}}}}});
      state_->UpsertPod(pod);
      state_->Read([&](const ClusterView& v) {  // never over-committed, even mid-way
        const core::NodeState* n = v.ledger().FindNode("small");
        for (size_t g = 0; g < n->gpus.size(); ++g) {
          EXPECT_LE(n->gpus[g].core_used_milli, 1000);
          EXPECT_LE(n->gpus[g].mem_used_mib, n->info.gpus[g].memory_mib);
        }
      });
      state_->DeletePod(pod);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string name = name_of(t, i);
        const HttpReply r = extender_->Bind(BindBody("ns", name, "uid-ns-" + name, "small"));
        const std::string error = json::parse(r.body)["Error"];
        if (error.empty()) {
          ++ok;
        } else if (error.find("no longer fits") == std::string::npos &&
                   error.find("changed between the choice of its GPUs") == std::string::npos) {
          MutexLock lock(unexpected_mu);
          unexpected.push_back(error);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  watch.join();
  EXPECT_TRUE(unexpected.empty()) << unexpected.front();
  EXPECT_GT(ok.load(), 0);
  EXPECT_LE(ok.load(), kFit);
  // The other scheduler's pods are gone: the node holds the binds only.
  const StateSummary s = state_->Snapshot();
  int64_t core = 0, mem = 0;
  for (const auto& g : s.gpu_use) {
    if (g.node != "small") continue;
    EXPECT_LE(g.core_used_milli, 1000);
    EXPECT_LE(g.mem_used_mib, g.mem_total_mib);
    core += g.core_used_milli;
    mem += g.mem_used_mib;
  }
  EXPECT_EQ(core, 10 * ok.load());
  EXPECT_EQ(mem, 256 * ok.load());
  EXPECT_EQ(static_cast<int>(binder_.calls().size()), ok.load());
  state_->Read([&](const ClusterView& v) {
    EXPECT_EQ(v.ledger().PodsOn("small").size(), static_cast<size_t>(ok.load()));
    EXPECT_EQ(v.ledger().FindNode("small")->pods, ok.load());
  });
}

TEST_F(ExtenderTest, InformerEventsRaceWithCallsSafely) {
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) names.push_back("r" + std::to_string(i));
  std::atomic<bool> stop{false};
  std::thread informer([&] {
    for (int round = 0; round < 200; ++round) {
      const std::string node = names[static_cast<size_t>(round % 6)];
      state_->UpsertNode(NodeJson(node, 1 + round % 3, round % 2 ? "A100" : "T4", 16384));
      const std::string pod = "bg" + std::to_string(round % 10);
      state_->UpsertPod(BoundPodJson(PodJson("ns", pod, {{"main", 1, 1024, 10}}),
                                     {node, {{"main", {{0, GpuUuid(node, 0), 1024, 100}}}}}));
      if (round % 3 == 0) state_->DeletePod(PodJson("ns", "bg" + std::to_string((round + 5) % 10), {}));
      if (round % 17 == 0) state_->DeleteNode(names[static_cast<size_t>((round + 3) % 6)]);
    }
    stop = true;
  });
  int calls = 0;
  while (!stop.load() || calls < 50) {
    const std::string name = "x" + std::to_string(calls++);
    const json pod = PodJson("ns", name, {{"main", 1, 2048, 20}});
    EXPECT_EQ(extender_->Filter(FilterBody(pod, names)).status, 200);
    EXPECT_EQ(extender_->Prioritize(FilterBody(pod, names)).status, 200);
    EXPECT_EQ(extender_->Bind(BindBody("ns", name, "uid-ns-" + name, names[static_cast<size_t>(calls % 6)])).status,
              200);
  }
  informer.join();
  for (const auto& g : state_->Snapshot().gpu_use) {
    EXPECT_LE(g.core_used_milli, 1000);
    EXPECT_LE(g.mem_used_mib, g.mem_total_mib);
  }
}

// ---- filter_returns_best ----

// The assignment the last bind posted.
core::Assignment LastBound(const FakeBinder& binder) {
  auto a = core::DecodeAssignment(binder.calls().back().annotations.at("tessera.io/assignment"));
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : core::Assignment{};
}

TEST_F(ExtenderTest, FilterReturnsBestAnswersOnlyThePolicysChoice) {
  for (int i = 3; i < 8; ++i) state_->UpsertNode(NodeJson("n" + std::to_string(i), 2, "A100", 40960));
  state_->UpsertPod(BoundPodJson(PodJson("ns", "small", {{"main", 1, 2048, 10}}),
                                 {"n5", {{"main", {{0, GpuUuid("n5", 0), 2048, 100}}}}}));
  const std::vector<std::string> names = {"n1", "n2", "cpu1", "n3", "n4", "n5", "n6", "n7", "ghost"};
  for (const std::string policy : {"tessera", "fgd", "bestfit", "packing", "dotprod", "clustering"}) {
    const json pod = PodJson("ns", "p", {{"main", 1, 12288, 30}});
    // What Prioritize ranks first...
    best_ = false;
    Make(policy);
    std::string top;
    for (const auto& [host, score] : Prioritize(FilterBody(pod, names)))
      if (score == 10) top = host;
    ASSERT_FALSE(top.empty()) << policy;
    // ...is the one node Filter answers; nodes that do not fit keep their reasons.
    best_ = true;
    Make(policy);
    const json r = Filter(FilterBody(pod, names));
    EXPECT_EQ(r["NodeNames"], json({top})) << policy;
    EXPECT_EQ(r["FailedNodes"].size(), 2u) << policy << r;  // n2 (full enough), ghost
    EXPECT_TRUE(r["FailedNodes"].contains("n2")) << r;
    EXPECT_EQ(r["FailedNodes"]["ghost"], "node ghost: not seen by tessera-scheduler's node watch yet");
    EXPECT_EQ(r["FailedAndUnresolvableNodes"]["cpu1"],
              "node cpu1: not a GPU node (no tessera.io/gpu-inventory annotation)");
    if (policy == "bestfit" || policy == "packing") {
      EXPECT_EQ(top, "n5") << policy;
    }
    // Bind books it as Filter chose.
    ASSERT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", top))["Error"], "") << policy;
    EXPECT_EQ(binder_.calls().back().node, top);
    ASSERT_TRUE(state_->ForgetAssumed("ns/p").ok());
  }
  // A policy that scores every node alike leaves the choice to kube-scheduler.
  Make("random");
  const json r = Filter(FilterBody(PodJson("ns", "r", {{"main", 1, 12288, 30}}), names));
  EXPECT_EQ(r["NodeNames"].size(), 6u) << r;  // n1, n3..n7
}

TEST_F(ExtenderTest, BindBooksTheGpusFilterChose) {
  // bestfit puts a share on the fitting GPU with the least free share.
  const json pod = PodJson("ns", "p", {{"main", 1, 8192, 30}});
  const core::Assignment neighbour{"a", {{"main", {{1, GpuUuid("a", 1), 10240, 200}}}}};
  for (const bool best : {false, true}) {
    SetUp();
    state_->UpsertNode(NodeJson("a", 2, "A100", 40960));
    best_ = best;
    Make("bestfit");
    // Filter sees "a" empty: GPU 0 (ties to the lowest index).
    EXPECT_EQ(Filter(FilterBody(pod, {"a"}))["NodeNames"], json({"a"}));
    // Another pod lands on GPU 1 before the bind: bestfit would now pick GPU 1.
    state_->UpsertPod(BoundPodJson(PodJson("ns", "q", {{"main", 1, 10240, 20}}), neighbour));
    ASSERT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "a"))["Error"], "");
    // Without the option Bind picks again; with it, Filter's choice, still free, is booked.
    EXPECT_EQ(LastBound(binder_).containers.at(0).gpus.at(0).index, best ? 0 : 1) << best;
    EXPECT_EQ(LastBound(binder_).containers.at(0).gpus.at(0).uuid, GpuUuid("a", best ? 0 : 1));
  }
}

TEST_F(ExtenderTest, BindChoosesAgainWhenFiltersChoiceIsStale) {
  std::ostringstream logs;
  log_ = std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::ostream_sink_mt>(logs));
  log_->set_level(spdlog::level::info);
  state_->UpsertNode(NodeJson("a", 2, "A100", 40960));
  best_ = true;
  Make("bestfit");
  const json pod = PodJson("ns", "p", {{"main", 1, 8192, 30}});
  EXPECT_EQ(Filter(FilterBody(pod, {"a"}))["NodeNames"], json({"a"}));  // GPU 0
  EXPECT_NE(logs.str().find("filter ns/p: 1/1 nodes fit (answered a, GPUs [0:8192MiB/30%])"), std::string::npos)
      << logs.str();
  // GPU 0 is taken whole before the bind (another scheduler, say): no room left there.
  state_->UpsertPod(BoundPodJson(PodJson("ns", "whole", {{"main", 1, 0, 100}}),
                                 {"a", {{"main", {{0, GpuUuid("a", 0), 40960, 1000}}}}}));
  ASSERT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "a"))["Error"], "");
  EXPECT_EQ(LastBound(binder_).containers.at(0).gpus.at(0).index, 1);
  EXPECT_NE(logs.str().find("(filter's choice was stale, chosen again)"), std::string::npos) << logs.str();
  // The choice went with the bind: a later bind of the pod does not reuse it.
  ASSERT_TRUE(state_->ForgetAssumed("ns/p").ok());
  ASSERT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "a"))["Error"], "");
  EXPECT_NE(logs.str().rfind("(chosen in bind)"), std::string::npos) << logs.str();

  // A choice for another node than kube-scheduler binds to, or for another
  // pod of the same name, is not used either.
  ASSERT_TRUE(state_->ForgetAssumed("ns/p").ok());
  state_->UpsertNode(NodeJson("b", 1, "A100", 40960));
  EXPECT_EQ(Filter(FilterBody(pod, {"a"}))["NodeNames"], json({"a"}));
  ASSERT_EQ(Bind(BindBody("ns", "p", "uid-ns-p", "b"))["Error"], "");
  EXPECT_EQ(binder_.calls().back().node, "b");
  EXPECT_EQ(LastBound(binder_).node, "b");
}

TEST_F(ExtenderTest, ChoicesNotBoundYetHoldTheirGpusForOtherFilters) {
  // Two one-GPU nodes; each pod needs 60 % of a GPU, so one fits per node.
  state_->UpsertNode(NodeJson("a", 1, "A100", 40960));
  state_->UpsertNode(NodeJson("b", 1, "A100", 40960));
  best_ = true;
  Make("bestfit");
  auto pod = [](const std::string& name) { return PodJson("ns", name, {{"main", 1, 8192, 60}}); };
  EXPECT_EQ(Filter(FilterBody(pod("p1"), {"a", "b"}))["NodeNames"], json({"a"}));
  // p1 is not bound yet: p2 is answered the other node, and told why not "a".
  json r = Filter(FilterBody(pod("p2"), {"a", "b"}));
  EXPECT_EQ(r["NodeNames"], json({"b"})) << r;
  EXPECT_NE(r["FailedNodes"]["a"].get<std::string>().find("(shares chosen for pods being bound: ns/p1)"),
            std::string::npos)
      << r;
  // A third finds no room now.
  r = Filter(FilterBody(pod("p3"), {"a", "b"}));
  EXPECT_EQ(r["NodeNames"], json::array()) << r;
  // Both bind where they were answered.
  ASSERT_EQ(Bind(BindBody("ns", "p2", "uid-ns-p2", "b"))["Error"], "");
  ASSERT_EQ(Bind(BindBody("ns", "p1", "uid-ns-p1", "a"))["Error"], "");
  // A pod filtered again gives up its earlier choice first.
  ASSERT_TRUE(state_->ForgetAssumed("ns/p1").ok());
  ASSERT_TRUE(state_->ForgetAssumed("ns/p2").ok());
  EXPECT_EQ(Filter(FilterBody(pod("p1"), {"a", "b"}))["NodeNames"], json({"a"}));
  EXPECT_EQ(Filter(FilterBody(pod("p1"), {"a", "b"}))["NodeNames"], json({"a"}));
  // A choice whose bind never came stops holding its GPU after 10 s.
  now_ += std::chrono::seconds(11);
  EXPECT_EQ(Filter(FilterBody(pod("p2"), {"a", "b"}))["NodeNames"], json({"a"}));
}

TEST_F(ExtenderTest, UnknownPolicyIsRefused) {
  ExtenderOptions o;
  o.policy = "bin-pack";
  auto e = Extender::Create(*state_, binder_, o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("known:"), std::string::npos);
  o.policy = "tessera+kube";  // the simulator's model of a deployment
  e = Extender::Create(*state_, binder_, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("give that name"), std::string::npos) << e.status().message();
}

TEST_F(ExtenderTest, PoliciesLearnTheWorkloadFromLivePods) {
  for (const std::string policy : {"tessera", "fgd"}) {
    SetUp();
    Make(policy);
    for (int i = 0; i < 8; ++i) state_->UpsertNode(NodeJson("w" + std::to_string(i), 4, "A100", 40960));
    std::vector<std::string> names;
    for (int i = 0; i < 8; ++i) names.push_back("w" + std::to_string(i));
    for (int i = 0; i < 80; ++i) {
      const std::string name = "l" + std::to_string(i);
      const json pod = PodJson("ns", name, {{"main", 1, 2048, (i % 3 + 1) * 10}});
      auto scores = Prioritize(FilterBody(pod, names));
      std::string best;
      for (const auto& [host, score] : scores)
        if (score == 10) best = host;
      ASSERT_FALSE(best.empty()) << policy << " " << i;
      Filter(FilterBody(pod, names));
      ASSERT_EQ(Bind(BindBody("ns", name, "uid-ns-" + name, best))["Error"], "") << policy << " " << i;
    }
    // Placed by the policy's own choice, 80 small pods pack rather than spread.
    int used_nodes = 0;
    for (const auto& n : names)
      used_nodes += state_->Read([&](const ClusterView& v) { return v.ledger().FindNode(n)->pods > 0; });
    EXPECT_LE(used_nodes, 6) << policy;
  }
}

}  // namespace
}  // namespace tessera::scheduler
