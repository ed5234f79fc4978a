// One usage pass at a time over a region in a temporary folder and a fake
// API server: the snapshot /metrics serves, the tessera.io/usage annotation
// (written when usage moved, never onto a newer pod of the same name) and
// the OOM-refusal Events.
#include "node/usage_reporter.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/codec.h"
#include "kube/fake_api.h"
#include "kube/paths.h"
#include "node/claim_record.h"
#include "node/node_pods.h"
#include "node/test_fixtures.h"
#include "region/region.h"

namespace tessera::node {
namespace {

using nlohmann::json;
using testing::AssignedPod;

constexpr uint64_t kMiB = 1ull << 20;

class UsageReporterTest : public ::testing::Test {
 protected:
  UsageReporterTest()
      : events_([this](const std::string& path, const json& body) { return api_.Create(path, body).status(); }, {},
                testing::Quiet()) {}

  void SetUp() override {
    // Pod a, its container allocated, with a share of GPU-0 and a region holding 1 GiB.
    json pod = AssignedPod("a", "t", {{"main", 0, 4096, 30}});
    pod["metadata"]["annotations"]["tessera.io/allocated"] = "main";
    pod["status"]["phase"] = "Running";
    uid_ = api_.Upsert(kube::PodsPath("ns"), pod).value()["metadata"]["uid"];
    const std::string dir = RegionHostDir(root_.path(), uid_, "main");
    std::filesystem::create_directories(dir);  // as Allocate leaves it
    auto region = region::Region::OpenDir(dir);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
    region_ = std::make_unique<region::Region>(std::move(region).value());
    region_->layout()->gpus[0].used_bytes = 1024 * kMiB;
  }

  UsageReporter Make() {
    UsageReporterOptions options;
    options.node = "n1";
    options.region_root = root_.path();
    options.annotation_interval = std::chrono::milliseconds(1);
    UsageSources sources;
    sources.pods = [this]() -> std::optional<PodViews> { return ListNodePods(api_, "n1").value(); };
    sources.gpus = [] { return testing::TwoGpus(); };
    sources.load = []() -> Result<std::vector<GpuLoad>> {
      return Status(StatusCode::kUnimplemented, "simulated GPUs measure no load");
    };
    return UsageReporter(options, api_, sources, events_, store_, testing::Quiet());
  }
  core::PodUsage Published() {
    const json pod = *api_.Peek(kube::PodPath("ns", "a"));
    return core::DecodeUsage(pod["metadata"]["annotations"][std::string(core::kUsageAnnotation)].get<std::string>())
        .value();
  }
  std::vector<json> Events() {
    events_.FlushForTest();
    return api_.List(kube::EventsPath("ns")).value()["items"].get<std::vector<json>>();
  }

  kube::FakeApi api_;
  testing::TempDir root_;
  EventRecorder events_;
  SnapshotStore store_;
  std::string uid_;
  std::unique_ptr<region::Region> region_;
};

TEST_F(UsageReporterTest, APassPublishesTheSnapshotAndTheAnnotation) {
  UsageReporter usage = Make();
  usage.Pass();
  auto snapshot = store_.Get();
  ASSERT_EQ(snapshot->containers.size(), 1u);
  EXPECT_TRUE(snapshot->containers[0].measured);
  EXPECT_EQ(snapshot->containers[0].counters.used_bytes, 1024 * kMiB);
  ASSERT_EQ(snapshot->gpus.size(), 2u);
  EXPECT_EQ(snapshot->gpus[0].containers, 1);

  core::PodUsage published = Published();
  ASSERT_EQ(published.containers.size(), 1u);
  EXPECT_EQ(published.containers[0].name, "main");
  EXPECT_EQ(published.containers[0].gpus[0].mem_used_mib, 1024);
  // Written with the pod's uid as a precondition.
  const auto calls = api_.Calls();
  const auto patch = std::find_if(calls.begin(), calls.end(), [](const auto& c) { return c.verb == "PATCH"; });
  ASSERT_NE(patch, calls.end());
  EXPECT_EQ(patch->body["metadata"]["uid"], uid_);
  EXPECT_TRUE(Events().empty()) << "no refusal before a first snapshot to compare with";

  // Nothing moved: no write.
  usage.Pass();
  EXPECT_EQ(api_.CountCalls("PATCH"), 1);
}

TEST_F(UsageReporterTest, RefusalsAreRaisedAndMovedUsageIsWrittenAgain) {
  UsageReporter usage = Make();
  usage.Pass();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the annotation interval (1 ms)
  region_->layout()->gpus[0].used_bytes = 3072 * kMiB;
  region_->layout()->gpus[0].oom_refusals = 2;
  usage.Pass();
  std::vector<json> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], kOomRefusedReason);
  EXPECT_EQ(events[0]["involvedObject"]["uid"], uid_);
  EXPECT_EQ(api_.CountCalls("PATCH"), 2);
  EXPECT_EQ(Published().containers[0].gpus[0].mem_used_mib, 3072);
}

TEST_F(UsageReporterTest, AFailedWriteIsRetriedAndANewerPodIsNeverWritten) {
  UsageReporter usage = Make();
  api_.SetHook([](const kube::FakeApi::Call& call) {
    return call.verb == "PATCH" ? Status(StatusCode::kUnavailable, "away") : Status::Ok();
  });
  usage.Pass();
  api_.SetHook(nullptr);
  usage.Pass();  // not published yet: tried again
  EXPECT_EQ(api_.CountCalls("PATCH"), 2);
  EXPECT_EQ(Published().containers[0].gpus[0].mem_used_mib, 1024);

  // The pod is replaced by one of the same name while the pass still sees
  // the old one: the uid precondition keeps the new pod untouched.
  json old = *api_.Peek(kube::PodPath("ns", "a"));
  std::optional<PodViews> stale = testing::DecodedAll(json::array({old}));
  UsageReporterOptions options;
  options.node = "n1";
  options.region_root = root_.path();
  options.annotation_interval = std::chrono::milliseconds(1);
  UsageSources sources;
  sources.pods = [&stale] { return stale; };
  sources.gpus = [] { return testing::TwoGpus(); };
  sources.load = []() -> Result<std::vector<GpuLoad>> { return Status(StatusCode::kUnimplemented, "none"); };
  UsageReporter lagging(options, api_, sources, events_, store_, testing::Quiet());
  ASSERT_TRUE(api_.Remove(kube::PodPath("ns", "a")).ok());
  json fresh = AssignedPod("a", "t", {{"main", 0, 4096, 30}});
  ASSERT_TRUE(api_.Upsert(kube::PodsPath("ns"), fresh).ok());
  lagging.Pass();
  EXPECT_EQ(api_.CountCalls("PATCH"), 3) << "tried, refused by the uid precondition";
  EXPECT_FALSE((*api_.Peek(kube::PodPath("ns", "a")))["metadata"]["annotations"].contains(
      std::string(core::kUsageAnnotation)));
}

TEST_F(UsageReporterTest, APreparedClaimIsReadFromItsRecordAndRegion) {
  // As the DRA driver leaves a claim reserved for pod a: its record and its region.
  const ClaimRecord record{GpuHolder{GpuHolder::Kind::kClaim, "claim-uid", "ns/c", {{1, "", 2048, 100}}},
                           {{"ns", "a", uid_}}};
  std::filesystem::create_directories(ClaimRegionDir(root_.path(), "claim-uid"));
  {
    std::ofstream out(ClaimRecordPath(root_.path(), "claim-uid"));
    out << EncodeClaimRecord(record).dump();
  }
  auto region = region::Region::OpenDir(ClaimRegionDir(root_.path(), "claim-uid"));
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  region->layout()->gpus[0].used_bytes = 512 * kMiB;
  // A folder whose record cannot be read is skipped.
  std::filesystem::create_directories(ClaimsRoot(root_.path()) + "/bad");
  std::ofstream(ClaimRecordPath(root_.path(), "bad")) << "{";

  UsageReporter usage = Make();
  usage.Pass();
  auto snapshot = store_.Get();
  ASSERT_EQ(snapshot->claims.size(), 1u);
  EXPECT_EQ(snapshot->claims[0].claim, "c");
  EXPECT_EQ(snapshot->claims[0].pod.name, "a");
  EXPECT_EQ(snapshot->claims[0].counters.used_bytes, 512 * kMiB);
  EXPECT_EQ(snapshot->gpus[1].claims, 1);
  EXPECT_EQ(snapshot->gpus[1].allocated_bytes, 2048 * kMiB);

  core::PodUsage published = Published();
  ASSERT_EQ(published.containers.size(), 2u);
  EXPECT_EQ(published.containers[0].name, "main");
  EXPECT_EQ(published.containers[1].name, "claim/c");
  EXPECT_EQ(published.containers[1].gpus[0].mem_used_mib, 512);
}

}  // namespace
}  // namespace tessera::node
