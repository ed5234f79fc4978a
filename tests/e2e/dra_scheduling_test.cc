// End-to-end placement of DRA claim pods through the real kube-apiserver and
// kube-scheduler (1.36: structured parameters GA, consumable capacity beta
// and on by default): tessera-scheduler answers both extenders entries of
// the fixture (tools/controlplane/cluster-up.sh), the test publishes the
// ResourceSlices of simulated nodes with tessera-node's own builder
// (src/dra/resource_slice.h), and kube-scheduler's DRA allocator allocates
// the claims. No node agent or kubelet: pods are bound, never run.
//
// What it shows (docs/notes/dra.md, "Placement under DRA"):
//  - a claim pod lands on the node the extender's /dra/prioritize scores
//    highest (the one where the allocator's first fit strands no share),
//    although kube-scheduler's own spreading and the extender's tie-break
//    by name would both pick the other node, and the allocator takes there
//    the GPU the extender predicted;
//  - a device-plugin pod is not placed on the GPU the claims fill.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "core/codec.h"
#include "dra/resource_slice.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr const char* kDriver = "gpu.tessera.io";
constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";

json Claim(const std::string& ns, const std::string& name, const std::string& memory, const std::string& compute) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"devices",
             {{"requests",
               {{{"name", "gpu"},
                 {"exactly",
                  {{"deviceClassName", kDriver},
                   {"capacity", {{"requests", {{"memory", memory}, {"compute", compute}}}}}}}}}}}}}}};
}

// A pod using claim `claim` (by name), with `cpu` requested.
json ClaimPod(const std::string& ns, const std::string& name, const std::string& claim, const std::string& cpu,
              const std::map<std::string, std::string>& selector) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"nodeSelector", selector},
            {"terminationGracePeriodSeconds", 0},
            {"resourceClaims", {{{"name", "gpu"}, {"resourceClaimName", claim}}}},
            {"containers",
             {{{"name", "main"},
               {"image", "registry.example/test:1"},
               {"resources", {{"requests", {{"cpu", cpu}, {"memory", "1Gi"}}}, {"claims", {{{"name", "gpu"}}}}}}}}}}}};
}

class DraSchedulingTest : public ExtenderSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-dra-extender"); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override {
    OpenNamespace("e2e-dra", 20);
    if (!client_) return;
    // The chart's DeviceClass (dra.enabled); another test may have left it.
    const json device_class = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "DeviceClass"},
        {"metadata", {{"name", kDriver}}},
        {"spec", {{"selectors", {{{"cel", {{"expression", "device.driver == \"gpu.tessera.io\""}}}}}}}}};
    auto made = client_->Create(std::string(kResourceApi) + "/deviceclasses", device_class);
    ASSERT_TRUE(made.ok() || made.status().code() == StatusCode::kAlreadyExists) << made.status().ToString();
    made_class_ = made.ok();
  }
  void TearDown() override {
    if (!client_) return;
    CloseNamespace();
    for (const SimNode& n : dra_nodes_)
      (void)client_->Delete(dra::ResourceSlicePath(dra::SliceName(n.info.name, kDriver)));
    (void)DeleteSimNodes(*client_, nodes_);
    if (made_class_) (void)client_->Delete(std::string(kResourceApi) + "/deviceclasses/" + kDriver);
  }

  // `count` nodes of 2 A100 each, labelled with the group and their own
  // name, with the slices tessera-node publishes (its own builder's).
  void AddDraNodes(int count) {
    auto nodes = UniformSimNodes(group_ + "-n", count, 2, "A100", 40960);
    for (auto& n : nodes) {
      n.labels["tessera.io/e2e-group"] = group_;
      n.labels["tessera.io/e2e-node"] = n.info.name;
    }
    ASSERT_TRUE(CreateSimNodes(*client_, nodes).ok());
    nodes_.insert(nodes_.end(), nodes.begin(), nodes.end());
    for (const SimNode& n : nodes) {
      auto slice = dra::ResourceSliceFor(n.info.name, n.info.gpus, {});
      ASSERT_TRUE(slice.ok()) << slice.status().ToString();
      auto made = client_->Create(dra::ResourceSlicesPath(), *slice);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      dra_nodes_.push_back(n);
    }
  }

  void SeedWorkload() { SeedLearnedWorkload(&nodes_); }
  std::map<std::string, int64_t> ExtenderScores(const json& pod, const std::vector<std::string>& nodes) {
    return EveryPodScores(pod, nodes);
  }

  Result<json> Get(const std::string& path) { return client_->Get(path); }
  std::string PodPath(const std::string& name) { return "/api/v1/namespaces/" + ns_ + "/pods/" + name; }
  std::string ClaimsPath() { return std::string(kResourceApi) + "/namespaces/" + ns_ + "/resourceclaims"; }
  std::string ClaimPath(const std::string& name) { return ClaimsPath() + "/" + name; }
  // "<pool>/<device>" of the claim's first allocation result ("" while not allocated).
  std::string AllocatedDevice(const std::string& claim) {
    auto c = Get(ClaimPath(claim));
    if (!c.ok()) return "";
    const json results = c->value(json::json_pointer("/status/allocation/devices/results"), json::array());
    if (results.empty()) return "";
    return results[0].value("pool", "") + "/" + results[0].value("device", "");
  }

  std::vector<SimNode> nodes_, dra_nodes_;
  bool made_class_ = false;
};

TEST_F(DraSchedulingTest, ClaimPodLandsWhereTheExtenderScoresHighest) {
  SeedWorkload();
  AddDraNodes(2);
  const std::string n0 = group_ + "-n-0", n1 = group_ + "-n-1";
  const std::string pods = "/api/v1/namespaces/" + ns_ + "/pods";

  // p1's claim takes 30 % of n0's GPU 0; a pod without GPUs takes half of
  // n1's CPU, so kube-scheduler's own scores (least allocated, balanced)
  // prefer n0 for the next pod.
  ASSERT_TRUE(client_->Create(ClaimsPath(), Claim(ns_, "c1", "1Gi", "30")).ok());
  ASSERT_TRUE(client_->Create(pods, ClaimPod(ns_, "p1", "c1", "1", {{"tessera.io/e2e-node", n0}})).ok());
  json hog = GpuPod(ns_, "cpu-hog", {{"main", 0, 0, 0}}, {{"tessera.io/e2e-node", n1}});
  hog["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "48"}, {"memory", "1Gi"}}}};
  ASSERT_TRUE(client_->Create(pods, hog).ok());
  for (const char* name : {"p1", "cpu-hog"}) {
    auto bound = WaitForPod(*client_, ns_, name, IsBound, seconds(60));
    ASSERT_TRUE(bound.ok()) << name << " not bound: " << bound.status().ToString();
  }
  EXPECT_EQ(AllocatedDevice("c1"), n0 + "/gpu-0");

  // p2 (40 %) is held by a scheduling gate while the extender is asked.
  ASSERT_TRUE(client_->Create(ClaimsPath(), Claim(ns_, "c2", "1Gi", "40")).ok());
  json p2 = ClaimPod(ns_, "p2", "c2", "1", {{"tessera.io/e2e-group", group_}});
  p2["spec"]["schedulingGates"] = {{{"name", "tessera.io/e2e-hold"}}};
  ASSERT_TRUE(client_->Create(pods, p2).ok());
  // The allocator's first fit on n0 is its GPU 0, where 40 % would leave
  // 30 % that no pod of the workload takes; on n1 it is an empty GPU, which
  // keeps 60 % for the next 60 % pod: n1 is the better node. Until the
  // extender has booked c1, n0 and n1 look alike, and n0 (first by name)
  // would get 10: so a tie cannot pass for the extender's choice.
  std::map<std::string, int64_t> scores;
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto pod = Get(PodPath("p2"));
    ASSERT_TRUE(pod.ok());
    scores = ExtenderScores(*pod, {n0, n1});
    if (scores.size() == 2 && scores[n1] == 10) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(scores.size(), 2u) << "the extender gave no scores for p2";
  const std::string best = scores[n0] > scores[n1] ? n0 : n1;
  EXPECT_EQ(best, n1) << "scores: " << n0 << "=" << scores[n0] << " " << n1 << "=" << scores[n1];

  ASSERT_TRUE(client_->Patch(PodPath("p2"), kube::PatchType::kMerge, {{"spec", {{"schedulingGates", nullptr}}}}).ok());
  auto bound = WaitForPod(*client_, ns_, "p2", IsBound, seconds(60));
  ASSERT_TRUE(bound.ok()) << "p2 not bound: " << bound.status().ToString();
  EXPECT_EQ((*bound)["spec"]["nodeName"], best);
  // The allocator took the GPU the extender scored n1 by.
  EXPECT_EQ(AllocatedDevice("c2"), n1 + "/gpu-0");

  // p3's claim fills the rest of n0's GPU 0 (70 %); a device-plugin pod
  // pinned to n0 then gets GPU 1, not the GPU the claims fill.
  ASSERT_TRUE(client_->Create(ClaimsPath(), Claim(ns_, "c3", "1Gi", "70")).ok());
  ASSERT_TRUE(client_->Create(pods, ClaimPod(ns_, "p3", "c3", "1", {{"tessera.io/e2e-node", n0}})).ok());
  auto p3 = WaitForPod(*client_, ns_, "p3", IsBound, seconds(60));
  ASSERT_TRUE(p3.ok()) << "p3 not bound: " << p3.status().ToString();
  ASSERT_EQ(AllocatedDevice("c3"), n0 + "/gpu-0");
  // The extender books c3 from its claim watch; a pod placed before that
  // would be refused by the node agent's book, which this test has not.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(client_->Create(pods, GpuPod(ns_, "dp", {{"main", 1, 4096, 10}}, {{"tessera.io/e2e-node", n0}})).ok());
  auto dp = WaitForPod(*client_, ns_, "dp", IsBound, seconds(60));
  ASSERT_TRUE(dp.ok()) << "dp not bound: " << dp.status().ToString();
  auto a = core::DecodeAssignment(Annotation(*dp, core::kAssignmentAnnotation));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->containers.size(), 1u);
  EXPECT_EQ(a->containers[0].gpus.at(0).index, 1) << "the device-plugin pod was placed on the GPU the claims fill";
}

}  // namespace
}  // namespace tessera::testing
