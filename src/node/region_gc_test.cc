#include "node/region_gc.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/null_sink.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kube/fake_api.h"
#include "kube/paths.h"
#include "node/arbiter_loop.h"
#include "node/node_pods.h"
#include "region/region.h"

namespace tessera::node {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr const char* kUidA = "0f8fad5b-d9cb-469f-a165-70867728950e";
constexpr const char* kUidB = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
constexpr const char* kUidC = "16fd2706-8baf-433b-82eb-8c7fada847da";
constexpr const char* kUidD = "886313e1-3b8a-5372-9b90-0c9aee199e5d";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tessera-region-gc-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void Touch(const fs::path& p, const std::string& text = "x") {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A container folder as Allocate leaves it (and its process made it): the
// region, and the arbiter's record beside it.
void MakeContainer(const std::string& root, const std::string& uid, const std::string& container) {
  const std::string dir = root + "/" + uid + "/" + container;
  fs::create_directories(dir);
  ASSERT_TRUE(region::Region::OpenDir(dir).ok());
  ArbiterContainer record;
  record.key = uid + "/" + container;
  record.region_dir = dir;
  record.slots = {ArbiterSlot{0, 300'000, 0}};
  ASSERT_TRUE(WriteArbiterRecord(dir, record).ok());
}

// A pod of the node with `uid` ("" for none), as the node agent's pod cache
// hands it out (decoded).
std::shared_ptr<const core::PodView> Pod(const std::string& uid, const std::string& name = "p") {
  core::PodView pod;
  pod.ns = "default";
  pod.name = name;
  pod.key = pod.ns + "/" + name;
  pod.uid = uid;
  return std::make_shared<const core::PodView>(std::move(pod));
}

std::function<bool(const std::string&)> InUse(std::set<std::string> live, std::vector<std::string>* asked = nullptr) {
  return [live = std::move(live), asked](const std::string& uid) {
    if (asked != nullptr) asked->push_back(uid);
    return live.contains(uid);
  };
}

TEST(LooksLikePodUidTest, OnlyUuids) {
  EXPECT_TRUE(LooksLikePodUid(kUidA));
  EXPECT_TRUE(LooksLikePodUid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
  for (const char* bad : {"", "uid-1", "..", "lost+found", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5bd9cb469fa16570867728950e",
                          "0f8fad5b-d9cb-469f-a165-70867728950e.arbiter.json", "0f8fad5b_d9cb_469f_a165_70867728950e",
                          "0f8fad5b-d9cb-469f-a165-70867728950g", "../f8fad5b-d9cb-469f-a165-70867728950e"}) {
    EXPECT_FALSE(LooksLikePodUid(bad)) << bad;
  }
}

TEST(PlanRegionGcTest, RemovesOnlyUidsMissingForTheGraceAndNotInUse) {
  const GcClock::time_point t0{};
  const seconds grace(300);
  std::vector<std::string> asked;
  // A is known; B and C are first seen missing: nothing is due yet.
  RegionGcPlan p = PlanRegionGc({kUidA, kUidB, kUidC}, {kUidA}, {}, t0, grace, InUse({}, &asked));
  EXPECT_TRUE(p.remove.empty());
  EXPECT_TRUE(p.in_use.empty());
  EXPECT_EQ(p.missing_since, (std::map<std::string, GcClock::time_point>{{kUidB, t0}, {kUidC, t0}}));
  EXPECT_TRUE(asked.empty()) << "liveness is asked of due uids only";
  // Just before the grace: still nothing, and the first-seen times stay.
  p = PlanRegionGc({kUidA, kUidB, kUidC}, {kUidA}, p.missing_since, t0 + grace - seconds(1), grace, InUse({}, &asked));
  EXPECT_TRUE(p.remove.empty());
  EXPECT_EQ(p.missing_since.at(kUidB), t0);
  // At the grace: B goes, C has a live process and is kept for the next pass.
  p = PlanRegionGc({kUidA, kUidB, kUidC}, {kUidA}, p.missing_since, t0 + grace, grace, InUse({kUidC}, &asked));
  EXPECT_EQ(p.remove, std::vector<std::string>{kUidB});
  EXPECT_EQ(p.in_use, std::vector<std::string>{kUidC});
  EXPECT_EQ(std::set<std::string>(asked.begin(), asked.end()), (std::set<std::string>{kUidB, kUidC}));
  EXPECT_EQ(asked.size(), 2u);
  EXPECT_EQ(p.missing_since.at(kUidC), t0);
  EXPECT_TRUE(p.missing_since.contains(kUidB)) << "kept until it is gone from disk, so a failed removal is retried";
}

TEST(PlanRegionGcTest, AUidSeenAgainOrGoneFromDiskIsForgotten) {
  const GcClock::time_point t0{};
  const seconds grace(60);
  std::map<std::string, GcClock::time_point> since = {{kUidA, t0}, {kUidB, t0}};
  // A is back among the pods (the cache caught up); B's folder is gone.
  RegionGcPlan p = PlanRegionGc({kUidA}, {kUidA}, since, t0 + seconds(600), grace, InUse({}));
  EXPECT_TRUE(p.remove.empty());
  EXPECT_TRUE(p.missing_since.empty());
  // Missing again later: its clock starts over.
  p = PlanRegionGc({kUidA}, {}, p.missing_since, t0 + seconds(700), grace, InUse({}));
  EXPECT_TRUE(p.remove.empty());
  EXPECT_EQ(p.missing_since.at(kUidA), t0 + seconds(700));
}

TEST(PlanRegionGcTest, AnAgentRestartStartsTheGraceOver) {
  // No state (a new agent): a folder of a pod long gone waits the whole grace.
  const GcClock::time_point t0 = GcClock::time_point{} + seconds(100'000);
  RegionGcPlan p = PlanRegionGc({kUidB}, {}, {}, t0, seconds(60), InUse({}));
  EXPECT_TRUE(p.remove.empty());
  EXPECT_EQ(p.missing_since.at(kUidB), t0);
}

TEST(PodUidsTest, TakesEachPodsUid) {
  const PodViews pods = {Pod(kUidA), Pod(kUidB), Pod("", "no-uid")};
  EXPECT_EQ(PodUids(pods), (std::set<std::string>{kUidA, kUidB}));
}

TEST(ListRegionUidsTest, UidFoldersOnlyNeitherSymlinksNorOtherNames) {
  TempDir root, outside;
  EXPECT_EQ(ListRegionUids(root.path() + "/absent").status().code(), StatusCode::kNotFound);
  fs::create_directories(root.path() + "/" + kUidA + "/main");
  fs::create_directories(root.path() + "/lost+found");
  Touch(root.path() + "/" + kUidB);  // a file with a uid's name
  fs::create_directory_symlink(outside.path(), root.path() + "/" + kUidC);
  auto uids = ListRegionUids(root.path());
  ASSERT_TRUE(uids.ok()) << uids.status().ToString();
  EXPECT_EQ(*uids, std::set<std::string>{kUidA});
}

TEST(RemoveRegionFolderTest, RemovesRegionsAndRecordsAndSaysWhatWasFreed) {
  TempDir root;
  MakeContainer(root.path(), kUidA, "main");
  MakeContainer(root.path(), kUidA, "sidecar");
  auto removed = RemoveRegionFolder(root.path(), kUidA);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_FALSE(fs::exists(root.path() + "/" + kUidA));
  EXPECT_TRUE(fs::exists(root.path())) << "the root stays";
  EXPECT_EQ(removed->containers, 2);
  EXPECT_EQ(removed->records, 2);
  EXPECT_EQ(removed->entries, 7u);  // 2 regions, 2 container folders, 2 records, the uid folder
  EXPECT_GE(removed->bytes, 2 * sizeof(region::Layout));
  EXPECT_EQ(RemoveRegionFolder(root.path(), kUidA).status().code(), StatusCode::kNotFound);
}

TEST(RemoveRegionFolderTest, NeverFollowsASymlinkNorTouchesOtherNames) {
  TempDir root, outside;
  Touch(outside.path() + "/keep/file", "precious");
  // Inside a container folder (the container can write there): links to a
  // folder and to a file outside. Only the links go.
  MakeContainer(root.path(), kUidA, "main");
  fs::create_directory_symlink(outside.path() + "/keep", root.path() + "/" + kUidA + "/main/evil-dir");
  fs::create_symlink(outside.path() + "/keep/file", root.path() + "/" + kUidA + "/main/evil-file");
  fs::create_directory_symlink(outside.path(), root.path() + "/" + kUidA + "/linked-container");
  ASSERT_TRUE(RemoveRegionFolder(root.path(), kUidA).ok());
  EXPECT_FALSE(fs::exists(root.path() + "/" + kUidA));
  std::ifstream kept(outside.path() + "/keep/file");
  std::string text;
  kept >> text;
  EXPECT_EQ(text, "precious");
  // A uid folder that is itself a symlink is refused, link and target left.
  fs::create_directory_symlink(outside.path(), root.path() + "/" + kUidB);
  EXPECT_EQ(RemoveRegionFolder(root.path(), kUidB).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::is_symlink(root.path() + "/" + kUidB));
  EXPECT_TRUE(fs::exists(outside.path() + "/keep/file"));
  // A name that is not a pod uid is never removed.
  fs::create_directories(root.path() + "/lost+found/x");
  EXPECT_EQ(RemoveRegionFolder(root.path(), "lost+found").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoveRegionFolder(root.path(), "..").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(root.path() + "/lost+found/x"));
}

TEST(RemoveRegionFolderTest, RefusesNestingPastTheLimit) {
  TempDir root;
  std::string deep = root.path() + "/" + kUidA;
  for (int i = 0; i <= kMaxRegionDepth; ++i) deep += "/d";
  fs::create_directories(deep);
  auto removed = RemoveRegionFolder(root.path(), kUidA);
  EXPECT_EQ(removed.status().code(), StatusCode::kFailedPrecondition) << removed.status().ToString();
  EXPECT_NE(removed.status().message().find("deeper"), std::string::npos) << removed.status().message();
}

TEST(RegionInUseTest, ALiveRegisteredProcessKeepsItADeadOneDoesNot) {
  TempDir root;
  const std::string dir = root.path() + "/" + kUidA + "/main";
  MakeContainer(root.path(), kUidA, "main");
  auto r = region::Region::OpenExisting(dir);
  ASSERT_TRUE(r.ok());
  auto none = RegionInUse(root.path(), kUidA);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  // A process of the container, alive.
  auto slot = region::RegisterProcess(*r->layout(), getpid());
  ASSERT_TRUE(slot.ok());
  auto live = RegionInUse(root.path(), kUidA);
  ASSERT_TRUE(live.ok() && live->has_value());
  EXPECT_EQ((*live)->pid, getpid());
  EXPECT_EQ((*live)->region, dir + "/" + region::kFileName);
  region::ReleaseProcess(*r->layout(), *slot);
  // A process that registered and was killed (its slot left behind).
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  ASSERT_TRUE(region::RegisterProcess(*r->layout(), child).ok());
  EXPECT_TRUE(RegionInUse(root.path(), kUidA)->has_value());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto dead = RegionInUse(root.path(), kUidA);
  ASSERT_TRUE(dead.ok());
  EXPECT_FALSE(dead->has_value());
  // A pid reused by another process (its start time differs) is not the one registered.
  r->layout()->procs[0].pid = getpid();
  r->layout()->procs[0].start_time = 1;
  EXPECT_FALSE(RegionInUse(root.path(), kUidA)->has_value());
}

TEST(RegionInUseTest, FilesThatAreNotRegionsHoldNoProcess) {
  TempDir root, outside;
  fs::create_directories(root.path() + "/" + kUidA + "/garbage");
  Touch(root.path() + "/" + kUidA + "/garbage/" + region::kFileName, "not a region");
  fs::create_directories(root.path() + "/" + kUidA + "/linked");
  Touch(outside.path() + "/x");
  fs::create_symlink(outside.path() + "/x", root.path() + "/" + kUidA + "/linked/" + region::kFileName);
  fs::create_directory_symlink(outside.path(), root.path() + "/" + kUidA + "/dirlink");
  ASSERT_EQ(mkfifo((root.path() + "/" + kUidA + "/fifo-container").c_str(), 0600), 0);
  fs::create_directories(root.path() + "/" + kUidA + "/fifo");
  ASSERT_EQ(mkfifo((root.path() + "/" + kUidA + "/fifo/" + region::kFileName).c_str(), 0600), 0);
  auto user = RegionInUse(root.path(), kUidA);
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  EXPECT_FALSE(user->has_value());
  EXPECT_FALSE(RegionInUse(root.path(), kUidB)->has_value()) << "an absent folder holds none";
}

class RegionGcPassTest : public ::testing::Test {
 protected:
  RegionGc Gc(seconds grace = seconds(60)) {
    RegionGcOptions o;
    o.root = root.path();
    o.node = "n1";
    o.grace = grace;
    return RegionGc(o, std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()),
                    &removed);
  }
  ListPods Listing(PodViews pods) {
    return [pods = std::move(pods), this]() -> Result<PodViews> {
      ++lists;
      return pods;
    };
  }

  TempDir root, outside;
  metrics::Counter removed;
  int lists = 0;
  const GcClock::time_point t0 = GcClock::time_point{} + seconds(1000);
};

TEST_F(RegionGcPassTest, RemovesTheFoldersOfGonePodsAfterTheGraceOnly) {
  MakeContainer(root.path(), kUidA, "main");  // a pod of the node
  MakeContainer(root.path(), kUidB, "main");  // its pod was deleted
  MakeContainer(root.path(), kUidC, "main");  // deleted, but a process still runs in it
  auto rc = region::Region::OpenExisting(root.path() + "/" + kUidC + "/main");
  ASSERT_TRUE(rc.ok());
  auto slot = region::RegisterProcess(*rc->layout(), getpid());
  ASSERT_TRUE(slot.ok());
  fs::create_directories(root.path() + "/lost+found/x");                    // not a uid
  Touch(outside.path() + "/file");
  fs::create_directory_symlink(outside.path(), root.path() + "/" + kUidD);  // a symlink with a uid's name
  RegionGc gc = Gc();
  const PodViews pods = {Pod(kUidA)};
  // The watch has not synced: nothing is decided, however long it takes.
  gc.Pass(std::nullopt, Listing(pods), t0);
  gc.Pass(std::nullopt, Listing(pods), t0 + seconds(3600));
  EXPECT_TRUE(gc.MissingSinceForTest().empty());
  // Synced: B and C are missing from now on.
  gc.Pass(pods, Listing(pods), t0);
  gc.Pass(pods, Listing(pods), t0 + seconds(59));
  EXPECT_EQ(gc.MissingSinceForTest().size(), 2u);
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidB));
  EXPECT_EQ(lists, 0) << "no LIST until something is due";
  gc.Pass(pods, Listing(pods), t0 + seconds(60));
  EXPECT_EQ(lists, 1);
  EXPECT_FALSE(fs::exists(root.path() + "/" + kUidB));
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidC + "/main/" + region::kFileName)) << "a live process keeps it";
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidA + "/main.arbiter.json"));
  EXPECT_TRUE(fs::exists(root.path() + "/lost+found/x"));
  EXPECT_TRUE(fs::is_symlink(root.path() + "/" + kUidD));
  EXPECT_TRUE(fs::exists(outside.path() + "/file"));
  EXPECT_EQ(removed.Value(), 1u);
  // The process ends: the next pass removes C.
  region::ReleaseProcess(*rc->layout(), *slot);
  gc.Pass(pods, Listing(pods), t0 + seconds(90));
  EXPECT_FALSE(fs::exists(root.path() + "/" + kUidC));
  EXPECT_EQ(removed.Value(), 2u);
  EXPECT_TRUE(gc.MissingSinceForTest().empty());
}

TEST_F(RegionGcPassTest, AFreshListOverrulesALaggingCacheAndAFailedOneRemovesNothing) {
  MakeContainer(root.path(), kUidB, "main");
  RegionGc gc = Gc();
  gc.Pass(PodViews{}, Listing({}), t0);
  // Due, but the API server cannot be listed: kept.
  gc.Pass(PodViews{}, [] { return Result<PodViews>(Internal("down")); },
          t0 + seconds(60));
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidB));
  // Due, but a LIST now has the pod (the cache lags): kept, and its clock starts over.
  gc.Pass(PodViews{}, Listing({Pod(kUidB)}), t0 + seconds(61));
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidB));
  EXPECT_TRUE(gc.MissingSinceForTest().empty());
  gc.Pass(PodViews{}, Listing({}), t0 + seconds(62));
  gc.Pass(PodViews{}, Listing({}), t0 + seconds(121));
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidB));
  gc.Pass(PodViews{}, Listing({}), t0 + seconds(122));
  EXPECT_FALSE(fs::exists(root.path() + "/" + kUidB));
  EXPECT_EQ(removed.Value(), 1u);
}

// As the agent wires it: the LIST a removal waits for is the API server's
// (ListNodePods), here a fake one.
TEST_F(RegionGcPassTest, TheListBeforeARemovalAsksTheApiServer) {
  kube::FakeApi api;
  MakeContainer(root.path(), kUidB, "main");
  nlohmann::json pod = {{"metadata", {{"name", "b"}, {"uid", kUidB}}}, {"spec", {{"nodeName", "n1"}}}};
  ASSERT_TRUE(api.Upsert(kube::PodsPath("ns"), pod).ok());
  const ListPods list_now = [&api] { return ListNodePods(api, "n1"); };
  RegionGc gc = Gc();
  const PodViews lagging;  // the watch cache has not seen pod b
  gc.Pass(lagging, list_now, t0);
  gc.Pass(lagging, list_now, t0 + seconds(60));  // due, but the API server has b: kept
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidB));
  EXPECT_TRUE(gc.MissingSinceForTest().empty());
  ASSERT_TRUE(api.Remove(kube::PodPath("ns", "b")).ok());
  gc.Pass(lagging, list_now, t0 + seconds(61));
  api.SetHook([](const kube::FakeApi::Call&) { return Status(StatusCode::kUnavailable, "away"); });
  gc.Pass(lagging, list_now, t0 + seconds(121));  // due, but the API server cannot say: kept
  EXPECT_TRUE(fs::exists(root.path() + "/" + kUidB));
  api.SetHook(nullptr);
  gc.Pass(lagging, list_now, t0 + seconds(122));
  EXPECT_FALSE(fs::exists(root.path() + "/" + kUidB));
  EXPECT_EQ(removed.Value(), 1u);
  EXPECT_EQ(api.CountCalls("LIST"), 3);
}

TEST_F(RegionGcPassTest, AnAbsentRootIsNoError) {
  RegionGcOptions o;
  o.root = root.path() + "/absent";
  o.node = "n1";
  RegionGc gc(o, std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()), &removed);
  gc.Pass(PodViews{}, Listing({}), t0);
  EXPECT_FALSE(fs::exists(o.root)) << "never created";
  EXPECT_EQ(removed.Value(), 0u);
}

}  // namespace
}  // namespace tessera::node
