// End-to-end GPU preemption through the real kube-scheduler and kube-apiserver:
// a high-priority pod that fits nowhere makes tessera-scheduler evict the
// fewest lower-priority pods (through the Eviction API), with Events on both
// sides, and then lands, also where what it lacks is a device-plugin slot; a
// high-priority pod that fits evicts nothing.
// Pods here use terminationGracePeriodSeconds 0, so an eviction deletes them
// at once; a victim still Terminating is force-deleted by the test, standing
// in for the kubelet the simulated nodes do not have.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

constexpr const char* kLow = "tessera-e2e-low";
constexpr const char* kHigh = "tessera-e2e-high";

class PreemptionTest : public ExtenderSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-preemption"); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override {
    OpenNamespace("e2e-pre", 20);
    for (const auto& [name, value] : {std::pair{kLow, 100}, std::pair{kHigh, 100000}}) {
      const nlohmann::json pc = {{"apiVersion", "scheduling.k8s.io/v1"},
                                 {"kind", "PriorityClass"},
                                 {"metadata", {{"name", name}}},
                                 {"value", value},
                                 {"description", "tessera e2e preemption test"}};
      auto made = client_->Create("/apis/scheduling.k8s.io/v1/priorityclasses", pc);
      ASSERT_TRUE(made.ok() || made.status().code() == StatusCode::kAlreadyExists) << made.status().ToString();
    }
  }
  void TearDown() override {
    if (!client_) return;
    CloseNamespace();
    (void)DeleteSimNodes(*client_, nodes_);
  }

  // One-GPU T4 nodes of this test, each labelled with its own name, with
  // `slots_allocatable` tessera.io/gpu slots allocatable (-1: all those listed).
  void AddNodes(int count, int64_t slots_allocatable = -1) {
    auto nodes = UniformSimNodes(group_ + "-t4", count, 1, "T4", 15360);
    for (auto& n : nodes) {
      n.labels["tessera.io/e2e-group"] = group_;
      n.labels["tessera.io/e2e-node"] = n.info.name;
      n.slots_allocatable = slots_allocatable;
    }
    Status created = CreateSimNodes(*client_, nodes);
    ASSERT_TRUE(created.ok()) << created.ToString();
    nodes_.insert(nodes_.end(), nodes.begin(), nodes.end());
  }
  std::string NodeName(int i) const { return nodes_[static_cast<size_t>(i)].info.name; }

  // A pod of `priority_class` asking `core` % and 2048 MiB of one GPU, on
  // node `node` (-1: any node of the test).
  Status Submit(const std::string& name, const char* priority_class, int core, int node = -1) {
    std::map<std::string, std::string> selector = {{"tessera.io/e2e-group", group_}};
    if (node >= 0) selector["tessera.io/e2e-node"] = NodeName(node);
    nlohmann::json pod = GpuPod(ns_, name, {{"main", 1, 2048, core}}, selector);
    pod["spec"]["priorityClassName"] = priority_class;
    return client_->Create("/api/v1/namespaces/" + ns_ + "/pods", pod).status();
  }
  Result<nlohmann::json> Bound(const std::string& name, seconds timeout = seconds(60)) {
    return WaitForPod(*client_, ns_, name, IsBound, timeout);
  }
  // Waits until pod `name` is gone, force-deleting it (as its kubelet would
  // confirm) once the eviction has marked it Terminating.
  Status Evicted(const std::string& name, seconds timeout = seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::string path = "/api/v1/namespaces/" + ns_ + "/pods/" + name;
    while (std::chrono::steady_clock::now() < deadline) {
      auto pod = client_->Get(path);
      if (!pod.ok() && pod.status().code() == StatusCode::kNotFound) return Status::Ok();
      if (pod.ok() && pod.value()["metadata"].contains("deletionTimestamp")) (void)client_->Delete(path, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return FailedPrecondition("pod " + name + " was not evicted within " + std::to_string(timeout.count()) + " s");
  }
  bool Exists(const std::string& name) {
    auto pod = client_->Get("/api/v1/namespaces/" + ns_ + "/pods/" + name);
    return pod.ok() && !pod.value()["metadata"].contains("deletionTimestamp");
  }
  std::vector<std::string> EventsIn(const std::string& reason) {
    std::vector<std::string> out;
    auto events = client_->List("/api/v1/namespaces/" + ns_ + "/events", "", "reason=" + reason);
    if (!events.ok()) return out;
    for (const auto& e : events.value()["items"])
      out.push_back(e["involvedObject"].value("name", std::string()) + ": " + e.value("message", std::string()));
    return out;
  }

  std::vector<SimNode> nodes_;
};

TEST_F(PreemptionTest, FitsNowherePreemptsTheFewestVictimsAndLands) {
  AddNodes(2);
  // Node 0: 50 % + 30 % (20 % free); node 1: three of 30 % (10 % free).
  ASSERT_TRUE(Submit("low-big", kLow, 50, 0).ok());
  ASSERT_TRUE(Submit("low-0b", kLow, 30, 0).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Submit("low-1" + std::string(1, char('a' + i)), kLow, 30, 1).ok());
  const std::vector<std::string> lows = {"low-big", "low-0b", "low-1a", "low-1b", "low-1c"};
  for (const auto& name : lows) {
    auto pod = Bound(name);
    ASSERT_TRUE(pod.ok()) << name << ": " << pod.status().ToString();
  }
  // 60 % fits nowhere. The cheapest room: low-big alone on node 0 (node 1
  // would need two victims; low-0b alone frees too little).
  ASSERT_TRUE(Submit("urgent", kHigh, 60).ok());
  Status gone = Evicted("low-big");
  ASSERT_TRUE(gone.ok()) << gone.ToString() << "; events: " << ::testing::PrintToString(EventsIn("TesseraPreempting"))
                         << ::testing::PrintToString(EventsIn("TesseraPreemptionFailed"));
  auto urgent = Bound("urgent");
  ASSERT_TRUE(urgent.ok()) << urgent.status().ToString();
  EXPECT_EQ(urgent.value()["spec"]["nodeName"], NodeName(0));
  for (const auto& name : {"low-0b", "low-1a", "low-1b", "low-1c"}) EXPECT_TRUE(Exists(name)) << name << " was evicted too";

  const auto preempted = EventsIn("TesseraPreempted");
  ASSERT_EQ(preempted.size(), 1u) << ::testing::PrintToString(preempted);
  EXPECT_EQ(preempted[0].rfind("low-big: Preempted by " + ns_ + "/urgent (priority 100000) on node " + NodeName(0), 0),
            0u)
      << preempted[0];
  const auto preempting = EventsIn("TesseraPreempting");
  ASSERT_EQ(preempting.size(), 1u) << ::testing::PrintToString(preempting);
  EXPECT_NE(preempting[0].find("urgent: Preempting 1 lower-priority pod(s) on node " + NodeName(0)), std::string::npos)
      << preempting[0];
  EXPECT_NE(preempting[0].find(ns_ + "/low-big (priority 100)"), std::string::npos) << preempting[0];
  EXPECT_TRUE(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_).empty()) << ::testing::PrintToString(FindOvercommit(*client_, "tessera.io/e2e-group=" + group_));

  // A low pod that does not fit beside urgent preempts nothing (equal
  // priority to every holder but urgent, which outranks it).
  ASSERT_TRUE(Submit("late-low", kLow, 30, 0).ok());
  auto late = WaitForPod(*client_, ns_, "late-low", [&](const nlohmann::json& pod) {
    return IsBound(pod) || !PodEvents(*client_, ns_, "late-low", "FailedScheduling").empty();
  });
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_FALSE(IsBound(late.value())) << "30 % more does not fit beside 30 % + 60 %";
  EXPECT_EQ(EventsIn("TesseraPreempted").size(), 1u) << "a low pod never preempts a low pod";
}

TEST_F(PreemptionTest, FitsSomewhereEvictsNothing) {
  AddNodes(1);
  ASSERT_TRUE(Submit("low-a", kLow, 40, 0).ok());
  ASSERT_TRUE(Submit("low-b", kLow, 30, 0).ok());
  ASSERT_TRUE(Bound("low-a").ok());
  ASSERT_TRUE(Bound("low-b").ok());
  ASSERT_TRUE(Submit("urgent", kHigh, 30).ok());
  auto urgent = Bound("urgent");
  ASSERT_TRUE(urgent.ok()) << urgent.status().ToString();
  // Give a wrongly started preemption time to show.
  std::this_thread::sleep_for(seconds(3));
  EXPECT_TRUE(Exists("low-a"));
  EXPECT_TRUE(Exists("low-b"));
  EXPECT_TRUE(EventsIn("TesseraPreempted").empty()) << ::testing::PrintToString(EventsIn("TesseraPreempted"));
  EXPECT_TRUE(EventsIn("TesseraPreempting").empty());
}

// A node whose kubelet has fewer slots allocatable than its inventory lists
// (some GPUs' slots unhealthy): the GPU has room, the slots do not, and
// evicting a lower-priority pod frees one.
TEST_F(PreemptionTest, ASlotTheKubeletIsShortOfIsFreedForAHigherPriorityPod) {
  AddNodes(1, /*slots_allocatable=*/2);
  ASSERT_TRUE(Submit("low-old", kLow, 10, 0).ok());
  ASSERT_TRUE(Bound("low-old").ok());
  // Creation times are in seconds: a second apart, the younger is clear.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_TRUE(Submit("low-young", kLow, 10, 0).ok());
  ASSERT_TRUE(Bound("low-young").ok());
  ASSERT_TRUE(Submit("urgent", kHigh, 10).ok());
  Status gone = Evicted("low-young");
  ASSERT_TRUE(gone.ok()) << gone.ToString() << "; events: " << ::testing::PrintToString(EventsIn("TesseraPreempting"))
                         << ::testing::PrintToString(EventsIn("TesseraPreemptionFailed"));
  auto urgent = Bound("urgent");
  ASSERT_TRUE(urgent.ok()) << urgent.status().ToString();
  EXPECT_EQ(urgent.value()["spec"]["nodeName"], NodeName(0));
  EXPECT_TRUE(Exists("low-old")) << "one slot was needed, one victim";
  EXPECT_EQ(EventsIn("TesseraPreempted").size(), 1u) << ::testing::PrintToString(EventsIn("TesseraPreempted"));
}

}  // namespace
}  // namespace tessera::testing
