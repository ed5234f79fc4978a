#include "node/region_usage.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <filesystem>

#include "core/codec.h"
#include "metrics/registry.h"
#include "node/test_fixtures.h"
#include "node/usage_metrics.h"
#include "region/region.h"

namespace tessera::node {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr uint64_t kMiB = 1ull << 20;

json Pod(const std::string& name, const std::vector<core::ContainerAssignment>& containers,
         const std::string& allocated, const std::string& phase = "Running", const std::string& node = "n1") {
  json pod = {{"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", name + "-uid"}}},
              {"spec", {{"nodeName", node}}},
              {"status", {{"phase", phase}}}};
  pod["metadata"]["annotations"][std::string(core::kAssignmentAnnotation)] =
      *core::EncodeAssignment(core::Assignment{node, containers});
  pod["metadata"]["annotations"][std::string(core::kAllocatedAnnotation)] = allocated;
  return pod;
}

std::vector<core::GpuInfo> Gpus() {
  core::GpuInfo a;
  a.index = 0;
  a.uuid = "GPU-a";
  a.model = "A100";
  a.memory_mib = 40960;
  core::GpuInfo b = a;
  b.index = 1;
  b.uuid = "GPU-b";
  return {a, b};
}

// Regions by "uid/container".
struct FakeRegions {
  std::map<std::string, std::vector<RegionCounters>> by_container;
  RegionLookup Lookup() const {
    return [this](const std::string& uid, const std::string& container,
                  int n) -> std::optional<std::vector<RegionCounters>> {
      auto it = by_container.find(uid + "/" + container);
      if (it == by_container.end()) return std::nullopt;
      std::vector<RegionCounters> out = it->second;
      out.resize(static_cast<size_t>(n));
      return out;
    };
  }
};

RegionCounters Used(uint64_t mib, uint64_t gpu_us = 0, uint64_t refusals = 0) {
  RegionCounters c;
  c.used_bytes = mib * kMiB;
  c.peak_bytes = mib * kMiB;
  c.gpu_us = gpu_us;
  c.oom_refusals = refusals;
  return c;
}

const auto kT0 = std::chrono::steady_clock::time_point() + std::chrono::hours(1);
const core::WallTime kWall = core::WallTime() + std::chrono::seconds(1'790'000'000);

TEST(ActiveAssignmentsTest, KeepsAllocatedContainersOfLivePodsOnThisNode) {
  std::vector<json> items = {
      Pod("run", {{"main", {{0, "GPU-a", 4096, 300}}}, {"side", {{1, "GPU-b", 1024, 100}}}}, "main"),
      Pod("done", {{"main", {{0, "GPU-a", 1024, 100}}}}, "main", "Succeeded"),
      Pod("waiting", {{"main", {{0, "GPU-a", 1024, 100}}}}, ""),
      Pod("elsewhere", {{"main", {{0, "GPU-z", 1, 1}}}}, "main", "Running", "n2"),
  };
  json bare = {{"metadata", {{"namespace", "ns"}, {"name", "bare"}}}, {"spec", {{"nodeName", "n1"}}}};
  items.push_back(bare);
  std::vector<PodAssignment> pods = ActiveAssignments(testing::DecodedAll(items), "n1");
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0].name, "run");
  ASSERT_EQ(pods[0].assignment->containers.size(), 1u);  // "side" is not allocated yet
  EXPECT_EQ(pods[0].assignment->containers[0].name, "main");
}

TEST(JoinUsageTest, JoinsSharesWithRegionsAndSumsPerGpu) {
  std::vector<json> items = {
      Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}, {1, "GPU-b", 4096, 300}}}}, "main"),
      Pod("p2", {{"main", {{0, "GPU-a", 8192, 500}}}}, "main"),
  };
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(1000), Used(10)};
  // p2 has no region yet: its share counts, its usage does not.
  UsageSnapshot s = JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), Gpus(), regions.Lookup(), kWall, kT0, nullptr);
  ASSERT_EQ(s.containers.size(), 3u);
  EXPECT_EQ(s.containers[0].pod.name, "p1");
  EXPECT_EQ(s.containers[0].ordinal, 0);
  EXPECT_EQ(s.containers[0].gpu.uuid, "GPU-a");
  EXPECT_TRUE(s.containers[0].measured);
  EXPECT_EQ(s.containers[0].limit_bytes, 4096 * kMiB);
  EXPECT_DOUBLE_EQ(s.containers[0].core_share, 0.3);
  EXPECT_EQ(s.containers[1].ordinal, 1);
  EXPECT_EQ(s.containers[1].gpu.uuid, "GPU-b");
  EXPECT_EQ(s.containers[1].counters.used_bytes, 10 * kMiB);
  EXPECT_FALSE(s.containers[2].measured);
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].used_bytes, 1000 * kMiB);
  EXPECT_EQ(s.gpus[0].allocated_bytes, (4096 + 8192) * kMiB);
  EXPECT_DOUBLE_EQ(s.gpus[0].core_allocated, 0.8);
  EXPECT_EQ(s.gpus[0].containers, 2);
  EXPECT_EQ(s.gpus[1].containers, 1);
}

TEST(JoinUsageTest, UtilizationIsGpuTimeOverWallTimeSinceThePreviousSnapshot) {
  std::vector<json> items = {Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}}}}, "main"),
                             Pod("p2", {{"main", {{0, "GPU-a", 4096, 700}}}}, "main")};
  auto pods = ActiveAssignments(testing::DecodedAll(items), "n1");
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(1, 1'000'000)};
  regions.by_container["p2-uid/main"] = {Used(1, 5'000'000)};
  UsageSnapshot first = JoinUsage(pods, Gpus(), regions.Lookup(), kWall, kT0, nullptr);
  EXPECT_DOUBLE_EQ(first.containers[0].utilization, 0);
  regions.by_container["p1-uid/main"] = {Used(1, 1'500'000)};  // +0.5 s of GPU time in 2 s
  regions.by_container["p2-uid/main"] = {Used(1, 6'500'000)};  // +1.5 s
  UsageSnapshot second = JoinUsage(pods, Gpus(), regions.Lookup(), kWall, kT0 + std::chrono::seconds(2), &first);
  EXPECT_DOUBLE_EQ(second.containers[0].utilization, 0.25);
  EXPECT_DOUBLE_EQ(second.containers[1].utilization, 0.75);
  EXPECT_DOUBLE_EQ(second.gpus[0].utilization, 1.0);
  // A region made anew (the counter went back) has no rate yet.
  regions.by_container["p1-uid/main"] = {Used(1, 10)};
  UsageSnapshot third = JoinUsage(pods, Gpus(), regions.Lookup(), kWall, kT0 + std::chrono::seconds(4), &second);
  EXPECT_DOUBLE_EQ(third.containers[0].utilization, 0);
}

TEST(JoinUsageTest, TheDevicesOwnLoadReplacesTheRegionSums) {
  std::vector<json> items = {Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}}}}, "main")};
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(1000)};
  GpuLoad a;
  a.index = 0;
  a.memory_used_bytes = 1500 * kMiB;  // the container's 1000 MiB and a context's worth more
  a.utilization = 0.42;
  GpuLoad b;
  b.index = 1;
  b.memory_used_bytes = 7 * kMiB;  // no utilization from this one
  const std::vector<GpuLoad> load = {a, b};
  UsageSnapshot s =
      JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), Gpus(), regions.Lookup(), kWall, kT0, nullptr, &load);
  EXPECT_TRUE(s.gpus[0].device_measured);
  EXPECT_EQ(s.gpus[0].used_bytes, 1500 * kMiB);
  EXPECT_DOUBLE_EQ(s.gpus[0].utilization, 0.42);
  EXPECT_EQ(s.gpus[1].used_bytes, 7 * kMiB);
  EXPECT_DOUBLE_EQ(s.gpus[1].utilization, 0);
  EXPECT_EQ(s.containers[0].counters.used_bytes, 1000 * kMiB);  // the container's own stays the region's
}

TEST(JoinUsageTest, ShareOnAGpuTheNodeLacksIsLeftOut) {
  std::vector<json> items = {Pod("p1", {{"main", {{5, "GPU-gone", 1024, 100}}}}, "main")};
  UsageSnapshot s = JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), Gpus(), FakeRegions().Lookup(), kWall, kT0, nullptr);
  EXPECT_TRUE(s.containers.empty());
  EXPECT_EQ(s.gpus.size(), 2u);
}

TEST(OomRefusalTest, OnlyRefusalsSinceThePreviousSnapshotAreNew) {
  std::vector<json> items = {Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}}}}, "main")};
  auto pods = ActiveAssignments(testing::DecodedAll(items), "n1");
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(4000, 0, 2)};
  UsageSnapshot first = JoinUsage(pods, Gpus(), regions.Lookup(), kWall, kT0, nullptr);
  EXPECT_TRUE(NewOomRefusals(nullptr, first).empty());  // from before the agent started
  EXPECT_TRUE(NewOomRefusals(&first, first).empty());
  regions.by_container["p1-uid/main"] = {Used(4000, 0, 5)};
  UsageSnapshot second = JoinUsage(pods, Gpus(), regions.Lookup(), kWall, kT0 + milliseconds(100), &first);
  std::vector<OomRefusal> refusals = NewOomRefusals(&first, second);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].refused, 3u);
  const std::string message = OomRefusalMessage(refusals[0]);
  for (const char* part : {"container main", "3 GPU memory allocation(s) refused", "GPU 0 (GPU-a)", "4096 MiB",
                           "holds 4000 MiB", "tessera.io/gpu-mem"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
  }
}

TEST(PodUsagesTest, OneAnnotationPerPodFromMeasuredContainers) {
  std::vector<json> items = {
      Pod("p1", {{"a", {{0, "GPU-a", 4096, 300}}}, {"b", {{1, "GPU-b", 2048, 200}}}}, "a,b"),
      Pod("p2", {{"main", {{0, "GPU-a", 1024, 100}}}}, "main"),
  };
  FakeRegions regions;
  regions.by_container["p1-uid/a"] = {Used(100)};
  regions.by_container["p1-uid/b"] = {Used(200)};
  UsageSnapshot s = JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), Gpus(), regions.Lookup(), kWall, kT0, nullptr);
  std::map<std::string, core::PodUsage> usages = PodUsages(s);
  ASSERT_EQ(usages.size(), 1u);  // p2 has no region
  const core::PodUsage& u = usages["p1-uid"];
  EXPECT_EQ(u.at, kWall);
  ASSERT_EQ(u.containers.size(), 2u);
  EXPECT_EQ(u.containers[1].name, "b");
  ASSERT_EQ(u.containers[1].gpus.size(), 1u);
  EXPECT_EQ(u.containers[1].gpus[0].index, 1);
  EXPECT_EQ(u.containers[1].gpus[0].uuid, "GPU-b");
  EXPECT_EQ(u.containers[1].gpus[0].mem_used_mib, 200);
  EXPECT_TRUE(core::EncodeUsage(u).ok());
}

core::PodUsage OneGpu(int64_t mib, double utilization) {
  core::GpuUse use;
  use.index = 0;
  use.uuid = "GPU-a";
  use.mem_used_mib = mib;
  use.utilization = utilization;
  core::ContainerUsage c;
  c.name = "main";
  c.gpus = {use};
  core::PodUsage u;
  u.containers = {c};
  return u;
}

TEST(UsageChangedTest, MovesPastTheThresholdsCountTimeAloneDoesNot) {
  UsagePublishPolicy p;
  EXPECT_FALSE(UsageChanged(OneGpu(1000, 0.5), OneGpu(1000, 0.5), p));
  EXPECT_FALSE(UsageChanged(OneGpu(1000, 0.5), OneGpu(1063, 0.54), p));  // under 64 MiB and 0.05
  EXPECT_TRUE(UsageChanged(OneGpu(1000, 0.5), OneGpu(1064, 0.5), p));
  EXPECT_TRUE(UsageChanged(OneGpu(1000, 0.5), OneGpu(1000, 0.56), p));
  // Large values move by 5 % of themselves before they count.
  EXPECT_FALSE(UsageChanged(OneGpu(40000, 0.5), OneGpu(41000, 0.5), p));
  EXPECT_TRUE(UsageChanged(OneGpu(40000, 0.5), OneGpu(42000, 0.5), p));
  core::PodUsage two = OneGpu(1000, 0.5);
  two.containers[0].gpus.push_back(two.containers[0].gpus[0]);
  two.containers[0].gpus[1].index = 1;
  EXPECT_TRUE(UsageChanged(OneGpu(1000, 0.5), two, p));
  core::PodUsage later = OneGpu(1000, 0.5);
  later.at = kWall + std::chrono::hours(1);
  EXPECT_FALSE(UsageChanged(OneGpu(1000, 0.5), later, p));
}

TEST(ReadRegionCountersTest, ReadsAnExistingRegionAndNeverCreatesOne) {
  char tmpl[] = "/tmp/tessera-usage-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto none = ReadRegionCounters(dir, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  {
    auto r = region::Region::OpenDir(dir);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    r->layout()->gpus[1].used_bytes = 7 * kMiB;
    r->layout()->gpus[1].oom_refusals = 2;
    r->layout()->compute[1].used_us = 1234;
    r->layout()->compute[1].throttled_us = 99;
    r->layout()->compute[1].share_ppm = 300000;
    r->layout()->compute[1].grant_ppm = 800000;
    r->layout()->compute[1].held = 1;
  }
  auto read = ReadRegionCounters(dir, 2);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0], RegionCounters{});
  EXPECT_EQ((*read)[1].used_bytes, 7 * kMiB);
  EXPECT_EQ((*read)[1].oom_refusals, 2u);
  EXPECT_EQ((*read)[1].gpu_us, 1234u);
  EXPECT_EQ((*read)[1].throttled_us, 99u);
  // No arbiter has written a heartbeat: the static share is what the gate uses.
  EXPECT_EQ((*read)[1].granted_ppm, 300000u);
  EXPECT_FALSE((*read)[1].held);
  {
    auto r = region::Region::OpenExisting(dir);
    ASSERT_TRUE(r.ok());
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->layout()->arbiter.heartbeat_us = static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
    r->layout()->arbiter.lease_us = 60'000'000;
  }
  read = ReadRegionCounters(dir, 2);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ((*read)[1].granted_ppm, 800000u);  // the arbiter's grant while it is alive
  EXPECT_TRUE((*read)[1].held);
  EXPECT_FALSE(ReadRegionCounters(dir, region::kMaxGpus + 1).ok());
  std::filesystem::remove_all(dir);
}

TEST(ReadRegionCountersTest, ARegionRemovedUnderTheReaderIsNotFound) {
  // The region cleanup may remove a folder the usage pass is about to read:
  // NOT_FOUND, which the pass takes as "no region" (no warning).
  char tmpl[] = "/tmp/tessera-usage-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/main";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(region::Region::OpenDir(dir).ok());
  ASSERT_TRUE(ReadRegionCounters(dir, 1).ok());
  std::filesystem::remove_all(tmpl);
  EXPECT_EQ(ReadRegionCounters(dir, 1).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(tmpl)) << "never created";
}

TEST(UsageMetricsTest, SeriesFollowTheLatestSnapshot) {
  metrics::Registry registry;
  SnapshotStore store;
  ASSERT_TRUE(RegisterUsageMetrics(registry, "n1", store).ok());
  EXPECT_EQ(RegisterUsageMetrics(registry, "n1", store).code(), StatusCode::kAlreadyExists);
  EXPECT_NE(registry.Render().find("# TYPE tessera_container_gpu_seconds_total counter"), std::string::npos);

  std::vector<json> items = {Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}}}}, "main")};
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(1000, 2'500'000, 1)};
  std::vector<core::GpuInfo> gpus = Gpus();
  gpus[1].mps = true;  // GPU-b's MPS daemon runs
  store.Set(JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), gpus, regions.Lookup(), kWall, kT0, nullptr));
  const std::string text = registry.Render();
  const std::string labels = R"({node="n1",gpu="0",uuid="GPU-a",model="A100",namespace="ns",pod="p1",container="main"})";
  for (const std::string& line :
       {"tessera_container_gpu_memory_used_bytes" + labels + " 1048576000",
        "tessera_container_gpu_memory_limit_bytes" + labels + " 4294967296",
        "tessera_container_gpu_core_share_ratio" + labels + " 0.3",
        "tessera_container_gpu_seconds_total" + labels + " 2.5",
        "tessera_container_gpu_oom_refusals_total" + labels + " 1",
        std::string(R"(tessera_gpu_memory_total_bytes{node="n1",gpu="1",uuid="GPU-b",model="A100"} 42949672960)"),
        std::string(R"(tessera_gpu_containers{node="n1",gpu="0",uuid="GPU-a",model="A100"} 1)"),
        std::string(R"(tessera_gpu_mps_running{node="n1",gpu="0",uuid="GPU-a",model="A100"} 0)"),
        std::string(R"(tessera_gpu_mps_running{node="n1",gpu="1",uuid="GPU-b",model="A100"} 1)")}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\nin\n" << text;
  }
  store.Set(UsageSnapshot{});  // the pod went away: no stale series
  EXPECT_EQ(registry.Render().find("pod=\"p1\""), std::string::npos);
}

// A prepared claim's record: its shares and the pod it is reserved for.
ClaimRecord Claim(const std::string& name, std::vector<core::GpuShare> shares, const std::string& pod = "cp") {
  ClaimRecord r{GpuHolder{GpuHolder::Kind::kClaim, name + "-uid", "ns/" + name, std::move(shares)}, {}};
  if (!pod.empty()) r.pods.push_back({"ns", pod, pod + "-uid"});
  return r;
}

TEST(ClaimUsageTest, ClaimsAreRowsOfTheirOwnCountedInTheGpuTotals) {
  std::vector<json> items = {Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}}}}, "main")};
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(1000)};
  regions.by_container["c1-uid/claim"] = {Used(500), Used(20)};
  UsageSnapshot s = JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), Gpus(), regions.Lookup(), kWall,
                              kT0, nullptr);
  AddClaimUsage(s, {Claim("c1", {{0, "GPU-a", 8192, 300}, {1, "GPU-b", 2048, 0}}), Claim("c0", {{1, "GPU-b", 0, 0}}, ""),
                    Claim("gone", {{7, "GPU-z", 1, 1}})},
                regions.Lookup(), nullptr);
  ASSERT_EQ(s.containers.size(), 1u) << "claims are not containers";
  ASSERT_EQ(s.claims.size(), 3u);
  // By namespace, claim, ordinal; a claim reserved for no pod has no pod name.
  EXPECT_EQ(s.claims[0].claim, "c0");
  EXPECT_EQ(s.claims[0].pod.name, "");
  EXPECT_FALSE(s.claims[0].measured);
  EXPECT_EQ(s.claims[0].limit_bytes, 40960 * kMiB) << "no size: the whole card";
  const ContainerGpu& c = s.claims[1];
  EXPECT_EQ(c.claim, "c1");
  EXPECT_EQ(c.claim_uid, "c1-uid");
  EXPECT_EQ(c.pod, (PodRef{"ns", "cp", "cp-uid"}));
  EXPECT_EQ(c.container, "claim");
  EXPECT_EQ(c.ordinal, 0);
  EXPECT_TRUE(c.measured);
  EXPECT_EQ(c.counters.used_bytes, 500 * kMiB);
  EXPECT_EQ(c.limit_bytes, 8192 * kMiB);
  EXPECT_DOUBLE_EQ(c.core_share, 0.3);
  EXPECT_EQ(s.claims[2].ordinal, 1);
  EXPECT_EQ(s.claims[2].gpu.uuid, "GPU-b");
  EXPECT_EQ(s.claims[2].counters.used_bytes, 20 * kMiB);

  EXPECT_EQ(s.gpus[0].used_bytes, 1500 * kMiB);
  EXPECT_EQ(s.gpus[0].allocated_bytes, (4096 + 8192) * kMiB);
  EXPECT_DOUBLE_EQ(s.gpus[0].core_allocated, 0.6);
  EXPECT_EQ(s.gpus[0].containers, 1);
  EXPECT_EQ(s.gpus[0].claims, 1);
  EXPECT_EQ(s.gpus[1].claims, 2);
  EXPECT_EQ(s.gpus[1].allocated_bytes, (2048 + 40960) * kMiB);
}

TEST(ClaimUsageTest, UtilizationRefusalsAndTheAnnotationFollowClaimsToo) {
  FakeRegions regions;
  regions.by_container["c1-uid/claim"] = {Used(500, 0, 0)};
  UsageSnapshot before = JoinUsage({}, Gpus(), regions.Lookup(), kWall, kT0, nullptr);
  AddClaimUsage(before, {Claim("c1", {{0, "GPU-a", 1024, 300}})}, regions.Lookup(), nullptr);
  regions.by_container["c1-uid/claim"] = {Used(900, 500'000, 2)};
  UsageSnapshot now = JoinUsage({}, Gpus(), regions.Lookup(), kWall, kT0 + std::chrono::seconds(1), &before);
  AddClaimUsage(now, {Claim("c1", {{0, "GPU-a", 1024, 300}})}, regions.Lookup(), &before);
  ASSERT_EQ(now.claims.size(), 1u);
  EXPECT_DOUBLE_EQ(now.claims[0].utilization, 0.5);
  EXPECT_DOUBLE_EQ(now.gpus[0].utilization, 0.5);

  const std::vector<OomRefusal> refused = NewOomRefusals(&before, now);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].refused, 2u);
  EXPECT_EQ(refused[0].share.pod.name, "cp");
  const std::string message = OomRefusalMessage(refused[0]);
  EXPECT_NE(message.find("claim c1: 2 GPU memory allocation(s) refused"), std::string::npos) << message;
  EXPECT_NE(message.find("capacity.requests.memory"), std::string::npos) << message;

  const auto usages = PodUsages(now);
  ASSERT_EQ(usages.count("cp-uid"), 1u);
  const core::PodUsage& pod = usages.at("cp-uid");
  ASSERT_EQ(pod.containers.size(), 1u);
  EXPECT_EQ(pod.containers[0].name, "claim/c1");
  EXPECT_EQ(pod.containers[0].gpus[0].mem_used_mib, 900);
  EXPECT_TRUE(core::EncodeUsage(pod).ok());
}

TEST(ClaimUsageTest, TheDevicesOwnLoadIsNotAddedTo) {
  FakeRegions regions;
  regions.by_container["c1-uid/claim"] = {Used(500)};
  const std::vector<GpuLoad> load = {{0, 7000 * kMiB, 0.25}};
  UsageSnapshot s = JoinUsage({}, Gpus(), regions.Lookup(), kWall, kT0, nullptr, &load);
  AddClaimUsage(s, {Claim("c1", {{0, "GPU-a", 1024, 300}})}, regions.Lookup(), nullptr);
  EXPECT_EQ(s.gpus[0].used_bytes, 7000 * kMiB);
  EXPECT_DOUBLE_EQ(s.gpus[0].utilization, 0.25);
  EXPECT_EQ(s.gpus[0].allocated_bytes, 1024 * kMiB);
}

TEST(UsageMetricsTest, ClaimsHaveSeriesOfTheirOwnAndCountInTheGpuSeries) {
  metrics::Registry registry;
  SnapshotStore store;
  ASSERT_TRUE(RegisterUsageMetrics(registry, "n1", store).ok());
  std::vector<json> items = {Pod("p1", {{"main", {{0, "GPU-a", 4096, 300}}}}, "main")};
  FakeRegions regions;
  regions.by_container["p1-uid/main"] = {Used(1000)};
  regions.by_container["c1-uid/claim"] = {Used(500, 1'000'000, 3)};
  UsageSnapshot s = JoinUsage(ActiveAssignments(testing::DecodedAll(items), "n1"), Gpus(), regions.Lookup(), kWall,
                              kT0, nullptr);
  AddClaimUsage(s, {Claim("c1", {{0, "GPU-a", 8192, 200}})}, regions.Lookup(), nullptr);
  store.Set(std::move(s));
  const std::string text = registry.Render();
  const std::string gpu = R"({node="n1",gpu="0",uuid="GPU-a",model="A100"})";
  const std::string claim = R"({node="n1",gpu="0",uuid="GPU-a",model="A100",namespace="ns",claim="c1",pod="cp"})";
  const std::string container =
      R"({node="n1",gpu="0",uuid="GPU-a",model="A100",namespace="ns",pod="p1",container="main"})";
  for (const std::string& line : {"tessera_claim_gpu_memory_used_bytes" + claim + " 524288000",
                                  "tessera_claim_gpu_memory_limit_bytes" + claim + " 8589934592",
                                  "tessera_claim_gpu_core_share_ratio" + claim + " 0.2",
                                  "tessera_claim_gpu_seconds_total" + claim + " 1",
                                  "tessera_claim_gpu_oom_refusals_total" + claim + " 3",
                                  "tessera_container_gpu_memory_used_bytes" + container + " 1048576000",
                                  "tessera_gpu_memory_used_bytes" + gpu + " 1572864000",
                                  "tessera_gpu_memory_allocated_bytes" + gpu + " 12884901888",
                                  "tessera_gpu_core_allocated_ratio" + gpu + " 0.5",
                                  "tessera_gpu_containers" + gpu + " 1",
                                  "tessera_gpu_claims" + gpu + " 1"}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\nin\n" << text;
  }
  EXPECT_EQ(text.find("tessera_container_gpu_memory_used_bytes{node=\"n1\",gpu=\"0\",uuid=\"GPU-a\",model=\"A100\","
                      "namespace=\"ns\",pod=\"cp\""),
            std::string::npos)
      << "a claim is not a container";
}

}  // namespace
}  // namespace tessera::node
