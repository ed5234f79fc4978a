// One node serving both ways of asking for a share: DRA claims prepared by
// the kubelet plugin and device-plugin pods booked by the Allocator count
// against each other in the node's one GpuBook, so neither over-commits a
// GPU the other holds; the book survives an agent restart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/codec.h"
#include "dra/kubelet_plugin.h"
#include "dra/test_support.h"
#include "kube/paths.h"
#include "node/gpu_book.h"

namespace tessera::dra {
namespace {

namespace fs = std::filesystem;

// A device-plugin pod on node-1 holding `mem_mib` MiB and `core_percent` %
// of GPU `gpu` (dra::testing::TwoGpus' uuids), its container allocated when
// `allocated`.
nlohmann::json DevicePluginPod(const std::string& name, int gpu, int64_t mem_mib, int core_percent, bool allocated,
                               const std::string& phase = "Running") {
  const std::string uuid = testing::TwoGpus()[static_cast<size_t>(gpu)].uuid;
  core::Assignment assignment{"node-1", {{"main", {{gpu, uuid, mem_mib, core_percent * 10}}}}};
  nlohmann::json annotations = {{"tessera.io/assignment", core::EncodeAssignment(assignment).value()}};
  if (allocated) annotations["tessera.io/allocated"] = "main";
  nlohmann::json limits = {{"tessera.io/gpu", "1"},
                           {"tessera.io/gpu-mem", std::to_string(mem_mib)},
                           {"tessera.io/gpu-core", std::to_string(core_percent)}};
  return {{"metadata", {{"name", name}, {"namespace", "ns"}, {"annotations", annotations}}},
          {"spec", {{"nodeName", "node-1"}, {"containers", {{{"name", "main"}, {"resources", {{"limits", limits}}}}}}}},
          {"status", {{"phase", phase}}}};
}

class MixedNodeTest : public testing::PluginTest {
 protected:
  void AddClaim(const std::string& name, const std::string& uid, const std::string& device, const std::string& memory,
                const std::string& compute) {
    PluginTest::AddClaim(testing::Claim("ns", name, uid, {testing::Result(device, memory, compute)}));
  }
  std::string AddPod(const nlohmann::json& pod) {
    return api_.Upsert(kube::PodsPath("ns"), pod).value()["metadata"]["uid"].get<std::string>();
  }
  bool SpecWritten(const std::string& uid) { return fs::exists(options_.cdi_dir + "/" + CdiSpecFileName(uid)); }

  node::GpuBook book_;  // the Allocator's, in tessera-node
};

TEST_F(MixedNodeTest, AClaimIsNotPreparedOnMemoryAnAllocatedDevicePluginPodHolds) {
  AddPod(DevicePluginPod("dp", 0, 36864, 30, /*allocated=*/true));
  AddPod(DevicePluginPod("unallocated", 1, 40960, 100, /*allocated=*/false));  // holds nothing yet
  AddPod(DevicePluginPod("finished", 1, 40960, 100, true, "Succeeded"));      // holds nothing any more
  AddClaim("c", "uid-c", "gpu-0", "8Gi", "30");
  AddClaim("d", "uid-d", "gpu-1", "8Gi", "30");
  DraService service(api_, options_, testing::Quiet(), &book_);
  service.SetGpus(testing::TwoGpus());

  auto refused = service.Prepare({"ns", "c", "uid-c"});
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "claim ns/c (uid uid-c): claim ns/c cannot have 8192 MiB and 30 percent of GPU 0 (GPU-aaaa): 36864 MiB "
            "of its 40960 MiB are held by pod ns/dp (36864 MiB and 30 percent); together over its memory");
  EXPECT_FALSE(SpecWritten("uid-c"));  // nothing written
  EXPECT_FALSE(fs::exists(options_.paths.region_root_host + "/dra/uid-c"));

  EXPECT_TRUE(service.Prepare({"ns", "d", "uid-d"}).ok());  // GPU 1: the pods there hold nothing
  EXPECT_TRUE(SpecWritten("uid-d"));
}

TEST_F(MixedNodeTest, APreparedClaimKeepsTheAllocatorFromHandingOutItsShareUntilUnprepared) {
  AddClaim("c", "uid-c", "gpu-1", "", "80");  // memory: the whole card (the slice's default)
  DraService service(api_, options_, testing::Quiet(), &book_);
  service.SetGpus(testing::TwoGpus());
  ASSERT_TRUE(service.Prepare({"ns", "c", "uid-c"}).ok());

  // What the Allocator books for a pod at its first Allocate.
  const std::string uid = AddPod(DevicePluginPod("dp", 1, 1024, 30, false));
  auto pod = node::testing::Decoded(*api_.Peek(kube::PodPath("ns", "dp")));
  auto holder = node::HolderOfPod(*pod, "node-1");
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  Status st = book_.Book(*holder, testing::TwoGpus());
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "pod ns/dp cannot have 1024 MiB and 30 percent of GPU 1 (GPU-bbbb): 40960 MiB of its 40960 MiB are "
            "held by claim ns/c (40960 MiB and 80 percent); together over its memory");

  ASSERT_TRUE(service.Unprepare({"ns", "c", "uid-c"}).ok());
  EXPECT_TRUE(book_.Book(*holder, testing::TwoGpus()).ok());
  // And now the pod, booked but not yet marked allocated, holds its share against a new claim.
  AddClaim("e", "uid-e", "gpu-1", "40Gi", "");
  EXPECT_EQ(service.Prepare({"ns", "e", "uid-e"}).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(uid, holder->uid);
}

TEST_F(MixedNodeTest, ARepeatedPrepareIsNotCheckedAgainstItself) {
  AddClaim("c", "uid-c", "gpu-0", "40Gi", "100");
  DraService service(api_, options_, testing::Quiet(), &book_);
  service.SetGpus(testing::TwoGpus());
  ASSERT_TRUE(service.Prepare({"ns", "c", "uid-c"}).ok());
  EXPECT_TRUE(service.Prepare({"ns", "c", "uid-c"}).ok());
  EXPECT_EQ(book_.Holders().size(), 1u);
}

TEST_F(MixedNodeTest, AgentRestartBooksThePreparedClaimsAgainFromTheirRecords) {
  AddClaim("c", "uid-c", "gpu-0", "30Gi", "50");
  {
    DraService before(api_, options_, testing::Quiet());  // the agent before the restart, with its own book
    before.SetGpus(testing::TwoGpus());
    ASSERT_TRUE(before.Prepare({"ns", "c", "uid-c"}).ok());
  }
  // A record left that is not one: skipped, not fatal.
  fs::create_directories(options_.paths.region_root_host + "/dra/junk");
  { std::ofstream(options_.paths.region_root_host + "/dra/junk/holder.json") << "{not json"; }

  DraService after(api_, options_, testing::Quiet(), &book_);
  after.SetGpus(testing::TwoGpus());
  ASSERT_TRUE(after.RestorePrepared().ok());
  const std::vector<node::GpuHolder> holders = book_.Holders();
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].Describe(), "claim ns/c");
  EXPECT_EQ(holders[0].shares, (std::vector<core::GpuShare>{{0, "GPU-aaaa", 30720, 500}}));
  EXPECT_FALSE(book_.Book({node::GpuHolder::Kind::kPod, "p", "ns/p", {{0, "GPU-aaaa", 16384, 0}}},
                          testing::TwoGpus())
                   .ok());
  ASSERT_TRUE(after.Unprepare({"ns", "c", "uid-c"}).ok());
  EXPECT_TRUE(book_.Holders().empty());
  EXPECT_FALSE(fs::exists(options_.paths.region_root_host + "/dra/uid-c"));  // the record went with the folder
}

TEST_F(MixedNodeTest, ThePodListUnreadableRefusesThePrepareWithTheReason) {
  AddClaim("c", "uid-c", "gpu-0", "1Gi", "");
  api_.SetHook([](const kube::FakeApi::Call& call) -> Status {
    if (call.verb == "LIST" && call.path.find("/pods") != std::string::npos) return Internal("apiserver down");
    return Status::Ok();
  });
  DraService service(api_, options_, testing::Quiet(), &book_);
  service.SetGpus(testing::TwoGpus());
  auto refused = service.Prepare({"ns", "c", "uid-c"});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("listing the node's pods"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(SpecWritten("uid-c"));
  EXPECT_TRUE(book_.Holders().empty());
}

// The slice publishes what the book's device-plugin pods leave of each GPU:
// pods found by the plugin's pod LIST (the first at Start) and pods the
// Allocator books are subtracted, one patch for changes close together;
// deleted pods leave the book at the next LIST and give their room back;
// a GPU the pods fill is tainted. Prepared claims change nothing (the
// scheduler subtracts them).
class SliceFollowsPodsTest : public MixedNodeTest {
 protected:
  SliceFollowsPodsTest() {
    options_.republish_delay = std::chrono::milliseconds(30);
    options_.pod_list_interval = std::chrono::milliseconds(50);
  }
  const std::string path_ = ResourceSlicePath("node-1-gpu.tessera.io");
  // gpu-<index>'s "memory compute [tainted]" in the slice now.
  std::string Offered(int index) {
    auto slice = api_.Peek(path_);
    if (!slice) return "no slice";
    for (const nlohmann::json& d : (*slice)["spec"]["devices"]) {
      if (d["name"] != DeviceName(index)) continue;
      return d["capacity"]["memory"]["value"].get<std::string>() + " " +
             d["capacity"]["compute"]["value"].get<std::string>() + (d.contains("taints") ? " tainted" : "");
    }
    return "no device";
  }
  int64_t Generation() { return (*api_.Peek(path_))["spec"]["pool"]["generation"].get<int64_t>(); }
  bool WaitFor(int index, const std::string& want) {
    for (int i = 0; i < 300; ++i) {
      if (Offered(index) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

TEST_F(SliceFollowsPodsTest, PodsListedAtStartAreSubtractedAndDeletedOnesGiveTheirRoomBack) {
  AddPod(DevicePluginPod("dp", 0, 16384, 40, /*allocated=*/true));
  AddPod(DevicePluginPod("unallocated", 1, 8192, 10, /*allocated=*/false));  // holds nothing yet
  KubeletPlugin plugin(api_, options_, testing::Quiet(), &book_);
  ASSERT_TRUE(plugin.SetGpus(testing::TwoGpus()).ok());
  EXPECT_EQ(Offered(0), "40960Mi 100");  // before any LIST the book knows no pod
  ASSERT_TRUE(plugin.Start().ok());
  EXPECT_TRUE(WaitFor(0, "24576Mi 60")) << Offered(0);
  EXPECT_EQ(Offered(1), "40960Mi 100");
  const nlohmann::json device = (*api_.Peek(path_))["spec"]["devices"][0];
  EXPECT_EQ(device["capacity"]["memory"]["requestPolicy"]["validRange"]["max"], "24576Mi");
  EXPECT_EQ(device["capacity"]["memory"]["requestPolicy"]["default"], "24576Mi");

  // A claim prepared on the same GPU: the slice stays (kube-scheduler counts it).
  AddClaim("c", "uid-c", "gpu-0", "8Gi", "30");
  const int64_t before_claim = Generation();
  ASSERT_TRUE(plugin.dra().Prepare({"ns", "c", "uid-c"}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // three LISTs
  EXPECT_EQ(Generation(), before_claim);
  EXPECT_EQ(Offered(0), "24576Mi 60");

  // The pod deleted (no phase of its own): the next LIST drops it.
  ASSERT_TRUE(api_.Remove(kube::PodPath("ns", "dp")).ok());
  EXPECT_TRUE(WaitFor(0, "40960Mi 100")) << Offered(0);
  EXPECT_EQ(Generation(), before_claim + 1);
  plugin.Stop();
}

TEST_F(SliceFollowsPodsTest, PodsTheAllocatorBooksArePublishedInOnePatchAndAFullGpuIsTainted) {
  options_.pod_list_interval = std::chrono::milliseconds(0);  // no LIST: only the Allocator's bookings
  options_.republish_delay = std::chrono::milliseconds(100);
  KubeletPlugin plugin(api_, options_, testing::Quiet(), &book_);
  ASSERT_TRUE(plugin.SetGpus(testing::TwoGpus()).ok());
  ASSERT_TRUE(plugin.Start().ok());
  const int64_t first = Generation();
  // Two pods booked a moment apart (as two Allocates): one write.
  ASSERT_TRUE(book_.Book({node::GpuHolder::Kind::kPod, "p1", "ns/p1", {{1, "GPU-bbbb", 20480, 500}}},
                         testing::TwoGpus())
                  .ok());
  ASSERT_TRUE(book_.Book({node::GpuHolder::Kind::kPod, "p2", "ns/p2", {{1, "GPU-bbbb", 0, 500}}},
                         testing::TwoGpus())
                  .ok());
  EXPECT_TRUE(WaitFor(1, "20480Mi 1 tainted")) << Offered(1);  // no compute left: full
  EXPECT_EQ(Generation(), first + 1);
  EXPECT_EQ((*api_.Peek(path_))["spec"]["devices"][1]["taints"],
            nlohmann::json::parse(R"([{"key": "gpu.tessera.io/held-by-device-plugin-pods", "effect": "NoSchedule"}])"));
  // The API server stamps the taint's timeAdded: not a change to put back.
  nlohmann::json stamped = *api_.Peek(path_);
  stamped["spec"]["devices"][1]["taints"][0]["timeAdded"] = "2026-11-27T06:00:00Z";
  ASSERT_TRUE(api_.Upsert(ResourceSlicesPath(), stamped).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ((*api_.Peek(path_))["spec"]["devices"][1]["taints"][0].value("timeAdded", ""), "2026-11-27T06:00:00Z");
  EXPECT_EQ(Generation(), first + 1);

  book_.Release("p2");  // an Allocate that failed after booking
  EXPECT_TRUE(WaitFor(1, "20480Mi 50")) << Offered(1);
  book_.Release("claim-uid-never-booked");  // nothing held: nothing written
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(Generation(), first + 2);
  plugin.Stop();
}

}  // namespace
}  // namespace tessera::dra
