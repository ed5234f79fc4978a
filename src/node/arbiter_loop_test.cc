#include "node/arbiter_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "region/region.h"

namespace tessera::node {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tessera-arbiter-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

ArbiterContainer Container(const std::string& dir, int gpu, uint32_t share_ppm,
                           core::Priority p = core::Priority::kNormal) {
  ArbiterContainer c;
  c.key = dir;
  c.region_dir = dir;
  c.priority = p;
  ArbiterSlot s;
  s.gpu = gpu;
  s.share_ppm = share_ppm;
  c.slots.push_back(s);
  return c;
}

struct Fixture {
  TempDir root;
  std::string a = root.path() + "/pa/main", b = root.path() + "/pb/main";
  region::Region ra = Open(a), rb = Open(b);
  uint64_t now = 1'000'000;

  static region::Region Open(const std::string& dir) {
    std::filesystem::create_directories(dir);
    return std::move(region::Region::OpenDir(dir)).value();
  }
  ArbiterLoopOptions Options() {
    ArbiterLoopOptions o;
    o.now_us = [this] { return now; };
    o.source_refresh_us = 0;
    return o;
  }
};

TEST(ArbiterLoopTest, GrantsFollowDemandAndTheHeartbeatIsWritten) {
  Fixture f;
  ArbiterLoop loop([&] { return std::vector{Container(f.a, 0, 300'000), Container(f.b, 0, 700'000)}; },
                   f.Options());
  loop.Step();  // nobody active: the shares
  EXPECT_EQ(f.ra.layout()->compute[0].grant_ppm.load(), 300'000u);
  EXPECT_EQ(f.rb.layout()->compute[0].grant_ppm.load(), 700'000u);
  EXPECT_EQ(f.ra.layout()->arbiter.heartbeat_us.load(), 1'000'000u);
  EXPECT_EQ(f.ra.layout()->arbiter.lease_us.load(), 300'000u);
  // A launches: it gets the whole GPU while B is idle.
  f.ra.layout()->compute[0].launches += 5;
  f.now += 10'000;
  loop.Step();
  EXPECT_EQ(f.ra.layout()->compute[0].grant_ppm.load(), 1'000'000u);
  EXPECT_EQ(f.rb.layout()->compute[0].grant_ppm.load(), 0u);
  // B waits at its gate: active at once.
  f.rb.layout()->compute[0].waiting = 1;
  f.now += 10'000;
  loop.Step();
  EXPECT_EQ(f.ra.layout()->compute[0].grant_ppm.load(), 300'000u);
  EXPECT_EQ(f.rb.layout()->compute[0].grant_ppm.load(), 700'000u);
  // A goes quiet past idle_after: B gets it all.
  f.rb.layout()->compute[0].waiting = 0;
  f.rb.layout()->compute[0].launches += 1;
  f.now += 60'000;
  loop.Step();
  EXPECT_EQ(f.ra.layout()->compute[0].grant_ppm.load(), 0u);
  EXPECT_EQ(f.rb.layout()->compute[0].grant_ppm.load(), 1'000'000u);
  auto stats = loop.Snapshot();
  ASSERT_EQ(stats.size(), 2u);
  for (const ArbiterStats& s : stats) {
    EXPECT_EQ(s.gpu, 0);
    EXPECT_EQ(s.grant_ppm, s.key == f.b ? 1'000'000u : 0u);
    EXPECT_EQ(s.active, s.key == f.b);
  }
}

TEST(ArbiterLoopTest, AWaiterKilledAtTheGateDoesNotStayActive) {
  Fixture f;
  ArbiterLoop loop([&] { return std::vector{Container(f.a, 0, 300'000), Container(f.b, 0, 700'000)}; },
                   f.Options());
  loop.Step();
  region::ComputeShare& a = f.ra.layout()->compute[0];
  region::ComputeShare& b = f.rb.layout()->compute[0];
  // B's thread waits at its gate, alive: every wake adds to throttled_us.
  b.waiting = 1;
  for (int pass = 0; pass < 10; ++pass) {
    a.launches += 1;
    b.throttled_us += 1000;
    f.now += 10'000;
    loop.Step();
    EXPECT_EQ(b.grant_ppm.load(), 700'000u) << "pass " << pass;
  }
  // Its process is SIGKILLed mid-wait: `waiting` stays 1, nothing else moves.
  for (int pass = 0; pass < 10; ++pass) {
    a.launches += 1;
    f.now += 10'000;
    loop.Step();
  }
  EXPECT_EQ(b.waiting.load(), 1u);
  EXPECT_EQ(a.grant_ppm.load(), 1'000'000u);
  EXPECT_EQ(b.grant_ppm.load(), 0u);
}

TEST(ArbiterLoopTest, PriorityHoldsOnTheSameGpuOnly) {
  Fixture f;
  ArbiterLoop loop(
      [&] {
        auto hi = Container(f.a, 0, 500'000, core::Priority::kHigh);
        auto lo = Container(f.b, 0, 500'000, core::Priority::kLow);
        lo.slots.push_back(ArbiterSlot{1, 500'000});  // its slot 1 is GPU 1, where A is not
        return std::vector{hi, lo};
      },
      f.Options());
  f.ra.layout()->compute[0].waiting = 1;
  f.rb.layout()->compute[0].waiting = 1;
  f.rb.layout()->compute[1].waiting = 1;
  loop.Step();
  EXPECT_EQ(f.rb.layout()->compute[0].held.load(), 1u);
  EXPECT_EQ(f.rb.layout()->compute[0].grant_ppm.load(), 0u);
  EXPECT_EQ(f.rb.layout()->compute[1].held.load(), 0u);
  EXPECT_EQ(f.rb.layout()->compute[1].grant_ppm.load(), 1'000'000u);
  EXPECT_EQ(f.ra.layout()->compute[0].grant_ppm.load(), 1'000'000u);
  // Held from pass to pass: 20 ms, then released.
  f.now += 10'000;
  loop.Step();
  f.now += 10'000;
  f.ra.layout()->compute[0].waiting = 0;
  f.rb.layout()->compute[0].waiting = 0;
  loop.Step();
  f.now += 60'000;
  loop.Step();
  f.now += 10'000;
  loop.Step();
  EXPECT_EQ(f.rb.layout()->compute[0].held.load(), 0u);
  for (const ArbiterStats& s : loop.Snapshot()) {
    EXPECT_EQ(s.held_us, s.key == f.b && s.slot == 0 ? 80'000u : 0u) << s.key << " slot " << s.slot;
  }
}

TEST(ArbiterLoopTest, ContainersWithoutARegionFileAreSkippedNotCreated) {
  Fixture f;
  const std::string c = f.root.path() + "/pc/main";
  std::filesystem::create_directories(c);
  ArbiterLoop loop([&] { return std::vector{Container(f.a, 0, 300'000), Container(c, 0, 300'000)}; },
                   f.Options());
  loop.Step();
  EXPECT_FALSE(std::filesystem::exists(c + "/" + region::kFileName));
  EXPECT_EQ(loop.Snapshot().size(), 1u);
  // Its first process creates the region: the next pass takes it in.
  region::Region rc = Fixture::Open(c);
  loop.Step();
  EXPECT_EQ(loop.Snapshot().size(), 2u);
  EXPECT_NE(rc.layout()->arbiter.heartbeat_us.load(), 0u);
}

TEST(ArbiterLoopTest, StartArbiterIsOffAtIntervalZeroAndRunsOtherwise) {
  TempDir root;
  ArbiterConfig off;
  off.interval = std::chrono::milliseconds(0);
  EXPECT_EQ(StartArbiter(root.path(), off), nullptr);
  // A container recorded as Allocate does, with its region: the running
  // arbiter's thread writes its heartbeat (lease: 10 intervals, >= 300 ms).
  ArbiterContainer c = Container(root.path() + "/uid-1/main", 0, 300'000);
  std::filesystem::create_directories(c.region_dir);
  ASSERT_TRUE(WriteArbiterRecord(c.region_dir, c).ok());
  region::Region r = Fixture::Open(c.region_dir);
  ArbiterConfig on;
  on.interval = std::chrono::milliseconds(5);
  std::unique_ptr<ArbiterLoop> loop = StartArbiter(root.path(), on);
  ASSERT_NE(loop, nullptr);
  for (int i = 0; i < 400 && r.layout()->arbiter.heartbeat_us.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  loop->Stop();
  EXPECT_NE(r.layout()->arbiter.heartbeat_us.load(), 0u);
  EXPECT_EQ(r.layout()->arbiter.lease_us.load(), 300'000u);
  EXPECT_EQ(r.layout()->compute[0].grant_ppm.load(), 300'000u);
}

TEST(ArbiterLoopTest, RecordsRoundTripThroughTheRegionSource) {
  TempDir root;
  ArbiterContainer c;
  c.key = "uid-1/worker";
  c.region_dir = root.path() + "/uid-1/worker";
  c.policy = CorePolicy::kHard;
  c.priority = core::Priority::kHigh;
  c.slots = {ArbiterSlot{3, 250'000, 0}, ArbiterSlot{5, 1'000'000, 400'000}};
  std::filesystem::create_directories(c.region_dir);
  ASSERT_TRUE(WriteArbiterRecord(c.region_dir, c).ok());
  std::vector<ArbiterContainer> got = RegionSource(root.path())();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, c.key);
  EXPECT_EQ(got[0].region_dir, c.region_dir);
  EXPECT_EQ(got[0].policy, CorePolicy::kHard);
  EXPECT_EQ(got[0].priority, core::Priority::kHigh);
  ASSERT_EQ(got[0].slots.size(), 2u);
  EXPECT_EQ(got[0].slots[1].gpu, 5);
  EXPECT_EQ(got[0].slots[0].share_ppm, 250'000u);
  EXPECT_EQ(got[0].slots[0].limit_ppm, 0u);
  EXPECT_EQ(got[0].slots[1].limit_ppm, 400'000u);
}

TEST(ArbiterLoopTest, RegionSourceFindsClaimsOneLevelDownInTheirFolder) {
  // The DRA driver's claims: <root>/dra/<claim uid>/claim with its record
  // beside it; the `dra` folder is not read as a pod's, nor deeper folders.
  TempDir root;
  ArbiterContainer pod = Container(root.path() + "/uid-1/main", 0, 300'000);
  pod.key = "uid-1/main";
  ArbiterContainer claim = Container(root.path() + "/" + kClaimsFolder + "/claim-uid/claim", 1, 200'000);
  claim.key = "claim-uid/claim";
  claim.priority = core::Priority::kLow;
  for (const ArbiterContainer* c : {&pod, &claim}) {
    std::filesystem::create_directories(c->region_dir);
    ASSERT_TRUE(WriteArbiterRecord(c->region_dir, *c).ok());
  }
  // Not records of anything: one in the `dra` folder itself, one too deep.
  ArbiterContainer stray = Container(root.path() + "/" + kClaimsFolder + "/stray", 0, 100'000);
  ASSERT_TRUE(WriteArbiterRecord(stray.region_dir, stray).ok());
  ArbiterContainer deep = Container(root.path() + "/" + kClaimsFolder + "/claim-uid/claim/deep", 0, 100'000);
  ASSERT_TRUE(WriteArbiterRecord(deep.region_dir, deep).ok());
  std::vector<ArbiterContainer> got = RegionSource(root.path())();
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].key, "claim-uid/claim");
  EXPECT_EQ(got[0].region_dir, claim.region_dir);
  EXPECT_EQ(got[0].priority, core::Priority::kLow);
  ASSERT_EQ(got[0].slots.size(), 1u);
  EXPECT_EQ(got[0].slots[0].gpu, 1);
  EXPECT_EQ(got[1].key, "uid-1/main");
}

TEST(ArbiterLoopTest, AFolderRemovedUnderTheLoopIsNeitherRecreatedNorKept) {
  // The region cleanup (region_gc.h) may remove a container's folder between
  // the Source's listing and the pass that opens it, or while it is tracked.
  TempDir root;
  const std::string pod = root.path() + "/uid-1";
  std::vector<ArbiterContainer> listed = {Container(pod + "/main", 0, 300'000)};
  ArbiterLoopOptions o;
  o.source_refresh_us = 0;
  ArbiterLoop loop([&] { return listed; }, o);
  loop.Step();  // listed, its folder already gone
  EXPECT_FALSE(std::filesystem::exists(pod));
  EXPECT_TRUE(loop.Snapshot().empty());
  {
    region::Region r = Fixture::Open(pod + "/main");
    loop.Step();
    EXPECT_EQ(loop.Snapshot().size(), 1u);
  }
  std::filesystem::remove_all(pod);
  loop.Step();  // a listing older than the removal: its mapping is used, nothing is created
  EXPECT_FALSE(std::filesystem::exists(pod));
  listed.clear();
  loop.Step();
  EXPECT_TRUE(loop.Snapshot().empty());
}

TEST(ArbiterLoopTest, RegionSourceSkipsRecordsThatVanishedBeforeTheyWereRead) {
  TempDir root;
  ArbiterContainer c = Container(root.path() + "/uid-1/main", 0, 300'000);
  c.key = "uid-1/main";
  std::filesystem::create_directories(c.region_dir);
  ASSERT_TRUE(WriteArbiterRecord(c.region_dir, c).ok());
  // What a record removed between listing and reading looks like to the
  // reader: a name that no longer opens. And a pod folder that is gone.
  std::filesystem::create_symlink(root.path() + "/removed", root.path() + "/uid-1/gone.arbiter.json");
  std::filesystem::create_directory_symlink(root.path() + "/removed-pod", root.path() + "/uid-2");
  std::vector<ArbiterContainer> got = RegionSource(root.path())();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "uid-1/main");
  EXPECT_TRUE(RegionSource(root.path() + "/absent")().empty());
}

}  // namespace
}  // namespace tessera::node
