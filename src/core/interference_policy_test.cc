#include "core/interference_policy.h"

#include <gtest/gtest.h>

#include "core/placer.h"
#include "core/random.h"

namespace tessera::core {
namespace {

NodeInfo Node(const std::string& name, int gpus) {
  NodeInfo n;
  n.name = name;
  n.cpu_milli = 64000;
  n.memory_mib = 262144;
  for (int i = 0; i < gpus; ++i) {
    GpuInfo g;
    g.index = i;
    g.model = "T4";
    n.gpus.push_back(g);
  }
  return n;
}

PodRequest Pod(const std::string& key, int gpus, int64_t core) {
  PodRequest p;
  p.key = key;
  p.cpu_milli = 1000;
  p.memory_mib = 1024;
  ContainerRequest c;
  c.name = "main";
  c.gpu_count = gpus;
  c.core_milli_per_gpu = core;
  p.containers.push_back(c);
  return p;
}

Assignment On(const std::string& node, int gpu, int64_t core) {
  Assignment a;
  a.node = node;
  a.containers.push_back({"main", {{gpu, "", 0, core}}});
  return a;
}

// Places `pod` with `policy` and books it; returns where it went.
Assignment PlaceAndBook(PlacementPolicy& policy, Ledger& ledger, const PodRequest& pod) {
  Placer placer(policy, 1);
  Result<Assignment> a = placer.Place(pod, ledger);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) return {};
  EXPECT_TRUE(ledger.Assume(pod, *a).ok());
  return *a;
}

TEST(InterferencePolicy, IsRegisteredWithItsKnobs) {
  PolicyConfig config;
  config.interference.ceiling = 0.5;
  auto p = MakePolicy("tessera-interference", config);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->name(), "tessera-interference");
  EXPECT_DOUBLE_EQ(static_cast<InterferencePolicy&>(**p).options().ceiling, 0.5);
}

TEST(InterferencePolicy, KeepsAGpuUnderTheCeilingWhereTesseraWouldPackIt) {
  for (const bool interference : {false, true}) {
    Ledger l;
    ASSERT_TRUE(l.AddNode(Node("n", 2)).ok());
    ASSERT_TRUE(l.Assume(Pod("a", 1, 500), On("n", 0, 500)).ok());
    TesseraPolicy tessera{TesseraPolicyOptions::V1()};
    InterferencePolicy ip;  // ceiling 0.70, factor 1.0: GPU 0 is predicted 50 % busy
    PlacementPolicy& policy = interference ? static_cast<PlacementPolicy&>(ip) : tessera;
    // 500 + 400 = 90 % > 70 %: tessera packs onto GPU 0, interference takes GPU 1.
    EXPECT_EQ(PlaceAndBook(policy, l, Pod("b", 1, 400)).containers[0].gpus[0].index, interference ? 1 : 0);
  }
}

TEST(InterferencePolicy, ThePenaltyFadesAsTheClusterFillsUp) {
  for (const double fade : {0.0, 0.5}) {
    SCOPED_TRACE(fade);
    Ledger l;
    ASSERT_TRUE(l.AddNode(Node("n", 2)).ok());
    ASSERT_TRUE(l.AddNode(Node("full1", 39)).ok());
    ASSERT_TRUE(l.AddNode(Node("full2", 39)).ok());
    ASSERT_TRUE(l.Assume(Pod("a", 1, 500), On("n", 0, 500)).ok());
    InterferenceOptions o;
    o.fade_below_free = fade;
    InterferencePolicy ip(o);
    // 79.5 of 80 GPUs free: the full penalty, so GPU 1 (as without fading).
    Ledger roomy = l;
    EXPECT_EQ(PlaceAndBook(ip, roomy, Pod("b", 1, 400)).containers[0].gpus[0].index, 1);
    const uint64_t epoch = ip.epoch();
    // 1.5 of 80 GPUs free (1.9 %): fading below 50 % free leaves under one
    // 5 % step of the penalty, none, and the pod packs onto GPU 0 as tessera
    // would.
    for (const char* full : {"full1", "full2"})
      for (int g = 0; g < 39; ++g)
        ASSERT_TRUE(l.Assume(Pod(std::string(full) + std::to_string(g), 1, 1000), On(full, g, 1000)).ok());
    const Assignment placed = PlaceAndBook(ip, l, Pod("b", 1, 400));
    EXPECT_EQ(placed.containers[0].gpus[0].index, fade > 0 ? 0 : 1);
    EXPECT_EQ(ip.epoch() != epoch, fade > 0) << "cached scores must be recomputed when the fade changes";
  }
}

TEST(InterferencePolicy, StillPacksWhileUnderTheCeiling) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 2)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 500), On("n", 0, 500)).ok());
  InterferencePolicy ip;
  // 500 + 200 = 70 %, at the ceiling, not over it: packs onto GPU 0.
  EXPECT_EQ(PlaceAndBook(ip, l, Pod("b", 1, 200)).containers[0].gpus[0].index, 0);
}

TEST(InterferencePolicy, PrefersAnotherNodeWithRoomUnderTheCeiling) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("busy", 1)).ok());
  ASSERT_TRUE(l.AddNode(Node("idle", 1)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 600), On("busy", 0, 600)).ok());
  TesseraPolicy tessera{TesseraPolicyOptions::V1()};
  InterferencePolicy ip;
  Ledger copy = l;
  EXPECT_EQ(PlaceAndBook(tessera, copy, Pod("b", 1, 300)).node, "busy");  // ties go to the first node
  EXPECT_EQ(PlaceAndBook(ip, l, Pod("b", 1, 300)).node, "idle");
}

TEST(InterferencePolicy, PlacesWhenOnlyOverCeilingGpusFitAndPicksTheLeastOver) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 2)).ok());
  ASSERT_TRUE(l.Assume(Pod("a", 1, 600), On("n", 0, 600)).ok());
  ASSERT_TRUE(l.Assume(Pod("b", 1, 500), On("n", 1, 500)).ok());
  InterferencePolicy ip;
  // 60 + 30 = 90 % or 50 + 30 = 80 %: both over; GPU 1 pushes less over.
  EXPECT_EQ(PlaceAndBook(ip, l, Pod("c", 1, 300)).containers[0].gpus[0].index, 1);
}

TEST(InterferencePolicy, APodOverTheCeilingAloneIsNotHeldAgainstAnyGpu) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("a", 1)).ok());
  ASSERT_TRUE(l.AddNode(Node("b", 1)).ok());
  InterferencePolicy ip;
  Placer placer(ip, 1);
  const Candidate c = placer.Score(Pod("w", 1, 900), l.nodes()[0]);
  EXPECT_EQ(c.score, 50);  // tessera's score for no fragmentation change, no penalty
  EXPECT_EQ(c.fine, 0);
}

TEST(InterferencePolicy, UsesTheLoadBookInsteadOfRequestsWhenGiven) {
  Ledger l;
  ASSERT_TRUE(l.AddNode(Node("n", 2)).ok());
  const PodRequest a = Pod("a", 1, 500);
  ASSERT_TRUE(l.Assume(a, On("n", 0, 500)).ok());
  GpuLoadBook book;
  book.Expect("a", {100});  // history: the 50 % share runs 10 % busy
  book.Place(a, On("n", 0, 500));
  InterferenceOptions o;
  InterferencePolicy ip(o, &book);
  // 10 + 40 = 50 % predicted: packs onto GPU 0.
  EXPECT_EQ(PlaceAndBook(ip, l, Pod("b", 1, 400)).containers[0].gpus[0].index, 0);
  // The pending pod's own prediction comes from the book too.
  Ledger l2;
  ASSERT_TRUE(l2.AddNode(Node("n", 2)).ok());
  ASSERT_TRUE(l2.Assume(a, On("n", 0, 500)).ok());
  GpuLoadBook book2;
  book2.Place(a, On("n", 0, 500));  // no Expect: booked at its request, 50 %
  book2.Expect("c", {150});
  InterferencePolicy ip2(o, &book2);
  EXPECT_EQ(PlaceAndBook(ip2, l2, Pod("c", 1, 400)).containers[0].gpus[0].index, 0);  // 65 %
  book2.Expect("d", {300});
  EXPECT_EQ(PlaceAndBook(ip2, l2, Pod("d", 1, 400)).containers[0].gpus[0].index, 1);  // would be 80 %
}

TEST(InterferencePolicy, WithWeightZeroPlacesExactlyAsTessera) {
  InterferenceOptions o;
  o.weight = 0;
  InterferencePolicy ip(o);
  TesseraPolicy tessera{TesseraPolicyOptions::V1()};
  Ledger la, lb;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(la.AddNode(Node("n" + std::to_string(i), 4)).ok());
    ASSERT_TRUE(lb.AddNode(Node("n" + std::to_string(i), 4)).ok());
  }
  Placer pa(ip, 7), pb(tessera, 7);
  Rng rng(3);
  const int64_t shares[] = {100, 250, 300, 500, 800, 1000};
  for (int i = 0; i < 120; ++i) {
    const int64_t core = shares[rng.Below(6)];
    const PodRequest p = Pod("p" + std::to_string(i), core == 1000 && rng.Below(3) == 0 ? 2 : 1, core);
    Result<Assignment> a = pa.Place(p, la);
    Result<Assignment> b = pb.Place(p, lb);
    ASSERT_EQ(a.ok(), b.ok()) << i;
    if (!a.ok()) continue;
    EXPECT_EQ(*a, *b) << i;
    ASSERT_TRUE(la.Assume(p, *a).ok());
    ASSERT_TRUE(lb.Assume(p, *b).ok());
  }
}

}  // namespace
}  // namespace tessera::core
