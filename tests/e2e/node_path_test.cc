// End-to-end through the whole hand-over: real kube-scheduler and
// kube-apiserver, tessera-scheduler as the extender, and per simulated node a
// real tessera-node process driven by the kubelet stand-in. Pods must reach
// Running with exactly the GPUs and limits of their assignment, and survive
// restarts of the kubelet, the node agent and the extender.
//
// What stays here needs the stand-in (docs/architecture.md, "Where the
// kubelet stand-in remains, and why"): fifty pods on five nodes at once, and
// the hand-over interrupted where a real kubelet cannot be stopped or
// watched (the agent killed while it holds an Allocate answer, a GPU gone
// between bind and admission, the extender and every agent killed with a pod
// bound but not admitted, a node that admits nothing for the extender's
// admission wait, the kubelet's sockets wiped with re-registration timed from
// the stand-in's own count), and pods created already bound with forged or
// copied assignments. The cases a real node runs (same-size pods, init and
// multi-GPU containers, usage, burst, region clean-up) are
// e2e_real_node_path_test (real_node_path_test.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <set>
#include <thread>

#include "core/codec.h"
#include "core/random.h"
#include "kube/paths.h"
#include "node/container_env.h"
#include "node/slots.h"
#include "tests/kubelet_sim/farm_suite.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/http_probe.h"
#include "tests/support/process.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Every way a Running pod's devices, env or mounts differ from its assignment.
std::vector<std::string> Mismatches(const json& pod) {
  const std::string key = pod["metadata"]["namespace"].get<std::string>() + "/" +
                          pod["metadata"]["name"].get<std::string>();
  auto assignment = core::DecodeAssignment(Annotation(pod, core::kAssignmentAnnotation));
  if (!assignment.ok()) return {key + ": no readable assignment: " + assignment.status().message()};
  const std::string recorded = Annotation(pod, kSimAllocationsAnnotation);
  if (recorded.empty()) return {key + ": the kubelet recorded no allocation"};
  const json allocations = json::parse(recorded);
  std::vector<std::string> problems;
  auto expect = [&](const std::string& what, const std::string& got, const std::string& want) {
    if (got != want) problems.push_back(key + " " + what + ": got \"" + got + "\", want \"" + want + "\"");
  };
  for (const auto& c : assignment->containers) {
    if (!allocations.contains(c.name)) {
      problems.push_back(key + "[" + c.name + "]: assigned GPUs but allocated nothing");
      continue;
    }
    const json& a = allocations[c.name];
    const json& envs = a["envs"];
    auto env = [&](const std::string& name) { return envs.contains(name) ? envs[name].get<std::string>() : ""; };
    std::string visible;
    std::multiset<std::string> want_gpus, got_gpus;
    for (size_t i = 0; i < c.gpus.size(); ++i) {
      const auto& g = c.gpus[i];
      visible += (i ? "," : "") + g.uuid;
      want_gpus.insert(g.uuid);
      const std::string n = std::to_string(i);
      expect("[" + c.name + "] TESSERA_GPU_UUID_" + n, env("TESSERA_GPU_UUID_" + n), g.uuid);
      expect("[" + c.name + "] TESSERA_GPU_MEM_LIMIT_MIB_" + n, env("TESSERA_GPU_MEM_LIMIT_MIB_" + n),
             std::to_string(g.mem_mib));
      expect("[" + c.name + "] TESSERA_GPU_CORE_PERCENT_" + n, env("TESSERA_GPU_CORE_PERCENT_" + n),
             node::CorePercent(g.core_milli));
    }
    expect("[" + c.name + "] NVIDIA_VISIBLE_DEVICES", env("NVIDIA_VISIBLE_DEVICES"), visible);
    expect("[" + c.name + "] TESSERA_POD", env("TESSERA_POD"), key);
    expect("[" + c.name + "] TESSERA_CONTAINER", env("TESSERA_CONTAINER"), c.name);
    for (const auto& id : a["deviceIDs"]) {
      auto gpu = node::SlotGpu(id.get<std::string>());
      got_gpus.insert(gpu.ok() ? gpu.value() : "?");
    }
    if (got_gpus != want_gpus) problems.push_back(key + "[" + c.name + "]: kubelet gave slots on other GPUs");
  }
  for (const auto& [name, a] : allocations.items()) {
    bool assigned = false;
    for (const auto& c : assignment->containers) assigned |= c.name == name;
    if (!assigned) problems.push_back(key + "[" + name + "]: allocated without an assigned share");
  }
  return problems;
}

class NodePathTest : public FarmSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-node-path"); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override { OpenNamespace("np", 24); }

  // This test's nodes, each with a tessera-node and a kubelet stand-in.
  using FarmSuite::StartFarm;
  void StartFarm(int count, int gpus, int64_t mem_mib, int slots = 4) {
    StartFarm(UniformSimNodes(group_, count, gpus, "A100", mem_mib, slots), ClusterFarmOptions());
  }

  Status Submit(const std::string& name, const std::vector<ContainerShape>& containers) {
    return client_->Create(kube::PodsPath(ns_), GpuPod(ns_, name, containers, GroupSelector())).status();
  }
  Result<json> Bound(const std::string& name, seconds timeout = seconds(60)) {
    return WaitForPod(*client_, ns_, name, IsBound, timeout);
  }
  // Waits for Running and checks the allocation against the assignment.
  void ExpectRunningAsAssigned(const std::string& name, seconds timeout = seconds(60)) {
    auto pod = Settled(name, timeout);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    ASSERT_EQ(Phase(*pod), "Running") << name << ": " << (*pod)["status"].dump();
    auto problems = Mismatches(*pod);
    EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  }
  // After a few more reconciliation passes on every node: no agent has found
  // a kubelet record that differs from an assignment.
  void ExpectNoMismatches() {
    auto runs = farm_->SumCounter("tessera_node_reconcile_runs_total");
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    const uint64_t want = *runs + 2 * farm_->size();
    const auto deadline = std::chrono::steady_clock::now() + seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      auto now = farm_->SumCounter("tessera_node_reconcile_runs_total");
      if (now.ok() && *now >= want) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
    auto mismatches = farm_->SumCounter("tessera_node_allocation_mismatches_total");
    ASSERT_TRUE(mismatches.ok()) << mismatches.status().ToString();
    EXPECT_EQ(*mismatches, 0u) << "see the tessera-node logs, e.g. " << farm_->AgentLog(0);
  }
  core::Assignment AssignmentOf(const json& pod) {
    auto a = core::DecodeAssignment(Annotation(pod, core::kAssignmentAnnotation));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a.value() : core::Assignment{};
  }
};

TEST_F(NodePathTest, FiftyPodsSubmittedAtOnceToFiveNodes) {
  StartFarm(5, 4, 81920, 8);
  core::Rng rng(11);
  const int64_t mems[] = {4096, 8192, 12288, 16384};
  const int cores[] = {10, 20};
  const int kPods = 50;
  for (int i = 0; i < kPods; ++i) {
    std::vector<ContainerShape> shape = {{"main", 1, mems[rng.Below(4)], cores[rng.Below(2)]}};
    if (i % 10 == 3) shape = {{"a", 1, 4096, 10}, {"b", 1, 4096, 10}};  // some two-container pods
    if (i % 25 == 7) shape = {{"main", 2, 0, 100}};                    // and two whole-two-GPU ones
    ASSERT_TRUE(Submit("p" + std::to_string(i), shape).ok());
  }
  std::vector<std::string> problems;
  for (int i = 0; i < kPods; ++i) {
    const std::string name = "p" + std::to_string(i);
    auto pod = Settled(name, seconds(180));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    ASSERT_EQ(Phase(*pod), "Running") << name << ": " << (*pod)["status"].dump();
    auto mine = Mismatches(*pod);
    problems.insert(problems.end(), mine.begin(), mine.end());
  }
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  auto overcommit = FindOvercommit(*client_);
  EXPECT_TRUE(overcommit.empty()) << ::testing::PrintToString(overcommit);
  ExpectNoMismatches();
}

TEST_F(NodePathTest, KubeletRestartReRegistersWithinASecondAndAllocationsContinue) {
  StartFarm(1, 2, 40960);
  ASSERT_TRUE(Submit("before", {{"main", 1, 4096, 10}}).ok());
  ExpectRunningAsAssigned("before");
  KubeletSim& kubelet = farm_->Kubelet(0);
  const int registrations = kubelet.Registrations();
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(kubelet.Restart(/*wipe_plugin_sockets=*/true).ok());
  while (kubelet.Registrations() == registrations && std::chrono::steady_clock::now() - restarted < seconds(10)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - restarted);
  std::printf("re-registered %lld ms after the kubelet stand-in wiped its sockets\n",
              static_cast<long long>(took.count()));
  ASSERT_GT(kubelet.Registrations(), registrations) << "no registration after the restart; see " << farm_->AgentLog(0);
  EXPECT_LT(took, seconds(1));
  ASSERT_TRUE(farm_->WaitForSlots(0, 8, milliseconds(10000)));
  ASSERT_TRUE(Submit("after", {{"main", 1, 4096, 10}}).ok());
  ExpectRunningAsAssigned("after");
  ExpectRunningAsAssigned("before");
}

TEST_F(NodePathTest, NodeAgentKilledMidAllocateHandsOutNoWrongGpu) {
  StartFarm(1, 2, 40960);
  // Restart the agent so that it holds each Allocate answer after marking the pod.
  farm_->StopAgent(0, SIGTERM);
  ASSERT_TRUE(farm_->StartAgent(0, {"--testing-allocate-reply-delay-ms", "30000"}).ok());
  ASSERT_TRUE(farm_->WaitForSlots(0, 8, milliseconds(20000)));
  ASSERT_TRUE(Submit("p1-victim", {{"main", 1, 30720, 30}}).ok());
  // The agent has marked the victim and holds the answer: kill it there.
  auto marked = WaitForPod(*client_, ns_, "p1-victim",
                           [](const json& p) { return !Annotation(p, "tessera.io/allocated").empty(); }, seconds(30));
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  PauseKubelets(true);  // admits nothing more until the agent is back
  farm_->StopAgent(0, SIGKILL);
  auto victim = Settled("p1-victim");
  ASSERT_TRUE(victim.ok()) << victim.status().ToString();
  EXPECT_EQ(Phase(*victim), "Failed") << "a container whose Allocate never returned must not run";
  EXPECT_EQ((*victim)["status"].value("reason", ""), "UnexpectedAdmissionError");

  ASSERT_TRUE(farm_->StartAgent(0).ok());
  ASSERT_TRUE(farm_->WaitForSlots(0, 8, milliseconds(20000)));
  PauseKubelets(false);
  ASSERT_TRUE(Submit("p2-next", {{"main", 1, 30720, 30}}).ok());  // the victim's size
  ASSERT_TRUE(Submit("p3-next", {{"main", 1, 4096, 10}}).ok());
  ExpectRunningAsAssigned("p2-next", seconds(90));
  ExpectRunningAsAssigned("p3-next", seconds(90));
}

TEST_F(NodePathTest, ExtenderAndNodeAgentsRestartedTogetherLoseNoAllocation) {
  StartFarm(2, 2, 40960);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Submit("early-" + std::to_string(i), {{"main", 1, 8192, 20}}).ok());
  std::map<std::string, std::string> early;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "early-" + std::to_string(i);
    ExpectRunningAsAssigned(name);
    early[name] = Annotation(*client_->Get(kube::PodPath(ns_, name)), kSimAllocationsAnnotation);
  }
  // Bound but not yet admitted when everything restarts. The extender binds
  // no second pod to a node before that node admitted the first.
  PauseKubelets(true);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Submit("pending-" + std::to_string(i), {{"main", 1, 8192, 20}}).ok());
  std::map<std::string, int> awaiting;  // node -> bound, unadmitted pods
  for (int tries = 0; tries < 100 && awaiting.empty(); ++tries) {
    std::this_thread::sleep_for(milliseconds(100));
    for (int i = 0; i < 4; ++i) {
      auto pod = client_->Get(kube::PodPath(ns_, "pending-" + std::to_string(i)));
      if (pod.ok() && IsBound(*pod)) ++awaiting[(*pod)["spec"]["nodeName"].get<std::string>()];
    }
  }
  ASSERT_FALSE(awaiting.empty()) << "no pod was bound";
  std::this_thread::sleep_for(seconds(5));  // more than the extender's admission wait: nothing more may bind
  awaiting.clear();
  for (int i = 0; i < 4; ++i) {
    auto pod = client_->Get(kube::PodPath(ns_, "pending-" + std::to_string(i)));
    if (pod.ok() && IsBound(*pod)) ++awaiting[(*pod)["spec"]["nodeName"].get<std::string>()];
  }
  for (const auto& [node, count] : awaiting) EXPECT_EQ(count, 1) << node << " has " << count << " pods awaiting admission";

  extender_->Stop(SIGKILL, milliseconds(0));
  for (size_t n = 0; n < farm_->size(); ++n) farm_->StopAgent(n, SIGKILL);
  std::this_thread::sleep_for(seconds(1));
  auto restarted = env_->StartExtender({"--identity", "e2e-node-path"});
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  *extender_ = std::move(restarted).value();
  for (size_t n = 0; n < farm_->size(); ++n) ASSERT_TRUE(farm_->StartAgent(n).ok());
  for (size_t n = 0; n < farm_->size(); ++n) ASSERT_TRUE(farm_->WaitForSlots(n, 8, milliseconds(20000)));
  PauseKubelets(false);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Submit("late-" + std::to_string(i), {{"main", 1, 8192, 20}}).ok());

  for (int i = 0; i < 4; ++i) {
    ExpectRunningAsAssigned("pending-" + std::to_string(i), seconds(120));
    ExpectRunningAsAssigned("late-" + std::to_string(i), seconds(120));
  }
  for (const auto& [name, before] : early) {
    auto pod = client_->Get(kube::PodPath(ns_, name));
    ASSERT_TRUE(pod.ok());
    EXPECT_EQ(Phase(*pod), "Running");
    EXPECT_EQ(Annotation(*pod, kSimAllocationsAnnotation), before) << name << " changed across the restart";
  }
  auto overcommit = FindOvercommit(*client_);
  EXPECT_TRUE(overcommit.empty()) << ::testing::PrintToString(overcommit);
  ExpectNoMismatches();
}

TEST_F(NodePathTest, VanishedGpuFailsTheAllocateWithItsReason) {
  StartFarm(1, 2, 40960);
  PauseKubelets(true);
  ASSERT_TRUE(Submit("orphan", {{"main", 1, 30720, 30}}).ok());
  auto bound = Bound("orphan");
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  const std::string lost = AssignmentOf(*bound).containers.at(0).gpus.at(0).uuid;
  // The assigned GPU falls off the bus: the agent's next inventory lacks it.
  std::vector<core::GpuInfo> remaining;
  for (const auto& g : farm_->node(0).info.gpus) {
    if (g.uuid == lost) continue;
    remaining.push_back(g);
    remaining.back().index = static_cast<int>(remaining.size()) - 1;
  }
  ASSERT_TRUE(farm_->WriteGpus(0, remaining).ok());
  ASSERT_TRUE(farm_->WaitForSlots(0, 4, milliseconds(20000)));
  PauseKubelets(false);
  auto pod = Settled("orphan");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(Phase(*pod), "Failed") << "a container must not start without its GPU";
  EXPECT_EQ((*pod)["status"].value("reason", ""), "UnexpectedAdmissionError");
  const std::string message = (*pod)["status"].value("message", "");
  EXPECT_NE(message.find(ns_ + "/orphan"), std::string::npos) << message;
  EXPECT_NE(message.find(lost), std::string::npos) << message;
  EXPECT_TRUE(Annotation(*pod, kSimAllocationsAnnotation).empty());
  // tessera-node says so on the pod too.
  auto events = WaitForEvents("orphan", "TesseraAllocateFailed", seconds(10));
  ASSERT_FALSE(events.empty()) << "no TesseraAllocateFailed Event on the pod";
  EXPECT_NE(events.back().find(lost), std::string::npos) << events.back();
}

// Issue 19, end to end: pods that skip the scheduler (spec.nodeName set) with
// a hand-written assignment larger than they ask for, or with a running pod's
// assignment copied onto them, get no share: the kubelet fails them with the
// node agent's reason, each carries TesseraAssignmentRefused, and the running
// pod keeps its GPU.
TEST_F(NodePathTest, PodsThatSkipTheSchedulerGetNoShareBeyondWhatTheyAskAndFits) {
  StartFarm(1, 2, 40960);
  ASSERT_TRUE(Submit("legit", {{"main", 1, 8192, 60}}).ok());
  ExpectRunningAsAssigned("legit");
  auto legit = client_->Get(kube::PodPath(ns_, "legit"));
  ASSERT_TRUE(legit.ok()) << legit.status().ToString();
  const std::string node = (*legit)["spec"]["nodeName"].get<std::string>();
  const core::GpuShare share = AssignmentOf(*legit).containers.at(0).gpus.at(0);
  const core::Assignment larger{node, {{"main", {{share.index, share.uuid, 15360, 1000}}}}};
  struct Case {
    const char* name;
    ContainerShape shape;
    std::string assignment;
    std::string why;
  };
  const Case cases[] = {
      {"forged", {"main", 1, 1024, 5}, *core::EncodeAssignment(larger),
       "is given 15360 MiB and 100 percent of GPU " + std::to_string(share.index) +
           ", but asks for 1024 MiB and 5 percent"},
      {"copied", {"main", 1, 8192, 60}, Annotation(*legit, core::kAssignmentAnnotation),
       "together over 100 percent"},
  };
  // One at a time: both name GPU 0, and a device-plugin Allocate does not
  // say which pod it is for, so two such pods pending at once may each be
  // refused with the other's reason (seen once under load).
  for (const Case& c : cases) {
    json spec = GpuPod(ns_, c.name, {c.shape}, GroupSelector(),
                       {{std::string(core::kAssignmentAnnotation), c.assignment},
                        {std::string(core::kAssignedAtAnnotation), "2026-01-01T00:00:00Z"}});
    spec["spec"]["nodeName"] = node;
    ASSERT_TRUE(client_->Create(kube::PodsPath(ns_), spec).ok()) << c.name;
    auto pod = Settled(c.name);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    EXPECT_EQ(Phase(*pod), "Failed") << c.name << " ran with a share the scheduler never granted";
    const std::string message = (*pod)["status"].value("message", "");
    EXPECT_NE(message.find(c.why), std::string::npos) << c.name << ": " << message;
    EXPECT_TRUE(Annotation(*pod, kSimAllocationsAnnotation).empty()) << c.name;
    EXPECT_FALSE(WaitForEvents(c.name, "TesseraAssignmentRefused", seconds(10)).empty()) << c.name;
  }
  ExpectRunningAsAssigned("legit");
  auto overcommit = FindOvercommit(*client_);
  EXPECT_TRUE(overcommit.empty()) << ::testing::PrintToString(overcommit);
}

// The other side of one pod awaiting admission per node: a bind to a node
// that has not admitted its previous pod gives up after the admission wait
// (--admission-wait-ms, 1 s here rather than the default 4 s), releases the
// share it booked and fails saying why; kube-scheduler retries the pod, and
// once the node admits the first pod the second is bound and admitted. The
// suite's own tessera-scheduler runs with that flag.
class AdmissionWaitTest : public NodePathTest {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-node-path", {"--admission-wait-ms", "1000"}); }

  // A sample of the extender's /metrics, `series` as SampleValue takes it.
  static Result<double> ExtenderSample(const std::string& series) {
    TESSERA_ASSIGN_OR_RETURN(std::string page, FetchMetrics(env_->extender_port));
    return SampleValue(page, series);
  }
};

TEST_F(AdmissionWaitTest, BindTimesOutUntilTheNodeAdmitsItsLastPod) {
  StartFarm(1, 2, 40960);
  PauseKubelets(true);  // the node admits nothing: "first" stays bound, not admitted
  ASSERT_TRUE(Submit("first", {{"main", 1, 8192, 20}}).ok());
  ASSERT_TRUE(Bound("first").ok());
  const std::string conflicts = R"(tessera_scheduler_decisions_total{verb="bind",outcome="conflict"})";
  auto before = ExtenderSample(conflicts);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_TRUE(Submit("second", {{"main", 1, 8192, 20}}).ok());

  // kube-scheduler reports the extender's refusal of the bind, or, once
  // "first" has awaited admission past the wait, filter's refusal of the node.
  const std::string why = "node " + farm_->node(0).info.name + " has not admitted pod " + ns_ + "/first";
  auto bind_refused = [&why](const std::string& e) {
    return e.find(why + " yet") != std::string::npos && e.find("waited 1000 ms") != std::string::npos;
  };
  auto says_why = [&why, &bind_refused](const std::string& e) {
    return bind_refused(e) || e.find(why + " for ") != std::string::npos;
  };
  const auto events = WaitForEvents("second", "FailedScheduling", seconds(30), says_why);
  ASSERT_TRUE(std::any_of(events.begin(), events.end(), says_why)) << ::testing::PrintToString(events);
  auto after = ExtenderSample(conflicts);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  if (std::any_of(events.begin(), events.end(), bind_refused)) {
    EXPECT_GT(*after, *before);
  }
  // Its share was given back: between kube-scheduler's retries the extender
  // holds no share assumed for an unposted bind, and nothing is over-committed.
  const std::string assumed = R"(tessera_scheduler_pods_held{state="assumed"})";
  Result<double> held = ExtenderSample(assumed);
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (!(held.ok() && *held == 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
    held = ExtenderSample(assumed);
  }
  EXPECT_TRUE(held.ok() && *held == 0) << assumed << ": " << (held.ok() ? std::to_string(*held) : held.status().ToString());
  auto second = client_->Get(kube::PodPath(ns_, "second"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(IsBound(*second)) << "bound while the node's previous pod awaits admission";
  auto overcommit = FindOvercommit(*client_);
  EXPECT_TRUE(overcommit.empty()) << ::testing::PrintToString(overcommit);

  // Admission resumes: the first pod runs, and a retry binds the second.
  PauseKubelets(false);
  ExpectRunningAsAssigned("first");
  ExpectRunningAsAssigned("second", seconds(60));
  overcommit = FindOvercommit(*client_);
  EXPECT_TRUE(overcommit.empty()) << ::testing::PrintToString(overcommit);
}

// Issue 19: a pod bound to a node that never admits it must not wedge that
// node for everyone. Once it has awaited admission past the wait, filter
// rejects the node, and kube-scheduler places the next pods on another node.
TEST_F(AdmissionWaitTest, PodsGoElsewhereWhileANodeDoesNotAdmit) {
  StartFarm(2, 2, 40960);
  PauseKubelets(true);
  ASSERT_TRUE(Submit("stuck", {{"main", 1, 8192, 20}}).ok());
  auto stuck = Bound("stuck");
  ASSERT_TRUE(stuck.ok()) << stuck.status().ToString();
  const std::string wedged = (*stuck)["spec"]["nodeName"].get<std::string>();
  const size_t other = farm_->node(0).info.name == wedged ? 1 : 0;
  farm_->Kubelet(other).SetPaused(false);  // only the wedged node admits nothing
  std::this_thread::sleep_for(seconds(2));  // past the 1 s admission wait
  for (const char* name : {"next-1", "next-2"}) ASSERT_TRUE(Submit(name, {{"main", 1, 8192, 20}}).ok());
  for (const char* name : {"next-1", "next-2"}) {
    ExpectRunningAsAssigned(name, seconds(30));
    auto pod = client_->Get(kube::PodPath(ns_, name));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    EXPECT_EQ((*pod)["spec"]["nodeName"], farm_->node(other).info.name) << name << " went to the wedged node";
  }
  PauseKubelets(false);
  ExpectRunningAsAssigned("stuck");
  auto overcommit = FindOvercommit(*client_);
  EXPECT_TRUE(overcommit.empty()) << ::testing::PrintToString(overcommit);
}

}  // namespace
}  // namespace tessera::testing
