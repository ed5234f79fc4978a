// The extender with DRA: claim pods steered by the allocator's pick, and the
// device-plugin path kept off room that claims hold.
#include <gtest/gtest.h>

#include "core/codec.h"
#include "scheduler/extender.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using testing::BindBody;
using testing::ClaimJson;
using testing::FakeBinder;
using testing::FilterBody;
using testing::NodeJson;
using testing::PodJson;
using testing::SliceJson;
using testing::WithClaims;

class ExtenderClaimsTest : public ::testing::Test {
 protected:
  void Make(const std::string& policy) {
    ExtenderOptions o;
    o.policy = policy;
    o.logger = testing::QuietLogger();
    auto e = Extender::Create(state_, binder_, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    extender_ = std::move(e).value();
  }
  void AddDraNode(const std::string& name, int gpus, std::vector<int> order = {}) {
    state_.UpsertNode(NodeJson(name, gpus, "A100", 40960));
    if (order.empty()) {
      for (int i = 0; i < gpus; ++i) order.push_back(i);
    }
    state_.UpsertSlice(SliceJson(name, order));
  }
  std::map<std::string, int64_t> Scores(const std::string& body) {
    HttpReply r = extender_->PrioritizeClaims(body);
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, int64_t> out;
    for (const auto& hp : json::parse(r.body)) out[hp["Host"]] = hp["Score"];
    return out;
  }
  // 32 allocated claims filling node z9's 16 GPUs in pairs of 60 % and
  // 40 %: the workload the learning policies have seen (tessera's own
  // tests' workload, where a GPU left at 70 % takes no pod whole).
  void SeedWorkload() {
    AddDraNode("z9", 16);
    for (int i = 0; i < 32; ++i) {
      const int percent = i % 2 == 0 ? 60 : 40;
      state_.UpsertClaim(ClaimJson("seed", "s" + std::to_string(i), {{"gpu", 1, 1024, percent}}, "z9",
                                   {{i / 2, 1024, percent}}));
    }
    ASSERT_EQ(state_.Summary().claims_held, 32);
  }
  json ClaimPod(const std::string& name, const std::vector<std::string>& claims) {
    return WithClaims(PodJson("ns", name, {{"main"}}), claims);
  }

  ClusterState state_{testing::QuietStateOptions()};
  FakeBinder binder_;
  std::unique_ptr<Extender> extender_;
};

TEST_F(ExtenderClaimsTest, ClaimPodAvoidsANodeWhereFirstFitStrandsAShare) {
  // a1's GPU 0 is 30 % taken by a claim, its GPU 1 and b1 are empty. The
  // allocator would give a 40 % claim a1's GPU 0 (first fit), leaving 30 %
  // there that no claim of the workload takes: b1 is the better node,
  // although a1 has an empty GPU its own choice could have used.
  Make("tessera");
  SeedWorkload();
  AddDraNode("a1", 2);
  AddDraNode("b1", 2);
  state_.UpsertClaim(ClaimJson("ns", "held", {{"gpu", 1, 1024, 30}}, "a1", {{0, 1024, 30}}));
  state_.UpsertClaim(ClaimJson("ns", "want", {{"gpu", 1, 1024, 40}}));
  const auto scores = Scores(FilterBody(ClaimPod("p", {"want"}), {"a1", "b1"}));
  EXPECT_EQ(scores.at("b1"), 10);
  EXPECT_LT(scores.at("a1"), 10);
  // The claims are learned as arrivals, as pods are.
  EXPECT_EQ(state_.Read([](const ClusterView& v) { return v.HeldRequests().size(); }), 33u);
}

TEST_F(ExtenderClaimsTest, TheSliceOrderDecidesWhatANodeIsScoredBy) {
  Make("tessera");
  SeedWorkload();
  AddDraNode("a1", 2, {1, 0});  // first fit tries the empty GPU 1 first
  AddDraNode("b1", 2);
  state_.UpsertClaim(ClaimJson("ns", "held", {{"gpu", 1, 1024, 30}}, "a1", {{0, 1024, 30}}));
  state_.UpsertClaim(ClaimJson("ns", "want", {{"gpu", 1, 1024, 40}}));
  const auto scores = Scores(FilterBody(ClaimPod("p", {"want"}), {"a1", "b1"}));
  EXPECT_EQ(scores.at("a1"), 10);
  EXPECT_LT(scores.at("b1"), 10);
}

TEST_F(ExtenderClaimsTest, NodesWithoutRoomOrSliceScoreZero) {
  Make("tessera");
  AddDraNode("a1", 1);
  AddDraNode("b1", 1);
  state_.UpsertNode(NodeJson("c1", 1, "A100", 40960));  // no slice: not a DRA node
  state_.UpsertClaim(ClaimJson("ns", "held", {{"gpu", 1, 36864, 30}}, "a1", {{0, 36864, 30}}));
  state_.UpsertClaim(ClaimJson("ns", "want", {{"gpu", 1, 8192, 30}}));
  const auto scores = Scores(FilterBody(ClaimPod("p", {"want"}), {"a1", "b1", "c1"}));
  EXPECT_EQ(scores.at("a1"), 0);
  EXPECT_EQ(scores.at("b1"), 10);
  EXPECT_EQ(scores.at("c1"), 0);
}

TEST_F(ExtenderClaimsTest, OtherPodsGetNoOpinionCheaply) {
  Make("tessera");
  AddDraNode("a1", 1);
  // No claims at all: answered from a scan of the body.
  HttpReply r = extender_->PrioritizeClaims(FilterBody(PodJson("ns", "cpu", {{"main"}}), {"a1"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "[]");
  // A claim not seen yet, and one of another driver's class: no opinion either.
  EXPECT_TRUE(Scores(FilterBody(ClaimPod("p", {"unseen"}), {"a1"})).empty());
  json nic = ClaimJson("ns", "nic", {{"nic", 1}});
  nic["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nic.example.com";
  state_.UpsertClaim(nic);
  EXPECT_TRUE(Scores(FilterBody(ClaimPod("q", {"nic"}), {"a1"})).empty());
  // Not an ExtenderArgs: 400, as the other verbs.
  EXPECT_EQ(extender_->PrioritizeClaims("{\"resourceClaims\": 1}").status, 400);
}

TEST_F(ExtenderClaimsTest, FilterClaimsPassesEveryNode) {
  Make("tessera");
  HttpReply r = extender_->FilterClaims(FilterBody(ClaimPod("p", {"want"}), {"a1", "zz"}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["NodeNames"], json({"a1", "zz"}));
}

TEST_F(ExtenderClaimsTest, DevicePluginPodIsNotPlacedOnRoomAClaimHolds) {
  Make("tessera");
  AddDraNode("a1", 1);
  AddDraNode("b1", 2);
  // a1's only GPU and b1's GPU 0 are nearly filled by claims.
  state_.UpsertClaim(ClaimJson("ns", "c1", {{"gpu", 1, 36864, 30}}, "a1", {{0, 36864, 30}}));
  state_.UpsertClaim(ClaimJson("ns", "c2", {{"gpu", 1, 36864, 30}}, "b1", {{0, 36864, 30}}));
  const json pod = PodJson("ns", "dp", {{"main", 1, 8192, 30}});
  HttpReply f = extender_->Filter(FilterBody(pod, {"a1", "b1"}));
  ASSERT_EQ(f.status, 200);
  const json filtered = json::parse(f.body);
  EXPECT_EQ(filtered["NodeNames"], json({"b1"}));
  EXPECT_NE(filtered["FailedNodes"]["a1"].get<std::string>().find("4096"), std::string::npos) << filtered.dump();
  HttpReply b = extender_->Bind(BindBody("ns", "dp", "uid-ns-dp", "b1"));
  ASSERT_EQ(json::parse(b.body)["Error"], "") << b.body;
  auto a = core::DecodeAssignment(binder_.calls().at(0).annotations.at("tessera.io/assignment"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->containers[0].gpus[0].index, 1);  // not GPU 0, which the claim fills
}

}  // namespace
}  // namespace tessera::scheduler
