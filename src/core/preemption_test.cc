#include "core/preemption.h"

#include <gtest/gtest.h>

namespace tessera::core {
namespace {

constexpr int64_t kNow = 1'000'000;

NodeInfo Node(const std::string& name, int gpus, int64_t mem_mib = 16384) {
  NodeInfo n;
  n.name = name;
  n.cpu_milli = 64000;
  n.memory_mib = 262144;
  for (int i = 0; i < gpus; ++i) {
    GpuInfo g;
    g.index = i;
    g.model = "T4";
    g.memory_mib = mem_mib;
    n.gpus.push_back(g);
  }
  return n;
}

PodRequest Request(const std::string& key, int gpus, int64_t core, int64_t mem = 0) {
  ContainerRequest c;
  c.name = "main";
  c.gpu_count = gpus;
  c.core_milli_per_gpu = core;
  c.mem_mib_per_gpu = mem;
  PodRequest r;
  r.key = key;
  r.cpu_milli = 100;
  r.memory_mib = 64;
  r.containers.push_back(c);
  return r;
}

// Builds a node through the ledger, so its use is what the scheduler would see.
class NodeBuilder {
 public:
  NodeBuilder(const std::string& name, int gpus, int64_t mem_mib = 16384) : name_(name) {
    EXPECT_TRUE(ledger_.AddNode(Node(name, gpus, mem_mib)).ok());
  }
  // A pod sharing GPU `gpu`: `core` milli, `mem` MiB, started `age` seconds ago.
  NodeBuilder& Share(const std::string& name, int gpu, int64_t core, int32_t priority, int64_t age,
                     int64_t mem = 0) {
    return Hold(Request("ns/" + name, 1, core, mem), {gpu}, priority, age);
  }
  NodeBuilder& Hold(const PodRequest& req, const std::vector<int>& gpus, int32_t priority, int64_t age) {
    Assignment a;
    a.node = name_;
    ContainerAssignment ca;
    ca.name = "main";
    for (int g : gpus) {
      GpuShare s;
      s.index = g;
      s.core_milli = req.containers[0].core_milli_per_gpu;
      s.mem_mib = req.containers[0].mem_mib_per_gpu > 0 ? req.containers[0].mem_mib_per_gpu
                                                        : (s.core_milli >= 1000 ? 16384 : 0);
      ca.gpus.push_back(s);
    }
    a.containers.push_back(ca);
    Status st = ledger_.Assume(req, a);
    EXPECT_TRUE(st.ok()) << st.ToString();
    PreemptionPod p;
    p.key = req.key;
    p.uid = "uid-" + req.key.substr(req.key.find('/') + 1);
    p.priority = priority;
    p.started_unix = kNow - age;
    p.request = req;
    p.assignment = a;
    pods_.push_back(p);
    return *this;
  }
  PreemptionPod& Last() { return pods_.back(); }
  PreemptionNode Build() const {
    PreemptionNode n;
    n.node = *ledger_.FindNode(name_);
    n.pods = pods_;
    return n;
  }

 private:
  std::string name_;
  Ledger ledger_;
  std::vector<PreemptionPod> pods_;
};

PreemptionOptions Options() {
  PreemptionOptions o;
  o.now_unix = kNow;
  return o;
}

std::vector<std::string> Keys(const PreemptionPlan& plan) {
  std::vector<std::string> out;
  for (const auto& v : plan.victims) out.push_back(v.key);
  return out;
}

TEST(Preemption, EvictsOnlyLowerPriorityPodsLowestFirst) {
  NodeBuilder n("n1", 1);
  n.Share("low", 0, 400, 0, 100).Share("mid", 0, 400, 50, 100);
  auto plan = PlanOnNode(Request("ns/p", 1, 500), 100, n.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/low"});
  EXPECT_EQ(plan->highest_victim_priority, 0);
  EXPECT_TRUE(plan->exact);
  ASSERT_EQ(plan->assignment.containers.size(), 1u);
  EXPECT_EQ(plan->assignment.containers[0].gpus[0].index, 0);
  // Pods of equal or higher priority are never victims.
  EXPECT_FALSE(PlanOnNode(Request("ns/p", 1, 500), 0, n.Build(), Options()).has_value());
  EXPECT_FALSE(PlanOnNode(Request("ns/p", 1, 900), 50, n.Build(), Options()).has_value());
}

TEST(Preemption, PrefersFewerVictimsThenLeastWorkLost) {
  NodeBuilder n("n1", 1);
  n.Share("a", 0, 100, 0, 10).Share("b", 0, 100, 0, 10).Share("c", 0, 100, 0, 10).Share("big", 0, 400, 0, 5000);
  // 300 free; 600 needs 300 more: "big" alone beats a+b+c, though it ran longest.
  auto plan = PlanOnNode(Request("ns/p", 1, 600), 10, n.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/big"});

  NodeBuilder m("n2", 1);
  m.Share("old", 0, 400, 0, 5000).Share("young", 0, 400, 0, 60);
  plan = PlanOnNode(Request("ns/p", 1, 500), 10, m.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/young"});
  EXPECT_EQ(plan->work_lost_seconds, 60);
}

TEST(Preemption, MemoryCountsAsMuchAsCompute) {
  NodeBuilder n("n1", 1, 16384);
  n.Share("small-mem", 0, 300, 0, 10, 1024).Share("big-mem", 0, 100, 0, 500, 12288);
  // Compute is free enough; memory is not: only big-mem's leaving helps.
  auto plan = PlanOnNode(Request("ns/p", 1, 200, 8192), 10, n.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/big-mem"});
}

TEST(Preemption, MultiGpuPodsMustFitWhole) {
  NodeBuilder n("n1", 2);
  n.Share("g0", 0, 200, 0, 10).Share("g1", 1, 200, 0, 20);
  auto plan = PlanOnNode(Request("ns/trainer", 2, 1000), 10, n.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->victims.size(), 2u);
  ASSERT_EQ(plan->assignment.containers[0].gpus.size(), 2u);
  // One GPU held by a pod it may not evict: no plan at all.
  NodeBuilder m("n2", 2);
  m.Share("g0", 0, 200, 0, 10).Share("keep", 1, 200, 10, 20);
  EXPECT_FALSE(PlanOnNode(Request("ns/trainer", 2, 1000), 10, m.Build(), Options()).has_value());
}

TEST(Preemption, TerminatingPodsAreGoneAndNeverVictims) {
  NodeBuilder n("n1", 1);
  n.Share("leaving", 0, 600, 0, 10);
  n.Last().terminating = true;
  n.Share("other", 0, 300, 0, 10);
  auto plan = PlanOnNode(Request("ns/p", 1, 500), 10, n.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->victims.empty()) << "the pod fits once the terminating pod is gone";
  EXPECT_EQ(plan->highest_victim_priority, INT32_MIN);
}

TEST(Preemption, UnevictablePodsAreKeptAndMaxVictimsBounds) {
  NodeBuilder n("n1", 1);
  n.Share("a", 0, 300, 0, 10).Share("b", 0, 300, 0, 10).Share("c", 0, 300, 0, 10);
  n.Last().evictable = false;
  PreemptionOptions o = Options();
  auto plan = PlanOnNode(Request("ns/p", 1, 700), 10, n.Build(), o);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), (std::vector<std::string>{"ns/a", "ns/b"}));
  o.max_victims = 1;
  EXPECT_FALSE(PlanOnNode(Request("ns/p", 1, 700), 10, n.Build(), o).has_value());
}

TEST(Preemption, ForcedVictimsAreAlwaysInThePlan) {
  NodeBuilder n("n1", 1);
  n.Share("a", 0, 300, 0, 10).Share("b", 0, 300, 0, 10).Share("c", 0, 300, 0, 10);
  PreemptionNode node = n.Build();
  node.forced_uids = {"uid-c"};
  auto plan = PlanOnNode(Request("ns/p", 1, 500), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->victims.size(), 2u);
  EXPECT_EQ(plan->victims[0].key, "ns/c");
  node.forced_uids = {"uid-a", "uid-b"};
  plan = PlanOnNode(Request("ns/p", 1, 500), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->victims.size(), 2u) << "the forced victims free enough";
}

TEST(Preemption, ReprieveFallbackStillFindsAnIrreducibleSet) {
  NodeBuilder n("n1", 1);
  for (int i = 0; i < 10; ++i) n.Share("p" + std::to_string(i), 0, 100, i < 5 ? 0 : 1, 100 + i);
  PreemptionOptions o = Options();
  o.search_budget = 1;
  auto plan = PlanOnNode(Request("ns/p", 1, 300), 10, n.Build(), o);
  ASSERT_TRUE(plan.has_value());
  EXPECT_FALSE(plan->exact);
  EXPECT_EQ(plan->victims.size(), 3u);
  for (const auto& v : plan->victims) EXPECT_EQ(v.priority, 0) << v.key;
  // The exact search agrees on the size and takes the three youngest.
  plan = PlanOnNode(Request("ns/p", 1, 300), 10, n.Build(), Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->exact);
  EXPECT_EQ(Keys(*plan), (std::vector<std::string>{"ns/p0", "ns/p1", "ns/p2"}));
}

TEST(Preemption, NodesAreRankedByVictimPriorityThenCountThenWork) {
  NodeBuilder mid("a-mid", 1);
  mid.Share("m", 0, 800, 5, 10);
  NodeBuilder low2("b-low2", 1);
  low2.Share("l1", 0, 450, 0, 10).Share("l2", 0, 450, 0, 10);
  NodeBuilder low1("c-low1", 1);
  low1.Share("x", 0, 800, 0, 9000);
  NodeBuilder free_node("d-none", 1);
  free_node.Share("keep", 0, 900, 10, 10);
  auto plans = PlanPreemption(Request("ns/p", 1, 700), 10,
                              {mid.Build(), low2.Build(), low1.Build(), free_node.Build()}, Options());
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].node, "c-low1");  // one priority-0 victim
  EXPECT_EQ(plans[1].node, "b-low2");  // two priority-0 victims
  EXPECT_EQ(plans[2].node, "a-mid");   // a priority-5 victim
}

TEST(Preemption, SlotsTheKubeletIsShortOfMustBeFreedToo) {
  // Two GPUs with room to spare, but the kubelet has only 3 slots allocatable
  // and the three sharers hold one each.
  NodeBuilder n("n1", 2);
  n.Share("old", 0, 100, 0, 5000).Share("young", 1, 100, 0, 60).Share("high", 1, 100, 20, 10);
  PreemptionNode node = n.Build();
  for (auto& p : node.pods) p.slots = 1;
  node.slots = {.allocatable = 3, .taken = 3, .asked = 1};
  auto plan = PlanOnNode(Request("ns/p", 1, 200), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/young"}) << "one slot freed, the least work lost";
  // A pod asking two slots needs two victims of lower priority.
  node.slots.asked = 2;
  plan = PlanOnNode(Request("ns/p", 1, 200), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), (std::vector<std::string>{"ns/young", "ns/old"}));
  // Slots taken by pods not on the list (being bound) are never freed.
  node.slots = {.allocatable = 3, .taken = 4, .asked = 1};
  plan = PlanOnNode(Request("ns/p", 1, 200), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->victims.size(), 2u);
  // More than the kubelet has: no eviction helps.
  node.slots = {.allocatable = 3, .taken = 3, .asked = 4};
  EXPECT_FALSE(PlanOnNode(Request("ns/p", 1, 200), 10, node, Options()).has_value());
  // A pod on its way out gives its slot back: no victim needed.
  node.slots = {.allocatable = 3, .taken = 3, .asked = 1};
  node.pods[2].terminating = true;
  plan = PlanOnNode(Request("ns/p", 1, 200), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_TRUE(plan->victims.empty());
  // Slots of another resource (slots = 0 here) free nothing.
  node.pods[2].terminating = false;
  for (auto& p : node.pods) p.slots = 0;
  EXPECT_FALSE(PlanOnNode(Request("ns/p", 1, 200), 10, node, Options()).has_value());
}

TEST(Preemption, SlotsAndSharesAreFreedByOneSet) {
  // Both GPUs are nearly full; only "slot" (on GPU 1) holds a slot of the
  // pod's resource. Evicting "gpu-hog" makes GPU room but no slot: the one
  // victim that frees both is found exactly and by the reprieve fallback.
  NodeBuilder n("n1", 2);
  n.Share("gpu-hog", 0, 900, 0, 100, 1024).Share("slot", 1, 900, 0, 200, 1024).Share("spare", 1, 50, 0, 10, 1024);
  PreemptionNode node = n.Build();
  node.pods[1].slots = 1;
  node.slots = {.allocatable = 1, .taken = 1, .asked = 1};
  auto plan = PlanOnNode(Request("ns/p", 1, 500), 10, node, Options());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/slot"}) << "freeing room on GPU 1 and the slot at once";
  EXPECT_EQ(plan->assignment.containers[0].gpus[0].index, 1);
  PreemptionOptions o = Options();
  o.search_budget = 1;
  plan = PlanOnNode(Request("ns/p", 1, 500), 10, node, o);
  ASSERT_TRUE(plan.has_value());
  EXPECT_FALSE(plan->exact);
  EXPECT_EQ(Keys(*plan), std::vector<std::string>{"ns/slot"});
}

TEST(Preemption, ApplyHoldIsItsOwnInverse) {
  NodeBuilder n("n1", 2);
  n.Share("a", 1, 300, 0, 10, 2048);
  PreemptionNode node = n.Build();
  NodeState s = node.node;
  ApplyHold(s, node.pods[0].request, node.pods[0].assignment, -1);
  EXPECT_EQ(s.gpus[1].core_used_milli, 0);
  EXPECT_EQ(s.gpus[1].mem_used_mib, 0);
  EXPECT_EQ(s.gpus[1].sharers, 0);
  EXPECT_EQ(s.cpu_used_milli, 0);
  ApplyHold(s, node.pods[0].request, node.pods[0].assignment, +1);
  EXPECT_EQ(s.gpus, node.node.gpus);
  EXPECT_EQ(s.gpu_pod_kinds, node.node.gpu_pod_kinds);
}

}  // namespace
}  // namespace tessera::core
