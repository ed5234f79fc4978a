// End-to-end scheduling through the real kube-scheduler and kube-apiserver:
// tessera-scheduler as the extender, simulated GPU nodes, real pods.
// Each test works in its own namespace on its own nodes (selected by label),
// so tests do not see each other's load.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <set>
#include <thread>

#include "core/codec.h"
#include "core/random.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/http_probe.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

class SchedulingTest : public ExtenderSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-extender"); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override { OpenNamespace("e2e", 24); }
  void TearDown() override {
    if (!client_) return;
    CloseNamespace();
    (void)DeleteSimNodes(*client_, nodes_);
  }

  // Nodes of this test only: labelled with the group, which pods select;
  // `slots_allocatable` as SimNode's (-1: all the slots listed).
  void AddNodes(int count, int gpus, const std::string& model, int64_t mem_mib, int64_t slots_allocatable = -1) {
    std::string lower = model;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto nodes = UniformSimNodes(group_ + "-" + lower, count, gpus, model, mem_mib);
    for (auto& n : nodes) {
      n.labels["tessera.io/e2e-group"] = group_;
      n.slots_allocatable = slots_allocatable;
    }
    Status created = CreateSimNodes(*client_, nodes);
    ASSERT_TRUE(created.ok()) << created.ToString();
    nodes_.insert(nodes_.end(), nodes.begin(), nodes.end());
  }
  std::map<std::string, std::string> Selector() const { return {{"tessera.io/e2e-group", group_}}; }

  Status Submit(const std::string& name, const std::vector<ContainerShape>& containers,
                const std::map<std::string, std::string>& annotations = {}) {
    return client_->Create("/api/v1/namespaces/" + ns_ + "/pods",
                           GpuPod(ns_, name, containers, Selector(), annotations))
        .status();
  }
  Result<core::Assignment> AssignmentOf(const nlohmann::json& pod) {
    const auto& a = pod["metadata"]["annotations"];
    if (!a.contains(std::string(core::kAssignmentAnnotation))) return NotFound("no assignment annotation");
    return core::DecodeAssignment(a[std::string(core::kAssignmentAnnotation)].get<std::string>());
  }
  // Waits until the pod is bound (returns it) or has a FailedScheduling event.
  Result<nlohmann::json> BoundOrRejected(const std::string& name, seconds timeout = seconds(60)) {
    return WaitForPod(*client_, ns_, name, [&](const nlohmann::json& pod) {
      return IsBound(pod) || !PodEvents(*client_, ns_, name, "FailedScheduling").empty();
    }, timeout);
  }
  std::string RejectionOf(const std::string& name) {
    auto events = PodEvents(*client_, ns_, name, "FailedScheduling");
    return events.empty() ? "" : events.back();
  }

  std::vector<SimNode> nodes_;
};

TEST_F(SchedulingTest, MixedRequestsArePlacedWithoutOvercommit) {
  AddNodes(3, 2, "A100", 40960);
  core::Rng rng(7);
  const int64_t mems[] = {2048, 4096, 8192, 12288};
  const int cores[] = {10, 20, 30, 50};
  std::map<std::string, ContainerShape> asked;
  for (int i = 0; i < 24; ++i) {
    ContainerShape shape{"main", 1, mems[rng.Below(4)], cores[rng.Below(4)]};
    const std::string name = "mixed-" + std::to_string(i);
    ASSERT_TRUE(Submit(name, {shape}).ok());
    asked[name] = shape;
  }
  int bound = 0;
  for (const auto& [name, shape] : asked) {
    auto pod = BoundOrRejected(name);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    if (!IsBound(pod.value())) {
      EXPECT_NE(RejectionOf(name).find("GPU"), std::string::npos) << RejectionOf(name);
      continue;
    }
    ++bound;
    auto assignment = AssignmentOf(pod.value());
    ASSERT_TRUE(assignment.ok()) << name << ": " << assignment.status().ToString();
    EXPECT_EQ(assignment->node, pod.value()["spec"]["nodeName"]);
    ASSERT_EQ(assignment->containers.size(), 1u);
    ASSERT_EQ(assignment->containers[0].gpus.size(), 1u);
    EXPECT_EQ(assignment->containers[0].gpus[0].mem_mib, shape.mem_mib);
    EXPECT_EQ(assignment->containers[0].gpus[0].core_milli, shape.core_percent * 10);
  }
  EXPECT_GE(bound, 18) << "6 GPUs should hold most of 24 small pods";
  const auto problems = FindOvercommit(*client_, "tessera.io/e2e-group=" + group_);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

TEST_F(SchedulingTest, MultiGpuAndMultiContainerPodsGetConsistentAssignments) {
  AddNodes(1, 4, "H100", 81559);
  ASSERT_TRUE(Submit("trainer", {{"trainer", 2, 0, 0}, {"sidecar", 1, 4096, 20}}).ok());
  auto pod = WaitForPod(*client_, ns_, "trainer", IsBound, seconds(60));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString() << " " << RejectionOf("trainer");
  auto assignment = AssignmentOf(pod.value());
  ASSERT_TRUE(assignment.ok()) << assignment.status().ToString();
  ASSERT_EQ(assignment->containers.size(), 2u);
  const auto& trainer = assignment->containers[0].name == "trainer" ? assignment->containers[0] : assignment->containers[1];
  const auto& sidecar = assignment->containers[0].name == "trainer" ? assignment->containers[1] : assignment->containers[0];
  EXPECT_EQ(trainer.name, "trainer");
  EXPECT_EQ(sidecar.name, "sidecar");
  ASSERT_EQ(trainer.gpus.size(), 2u);
  EXPECT_NE(trainer.gpus[0].index, trainer.gpus[1].index);
  std::set<int> whole;
  for (const auto& g : trainer.gpus) {
    EXPECT_EQ(g.core_milli, 1000);
    EXPECT_EQ(g.mem_mib, 81559) << "a whole GPU holds all of its memory";
    EXPECT_EQ(g.uuid, SimGpuUuid(assignment->node, g.index));
    whole.insert(g.index);
  }
  ASSERT_EQ(sidecar.gpus.size(), 1u);
  EXPECT_FALSE(whole.contains(sidecar.gpus[0].index)) << "the sidecar shares a GPU the trainer holds whole";
  EXPECT_EQ(sidecar.gpus[0].mem_mib, 4096);
  EXPECT_EQ(sidecar.gpus[0].core_milli, 200);
  EXPECT_TRUE(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_).empty());
}

TEST_F(SchedulingTest, UnschedulablePodsShowTheExtendersReason) {
  AddNodes(1, 2, "A100", 40960);
  ASSERT_TRUE(Submit("too-much-memory", {{"main", 1, 100000, 10}}).ok());
  ASSERT_TRUE(Submit("too-much-core", {{"main", 1, 1024, 150}}).ok());
  ASSERT_TRUE(Submit("unknown-model", {{"main", 1, 1024, 10}}, {{"tessera.io/gpu-model", "V100"}}).ok());
  ASSERT_TRUE(Submit("fraction-of-two", {{"main", 2, 1024, 30}}).ok());
  const std::map<std::string, std::string> expect = {
      {"too-much-memory", "100000"}, {"too-much-core", "150"}, {"unknown-model", "V100"}, {"fraction-of-two", "whole"}};
  for (const auto& [name, fragment] : expect) {
    auto pod = BoundOrRejected(name);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    EXPECT_FALSE(IsBound(pod.value())) << name << " was placed";
    const std::string reason = RejectionOf(name);
    EXPECT_NE(reason.find(fragment), std::string::npos) << name << ": " << reason;
  }
  // What the API server itself refuses never reaches the scheduler: say so clearly.
  auto negative = GpuPod(ns_, "negative", {{"main", 1, 1024, 10}}, Selector());
  negative["spec"]["containers"][0]["resources"]["limits"]["tessera.io/gpu-mem"] = "-5";
  Status s = client_->Create("/api/v1/namespaces/" + ns_ + "/pods", negative).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  auto fractional = GpuPod(ns_, "fractional", {{"main", 1, 1024, 10}}, Selector());
  fractional["spec"]["containers"][0]["resources"]["limits"]["tessera.io/gpu-core"] = "1.5";
  s = client_->Create("/api/v1/namespaces/" + ns_ + "/pods", fractional).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("integer"), std::string::npos) << s.message();
}

// The extender's reasons reach the FailedScheduling Event exactly as
// written: kube-scheduler uses them as the Event's format string, so a '%'
// would come out as "%!f(MISSING)". One GPU: a 90 percent pod and five of 1
// percent leave it 5 percent of compute (and 2 of its 8 slots). A GPU whose
// slots are all taken is refused by kube-scheduler itself (the node's
// tessera.io/gpu capacity) before the extender is asked; the extender's own
// slot reason is rejection_test's FullSlotsAreNamedAsSuch.
TEST_F(SchedulingTest, ReasonsReachTheEventAsWritten) {
  AddNodes(1, 1, "A100", 40960);
  ASSERT_TRUE(Submit("big", {{"main", 1, 1024, 90}}).ok());
  ASSERT_TRUE(WaitForPod(*client_, ns_, "big", IsBound, seconds(60)).ok());
  for (int i = 0; i < 5; ++i) {
    const std::string name = "small-" + std::to_string(i);
    ASSERT_TRUE(Submit(name, {{"main", 1, 1024, 1}}).ok());
    ASSERT_TRUE(WaitForPod(*client_, ns_, name, IsBound, seconds(60)).ok()) << name;
  }
  // Too little compute left: the share reason, with the largest free share.
  ASSERT_TRUE(Submit("wants-ten", {{"main", 1, 1024, 10}}).ok());
  // gpu-core 0 is no share: refused with the fix.
  auto zero = GpuPod(ns_, "zero-core", {{"main", 1, 1024, 10}}, Selector());
  zero["spec"]["containers"][0]["resources"]["limits"]["tessera.io/gpu-core"] = "0";
  ASSERT_TRUE(client_->Create("/api/v1/namespaces/" + ns_ + "/pods", zero).ok());

  const std::map<std::string, std::string> expect = {
      {"wants-ten", "no GPU with 1024 MiB and 10 percent free; largest free share is 34816 MiB and 5 percent on GPU 0 "
                    "(A100)"},
      {"zero-core", "tessera.io/gpu-core: 0 is not a share of compute: ask for 1 to 100 (percent of one GPU), or "
                    "leave tessera.io/gpu-core out for a share of memory alone"}};
  for (const auto& [name, reason] : expect) {
    auto pod = BoundOrRejected(name);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    EXPECT_FALSE(IsBound(pod.value())) << name << " was placed";
    const std::string event = RejectionOf(name);
    EXPECT_NE(event.find(reason), std::string::npos) << name << ": the Event reads: " << event;
    EXPECT_EQ(event.find("%!"), std::string::npos) << name << ": a reason was taken as a format: " << event;
  }
}

TEST_F(SchedulingTest, DeletedPodFreesItsShareForTheNext) {
  AddNodes(1, 1, "T4", 15360);
  ASSERT_TRUE(Submit("holder", {{"main", 1, 8192, 80}}).ok());
  ASSERT_TRUE(WaitForPod(*client_, ns_, "holder", IsBound).ok());
  ASSERT_TRUE(Submit("waiter", {{"main", 1, 8192, 50}}).ok());
  auto waiting = BoundOrRejected("waiter");
  ASSERT_TRUE(waiting.ok());
  ASSERT_FALSE(IsBound(waiting.value())) << "the waiter fit beside the holder";
  ASSERT_TRUE(client_->Delete("/api/v1/namespaces/" + ns_ + "/pods/holder", 0).ok());
  auto placed = WaitForPod(*client_, ns_, "waiter", IsBound, seconds(60));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString() << "; last reason: " << RejectionOf("waiter");
  EXPECT_TRUE(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_).empty());
}

// A node whose agent has not registered its slots with the kubelet yet:
// kube-scheduler does not count them (ignoredByScheduler), tessera-scheduler
// turns the pod away with its own reason, and kube-scheduler retries the pod
// when the node's status brings the slots.
TEST_F(SchedulingTest, APodThatArrivesBeforeTheSlotsIsPlacedWhenTheyAppear) {
  AddNodes(1, 1, "T4", 15360, /*slots_allocatable=*/0);
  const std::string node = nodes_.back().info.name;

  ASSERT_TRUE(Submit("early", {{"main", 1, 4096, 30}}).ok());
  // The first reason may be that tessera-scheduler's watch has not seen the node yet.
  auto turned_away = WaitForPod(*client_, ns_, "early", [&](const nlohmann::json& pod) {
    return IsBound(pod) || RejectionOf("early").find("slots allocatable") != std::string::npos;
  }, seconds(60));
  ASSERT_TRUE(turned_away.ok()) << turned_away.status().ToString() << "; last reason: " << RejectionOf("early");
  ASSERT_FALSE(IsBound(turned_away.value())) << "bound to a node without allocatable slots";
  EXPECT_NE(RejectionOf("early").find("node " + node + ": its kubelet reports 0 tessera.io/gpu slots allocatable"),
            std::string::npos)
      << RejectionOf("early");

  // The agent registers: the kubelet reports the slots.
  auto patched = client_->Patch("/api/v1/nodes/" + node + "/status", kube::PatchType::kMerge,
                                {{"status", {{"allocatable", {{"tessera.io/gpu", "8"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  auto placed = WaitForPod(*client_, ns_, "early", IsBound, seconds(60));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString() << "; last reason: " << RejectionOf("early");
  EXPECT_EQ(placed.value()["spec"]["nodeName"], node);
}

// Four pods at once for a node with two free slots of the three its
// kubelet reports allocatable, out of eight (a GPU's slots unhealthy, say):
// kube-scheduler filters each pod while the one before it is still binding,
// and tessera-scheduler counts the slots of those binds, so two pods are
// bound and two wait, turned away for want of slots, until the slots come
// back.
TEST_F(SchedulingTest, PodsFilteredTogetherTakeNoMoreSlotsThanTheKubeletHas) {
  AddNodes(1, 1, "A100", 40960, /*slots_allocatable=*/3);
  const std::string node = nodes_.back().info.name;
  // The node must be in tessera-scheduler's cache before the four come, or
  // they could be turned away for its not being seen yet: a first pod,
  // bound there, shows it is (and keeps its slot).
  ASSERT_TRUE(Submit("first", {{"main", 1, 1024, 5}}).ok());
  auto first = WaitForPod(*client_, ns_, "first", IsBound, seconds(60));
  ASSERT_TRUE(first.ok()) << first.status().ToString() << "; last reason: " << RejectionOf("first");

  const std::vector<std::string> names = {"q0", "q1", "q2", "q3"};
  for (const std::string& name : names) ASSERT_TRUE(Submit(name, {{"main", 1, 1024, 10}}).ok());
  // Wait until every pod is bound or turned away for want of slots.
  auto settled = [&](int* bound) {
    *bound = 0;
    for (const std::string& name : names) {
      auto pod = client_->Get("/api/v1/namespaces/" + ns_ + "/pods/" + name);
      if (!pod.ok()) return false;
      if (IsBound(*pod)) {
        ++*bound;
      } else if (RejectionOf(name).find("slots allocatable") == std::string::npos) {
        return false;
      }
    }
    return true;
  };
  int bound = 0;
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (!settled(&bound) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(bound, 2);
  for (const std::string& name : names) {
    auto pod = client_->Get("/api/v1/namespaces/" + ns_ + "/pods/" + name);
    if (!pod.ok() || IsBound(*pod)) continue;
    EXPECT_NE(RejectionOf(name).find("node " + node + ": its kubelet reports 3 tessera.io/gpu slots allocatable, 3 "
                                     "of them taken"),
              std::string::npos)
        << name << ": " << RejectionOf(name);
  }

  // The slots come back: the two that waited are placed.
  auto patched = client_->Patch("/api/v1/nodes/" + node + "/status", kube::PatchType::kMerge,
                                {{"status", {{"allocatable", {{"tessera.io/gpu", "8"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  for (const std::string& name : names) {
    auto placed = WaitForPod(*client_, ns_, name, IsBound, seconds(60));
    ASSERT_TRUE(placed.ok()) << name << ": " << placed.status().ToString() << "; last reason: " << RejectionOf(name);
    EXPECT_EQ(placed.value()["spec"]["nodeName"], node);
  }
}

TEST_F(SchedulingTest, ExtenderKilledMidStreamLosesAndDuplicatesNothing) {
  // 30 pods of 20 % fill 6 GPUs exactly (5 of each GPU's 8 slots): a lost
  // or doubled share would leave a pod without room.
  AddNodes(3, 2, "A100", 40960);
  constexpr int kPods = 30;
  auto count_bound = [&] {
    auto pods = client_->List("/api/v1/namespaces/" + ns_ + "/pods");
    int n = 0;
    if (pods.ok()) {
      for (const auto& p : pods.value()["items"]) n += IsBound(p);
    }
    return n;
  };
  // Pods keep arriving across the kill: the first third is placed by the
  // first extender, the kill lands while the next ones are being scheduled,
  // and the rest arrive while no extender runs at all.
  int bound_at_kill = -1;
  for (int i = 0; i < kPods; ++i) {
    ASSERT_TRUE(Submit("p" + std::to_string(i), {{"main", 1, 2048, 20}}).ok());
    if (i == kPods / 3) {
      const auto deadline = std::chrono::steady_clock::now() + seconds(30);
      while (count_bound() < 3 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      extender_->Stop(SIGKILL, std::chrono::milliseconds(0));
      bound_at_kill = count_bound();
    }
  }
  std::printf("killed tessera-scheduler with %d of %d pods bound\n", bound_at_kill, kPods);
  EXPECT_GE(bound_at_kill, 3);
  EXPECT_LT(bound_at_kill, kPods);
  std::this_thread::sleep_for(seconds(1));
  auto restarted = env_->StartExtender({"--identity", "e2e-extender"});
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  *extender_ = std::move(restarted).value();
  for (int i = 0; i < kPods; ++i) {
    auto pod = WaitForPod(*client_, ns_, "p" + std::to_string(i), IsBound, seconds(90));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString() << "; last reason: " << RejectionOf("p" + std::to_string(i));
  }
  EXPECT_TRUE(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_).empty()) << ::testing::PrintToString(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_));
}

TEST_F(SchedulingTest, StandbyReplicaIsNotReadyAndRefusesToBind) {
  // A port the kernel has just said is free: extender_port + 1 was once
  // another process's ephemeral port in CI, and the standby exited at once.
  const int port = FreeLoopbackPort();
  ClusterEnv standby_env = *env_;
  standby_env.extender_port = port;
  auto standby = standby_env.StartExtender({"--identity", "e2e-standby"}, seconds(3));
  ASSERT_FALSE(standby.ok()) << "a second replica became ready while the first holds the lease";
  const std::string log = env_->dir + "/logs/tessera-scheduler-standby.log";
  auto child = ChildProcess::Start({env_->bin_dir + "/tessera-scheduler", "--kubeconfig", env_->kubeconfig,
                                    "--port", std::to_string(port), "--identity", "e2e-standby"},
                                   log);
  ASSERT_TRUE(child.ok());
  httplib::Client http("127.0.0.1", port);
  // The replica listens only after its informers and elector have started;
  // on a loaded CI machine (images built beside this test) that took more
  // than 5 s once, so allow 30 s before calling it a failure.
  std::optional<httplib::Result> ready;
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  do {
    ready.emplace(http.Get("/readyz"));
    if (*ready && (*ready)->status != 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline && child->running());
  ASSERT_TRUE(*ready) << "the standby never answered /readyz on port " << port << " (running: " << child->running()
                      << "); see " << log;
  EXPECT_EQ((*ready)->status, 503);
  // Until its informers have synced, a replica refuses binds for that reason
  // first (seen on a loaded machine); the leader refusal is what follows.
  const std::string body = R"({"PodName":"x","PodNamespace":")" + ns_ + R"(","PodUID":"u","Node":"n"})";
  auto bind = http.Post("/bind", body, "application/json");
  for (int i = 0; i < 100 && bind && bind->body.find("caches not synced") != std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    bind = http.Post("/bind", body, "application/json");
  }
  ASSERT_TRUE(bind);
  EXPECT_EQ(bind->status, 200);
  EXPECT_NE(bind->body.find("leader"), std::string::npos) << bind->body;
}

// SIGTERM with kube-scheduler's keep-alive connection open: the Lease is
// released at once (a standby may bind within its retry period), and the
// process exits once the idle connection times out, well inside a pod's
// 30 s termination grace (it took 29 s with a 30 s keep-alive timeout and
// the Lease released last).
TEST_F(SchedulingTest, SigtermReleasesTheLeaseFirstAndExitsWithAConnectionOpen) {
  const int port = FreeLoopbackPort();
  const std::string lease = "tessera-sigterm-" + ns_;
  auto child = ChildProcess::Start({env_->bin_dir + "/tessera-scheduler", "--kubeconfig", env_->kubeconfig,
                                    "--port", std::to_string(port), "--identity", "e2e-sigterm",
                                    "--lease-namespace", ns_, "--lease-name", lease},
                                   env_->dir + "/logs/tessera-scheduler-sigterm.log");
  ASSERT_TRUE(child.ok());
  const std::string lease_path = "/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases/" + lease;
  auto holder = [&]() -> std::string {
    auto l = client_->Get(lease_path);
    return l.ok() ? (*l)["spec"].value("holderIdentity", std::string()) : std::string("?");
  };
  for (int i = 0; i < 100 && holder() != "e2e-sigterm"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(holder(), "e2e-sigterm");
  httplib::Client http("127.0.0.1", port);
  http.set_keep_alive(true);
  auto ready = http.Get("/healthz");  // the connection stays open, idle
  ASSERT_TRUE(ready);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(child->pid(), SIGTERM), 0);
  for (int i = 0; i < 30 && !holder().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(holder(), "") << "the Lease was not released within 3 s of SIGTERM";
  const int status = child->Stop(SIGTERM, std::chrono::seconds(20));
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  EXPECT_LT(took.count(), 15) << "tessera-scheduler took " << took.count() << " s to exit";
}

TEST_F(SchedulingTest, MetricsShowTheLedgerOfTheBoundPods) {
  // A model only this test's nodes have, so its series are this test's alone.
  const std::string model = "MetricsGPU" + std::to_string(::getpid());
  AddNodes(2, 2, model, 20480);
  const std::map<std::string, std::vector<ContainerShape>> pods = {
      {"m-small", {{"main", 1, 4096, 20}}},
      {"m-medium", {{"main", 1, 8192, 30}}},
      {"m-pair", {{"main", 2, 20480, 100}}},  // several GPUs: whole ones
      {"m-sidecar", {{"main", 1, 1024, 10}, {"side", 1, 3072, 50}}},
  };
  int64_t mem_mib = 0, core_milli = 0;
  for (const auto& [name, containers] : pods) {
    ASSERT_TRUE(Submit(name, containers).ok());
    for (const auto& c : containers) {
      mem_mib += c.gpus * c.mem_mib;
      core_milli += c.gpus * c.core_percent * 10;
    }
  }
  for (const auto& [name, containers] : pods) {
    auto pod = WaitForPod(*client_, ns_, name, IsBound, seconds(60));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString() << " " << RejectionOf(name);
  }
  ASSERT_EQ(mem_mib, 57344);
  ASSERT_EQ(core_milli, 3100);
  const std::string m = "model=\"" + model + "\"";
  const std::map<std::string, double> want = {
      {"tessera_scheduler_gpus{" + m + "}", 4},
      {"tessera_scheduler_gpu_memory_bytes{" + m + ",state=\"allocated\"}", 57344.0 * 1024 * 1024},
      {"tessera_scheduler_gpu_memory_bytes{" + m + ",state=\"total\"}", 4 * 20480.0 * 1024 * 1024},
      {"tessera_scheduler_gpu_core_ratio{" + m + ",state=\"allocated\"}", 3.1},
      {"tessera_scheduler_gpu_core_ratio{" + m + ",state=\"total\"}", 4},
  };
  // Bound pods are held at once (assumed at bind); confirmation by the pod
  // watch follows, so poll until the page shows them all confirmed.
  std::string page;
  double confirmed = 0;
  for (int i = 0; i < 100; ++i) {
    auto fetched = FetchMetrics(env_->extender_port);
    ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
    page = *fetched;
    auto c = SampleValue(page, R"(tessera_scheduler_pods_held{state="confirmed"})");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    confirmed = *c;
    if (confirmed >= 4 && SampleValue(page, R"(tessera_scheduler_pods_held{state="assumed"})").value() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(confirmed, 4) << page;
  for (const auto& [series, value] : want) {
    auto got = SampleValue(page, series);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_NEAR(*got, value, 1e-9) << series;
  }
  auto bound = SampleValue(page, R"(tessera_scheduler_decisions_total{verb="bind",outcome="bound"})");
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_GE(*bound, 4);
  EXPECT_EQ(SampleValue(page, "tessera_scheduler_leader").value(), 1);

  // Deleting a pod gives its share back on the page too.
  ASSERT_TRUE(client_->Delete("/api/v1/namespaces/" + ns_ + "/pods/m-sidecar", 0).ok());
  const std::string allocated = "tessera_scheduler_gpu_memory_bytes{" + m + ",state=\"allocated\"}";
  double after = 0;
  for (int i = 0; i < 100; ++i) {
    auto fetched = FetchMetrics(env_->extender_port);
    ASSERT_TRUE(fetched.ok());
    after = SampleValue(*fetched, allocated).value();
    if (after == 53248.0 * 1024 * 1024) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(after, 53248.0 * 1024 * 1024);  // less the sidecar pod's 1024 + 3072 MiB
}

TEST_F(SchedulingTest, PodsWithoutGpusOnGpuNodesAreInTheExtendersBook) {
  // kube-scheduler places a pod that names no Tessera resource on its own;
  // the extender sees it bound through its pod watch and books its CPU and
  // memory on the GPU node (tessera_scheduler_host_pods), until it is gone.
  AddNodes(1, 1, "A100", 40960);
  const std::string booked = R"(tessera_scheduler_host_pods{state="booked"})";
  auto value = [&]() -> double {
    auto page = FetchMetrics(env_->extender_port);
    if (!page.ok()) return -1;
    auto v = SampleValue(*page, booked);
    return v.ok() ? *v : -1;
  };
  auto wait_for = [&](double want) {
    double got = value();
    for (int i = 0; i < 100 && got != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      got = value();
    }
    return got;
  };
  const double before = value();
  ASSERT_GE(before, 0) << "no " << booked << " on the metrics page";
  ASSERT_TRUE(Submit("cpu-only", {{"main", 0, 0, 0}}).ok());
  auto pod = WaitForPod(*client_, ns_, "cpu-only", IsBound, seconds(60));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_FALSE(AssignmentOf(*pod).ok()) << "the extender does not place pods without GPUs";
  EXPECT_EQ(wait_for(before + 1), before + 1);
  ASSERT_TRUE(client_->Delete("/api/v1/namespaces/" + ns_ + "/pods/cpu-only", 0).ok());
  EXPECT_EQ(wait_for(before), before);
}

TEST_F(SchedulingTest, PodsWithoutGpusGoWhereTheyStrandNoGpus) {
  // Two nodes of 2 GPUs and 96 CPUs: on n-1 a pod holds both GPUs (and 64Gi
  // of memory, so kube-scheduler's least-allocated scoring prefers n-0); a
  // pod without GPUs asking for 95.95 CPUs would leave n-0's two free GPUs
  // 50m of CPU, less than any GPU pod the policy has seen asks (100m), and
  // strands nothing on n-1. The extender's /dra/prioritize (placePodsWithoutGpus,
  // on by default) scores n-1 10; a tie would go to n-0 (first name), as
  // kube-scheduler alone would.
  SeedLearnedWorkload(&nodes_);
  auto nodes = UniformSimNodes(group_ + "-n", 2, 2, "A100", 40960);
  for (auto& n : nodes) n.labels["tessera.io/e2e-group"] = group_;
  ASSERT_TRUE(CreateSimNodes(*client_, nodes).ok());
  nodes_.insert(nodes_.end(), nodes.begin(), nodes.end());
  const std::string n0 = nodes[0].info.name, n1 = nodes[1].info.name;
  const std::string pods = "/api/v1/namespaces/" + ns_ + "/pods";
  core::Assignment whole{n1, {{"main", {{0, SimGpuUuid(n1, 0), 40960, 1000}, {1, SimGpuUuid(n1, 1), 40960, 1000}}}}};
  nlohmann::json trainer = GpuPod(ns_, "trainer", {{"main", 2, 0, 0}}, Selector(),
                                  {{std::string(core::kAssignmentAnnotation), core::EncodeAssignment(whole).value()}});
  trainer["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "10m"}, {"memory", "64Gi"}};
  trainer["spec"]["nodeName"] = n1;
  ASSERT_TRUE(client_->Create(pods, trainer).ok());

  nlohmann::json big = GpuPod(ns_, "cpu-big", {{"main", 0, 0, 0}}, Selector());
  big["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "95950m"}, {"memory", "1Gi"}}}};
  big["spec"]["schedulingGates"] = {{{"name", "tessera.io/e2e-hold"}}};
  ASSERT_TRUE(client_->Create(pods, big).ok());
  // Held by the gate until the extender's pod watch has the trainer and the
  // seeded workload (before that, n-0 and n-1 look alike to it).
  std::map<std::string, int64_t> scores;
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto pod = client_->Get(pods + "/cpu-big");
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    scores = EveryPodScores(*pod, {n0, n1});
    if (scores.size() == 2 && scores[n1] == 10) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(scores.size(), 2u) << "the extender gave no scores for a pod without GPUs";
  EXPECT_EQ(scores[n1], 10);
  EXPECT_LT(scores[n0], 10);
  ASSERT_TRUE(client_->Patch(pods + "/cpu-big", kube::PatchType::kMerge, {{"spec", {{"schedulingGates", nullptr}}}}).ok());
  auto bound = WaitForPod(*client_, ns_, "cpu-big", IsBound, seconds(60));
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ((*bound)["spec"]["nodeName"], n1) << "kube-scheduler alone would take " << n0;
  EXPECT_FALSE(AssignmentOf(*bound).ok()) << "kube-scheduler binds it, without an assignment";
}

}  // namespace
}  // namespace tessera::testing
