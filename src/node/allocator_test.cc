// The Allocate handshake against a fake API server: which container an
// Allocate is for, the resourceVersion-guarded PATCH that marks it and what
// happens when that PATCH loses a race, refusals, and two resources through
// one Allocator.
#include "node/allocator.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kube/fake_api.h"
#include "kube/paths.h"
#include "node/slots.h"
#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using nlohmann::json;
using testing::AssignedPod;
using testing::TwoGpus;

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(regions_.path().empty());
    paths_.library_host = "/host/lib.so";
    paths_.preload_host = "/host/preload";
    paths_.region_root_host = regions_.path();
  }

  // An Allocator of node n1, not started: every read LISTs.
  Allocator& Make() {
    NodePodsOptions pods;
    pods.write_wait = std::chrono::milliseconds(20);
    allocator_ = std::make_unique<Allocator>(api_, "n1", paths_, testing::Quiet(), pods);
    allocator_->SetObserver([this](const Status& st, const std::vector<PodRef>& concerned) {
      observed_.push_back(st.code());
      observed_pods_ = concerned;
    });
    return *allocator_;
  }

  json Put(const json& pod) { return api_.Upsert(kube::PodsPath("ns"), pod).value(); }
  json Now(const std::string& name) { return *api_.Peek(kube::PodPath("ns", name)); }
  static std::string Allocated(const json& pod) {
    return pod["metadata"]["annotations"].value("tessera.io/allocated", std::string());
  }

  kube::FakeApi api_;  // outlives the allocator (declared first)
  testing::TempDir regions_;
  MountPaths paths_;
  std::unique_ptr<Allocator> allocator_;
  std::vector<StatusCode> observed_;
  std::vector<PodRef> observed_pods_;
};

TEST_F(AllocatorTest, IdentifiesThePendingContainerAndMarksItWithTheVersionItRead) {
  json pod = Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 1, 4096, 30}}));
  Allocator& allocator = Make();
  auto env = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 2)}, TwoGpus());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1");
  EXPECT_EQ(env->envs.at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "4096");
  EXPECT_EQ(env->envs.at("TESSERA_POD"), "ns/a");
  const std::string uid = pod["metadata"]["uid"];
  EXPECT_EQ(env->region_host_dir, regions_.path() + "/" + uid + "/main");
  EXPECT_TRUE(std::filesystem::is_directory(env->region_host_dir));
  EXPECT_TRUE(std::filesystem::exists(env->region_host_dir + ".arbiter.json"));

  EXPECT_EQ(Allocated(Now("a")), "main");
  const std::vector<kube::FakeApi::Call> calls = api_.Calls();
  ASSERT_EQ(api_.CountCalls("PATCH"), 1);
  const auto patch = std::find_if(calls.begin(), calls.end(), [](const auto& c) { return c.verb == "PATCH"; });
  EXPECT_EQ(patch->body["metadata"]["resourceVersion"], pod["metadata"]["resourceVersion"]);
  EXPECT_EQ(observed_, std::vector<StatusCode>{StatusCode::kOk});

  // Allocated: the same slots now match nothing, and nothing is marked again.
  std::vector<PodRef> named;
  auto again = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 2)}, TwoGpus(), &named);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(named.empty());
  EXPECT_EQ(api_.CountCalls("PATCH"), 1);
}

TEST_F(AllocatorTest, APatchThatLosesARaceIsRetriedOnTheFreshPod) {
  Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  int patches = 0;
  // Someone else writes the pod between the Allocator's read and its PATCH.
  api_.SetHook([&](const kube::FakeApi::Call& call) {
    if (call.verb == "PATCH" && patches++ == 0) {
      json raced = Now("a");
      raced["metadata"]["labels"]["raced"] = "yes";
      EXPECT_TRUE(api_.Upsert(kube::PodsPath("ns"), raced).ok());
    }
    return Status::Ok();
  });
  auto env = Make().Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(patches, 2) << "409, re-read, PATCH again";
  EXPECT_EQ(api_.CountCalls("GET"), 1);
  const json now = Now("a");
  EXPECT_EQ(Allocated(now), "main");
  EXPECT_EQ(now["metadata"]["labels"]["raced"], "yes") << "the other writer's change is kept";
}

TEST_F(AllocatorTest, APodReplacedDuringTheRaceIsNotMarked) {
  json old = Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  bool replaced = false;
  api_.SetHook([&](const kube::FakeApi::Call& call) {
    if (call.verb == "PATCH" && !replaced) {
      replaced = true;
      EXPECT_TRUE(api_.Remove(kube::PodPath("ns", "a")).ok());
      Put(AssignedPod("a", "2024-01-01T00:00:05Z", {{"main", 0, 4096, 30}}));  // a new uid
    }
    return Status::Ok();
  });
  std::vector<PodRef> named;
  auto env = Make().Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus(), &named);
  EXPECT_EQ(env.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(env.status().message().find("was replaced"), std::string::npos) << env.status().message();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].uid, old["metadata"]["uid"]);
  EXPECT_EQ(Allocated(Now("a")), "") << "the new pod is not marked for the old one's container";
}

TEST_F(AllocatorTest, AFightThatNeverEndsIsRefusedAfterFiveAttempts) {
  Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  int bumps = 0;
  api_.SetHook([&](const kube::FakeApi::Call& call) {
    if (call.verb == "PATCH") {
      json raced = Now("a");
      raced["metadata"]["labels"]["bump"] = std::to_string(++bumps);
      EXPECT_TRUE(api_.Upsert(kube::PodsPath("ns"), raced).ok());
    }
    return Status::Ok();
  });
  auto env = Make().Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus());
  EXPECT_EQ(env.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(env.status().message().find("still conflicting after 5 attempts"), std::string::npos)
      << env.status().message();
  EXPECT_EQ(api_.CountCalls("PATCH"), 5);
  EXPECT_EQ(Allocated(Now("a")), "");
  EXPECT_EQ(observed_, std::vector<StatusCode>{StatusCode::kFailedPrecondition});
}

TEST_F(AllocatorTest, AnApiServerAwayFailsTheAllocateWithItsError) {
  Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  api_.SetHook([](const kube::FakeApi::Call& call) {
    return call.verb == "LIST" ? Status(StatusCode::kUnavailable, "LIST /api/v1/pods: connection refused")
                               : Status::Ok();
  });
  std::vector<PodRef> named;
  auto env = Make().Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus(), &named);
  EXPECT_EQ(env.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(named.empty()) << "no pod was read, none is named";
  EXPECT_EQ(api_.CountCalls("PATCH"), 0);
}

TEST_F(AllocatorTest, APodThatSetsAReservedVariableIsRefusedAndThenLeftOut) {
  json pod = AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}});
  pod["spec"]["containers"][0]["env"] = json::array({{{"name", "TESSERA_GPU_MEM_LIMIT_MIB_0"}, {"value", "99999"}}});
  const std::string uid = Put(pod)["metadata"]["uid"];
  Allocator& allocator = Make();
  std::vector<PodRef> named;
  auto env = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus(), &named);
  EXPECT_EQ(env.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(env.status().message().find("TESSERA_GPU_MEM_LIMIT_MIB_0"), std::string::npos)
      << env.status().message();
  EXPECT_EQ(named, (std::vector<PodRef>{{"ns", "a", uid}}));
  EXPECT_EQ(observed_pods_, named) << "the observer (Events) is told which pod";
  EXPECT_EQ(api_.CountCalls("PATCH"), 0);
  EXPECT_FALSE(std::filesystem::exists(regions_.path() + "/" + uid)) << "no region for a refused pod";
  // The kubelet fails such a pod, but until then it looks pending: it is no
  // longer a candidate for the same slots.
  auto next = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus(), &named);
  EXPECT_EQ(next.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(named.empty());
}

// A running pod's assignment copied onto a second pod: the book, the one
// check against other holders, refuses it as a refused assignment (the
// code the agent's Events and metrics count), and it is left out after.
TEST_F(AllocatorTest, ACopiedAssignmentIsRefusedByTheBookAsNotHandedOut) {
  json holder = AssignedPod("holder", "2024-01-01T00:00:01Z", {{"main", 1, 4096, 60}});
  holder["metadata"]["annotations"]["tessera.io/allocated"] = "main";
  holder["status"]["phase"] = "Running";
  Put(holder);
  const std::string uid = Put(AssignedPod("copy", "2024-01-01T00:00:02Z", {{"main", 1, 4096, 60}}))["metadata"]["uid"];
  Allocator& allocator = Make();
  std::vector<PodRef> named;
  auto env = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 1)}, TwoGpus(), &named);
  EXPECT_EQ(env.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(env.status().message(),
            "pod ns/copy: its tessera.io/assignment is not handed out: it wants 60 percent of GPU 1 (GPU-1)'s "
            "compute, 60 percent of it already handed to 1 container(s): together over 100 percent");
  EXPECT_EQ(named, (std::vector<PodRef>{{"ns", "copy", uid}}));
  EXPECT_EQ(observed_, std::vector<StatusCode>{StatusCode::kPermissionDenied});
  EXPECT_EQ(api_.CountCalls("PATCH"), 0);
  EXPECT_EQ(allocator.book().Holders().size(), 1u);  // the holder only
  auto next = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 1)}, TwoGpus(), &named);
  EXPECT_EQ(next.status().code(), StatusCode::kFailedPrecondition);
}

// One Allocator serves every resource: each Allocate considers only the
// containers asking for its resource, even on the same GPU and slot count.
TEST_F(AllocatorTest, ADraClaimOnTheGpuRefusesThePodAndAnAllocatedPodIsBooked) {
  json refused_pod = Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 8192, 30}}));
  Put(AssignedPod("b", "2024-01-01T00:00:02Z", {{"main", 1, 8192, 30}}));
  Allocator& allocator = Make();
  // A prepared claim (the DRA driver's) holds 80 % of GPU-0.
  ASSERT_TRUE(allocator.book().Book({GpuHolder::Kind::kClaim, "uid-c", "ns/c", {{0, "GPU-0", 1024, 800}}}, TwoGpus()).ok());
  std::vector<PodRef> named;
  auto env = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus(), &named);
  EXPECT_EQ(env.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(env.status().message(),
            "pod ns/a cannot have 8192 MiB and 30 percent of GPU 0 (GPU-0): 80 percent of its compute is held by "
            "claim ns/c (1024 MiB and 80 percent); together over 100 percent");
  const std::string uid = refused_pod["metadata"]["uid"];
  EXPECT_EQ(named, (std::vector<PodRef>{{"ns", "a", uid}}));
  EXPECT_EQ(api_.CountCalls("PATCH"), 0);
  EXPECT_FALSE(std::filesystem::exists(regions_.path() + "/" + uid)) << "no region for a refused pod";

  // GPU-1 is free: the pod is allocated and stays booked against claims.
  ASSERT_TRUE(allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 0)}, TwoGpus()).ok());
  EXPECT_EQ(allocator.book().Holders().size(), 2u);
  EXPECT_EQ(allocator.book().Book({GpuHolder::Kind::kClaim, "uid-d", "ns/d", {{1, "GPU-1", 12288, 0}}}, TwoGpus()).code(),
            StatusCode::kResourceExhausted);
}

TEST_F(AllocatorTest, APodBookedButNotMarkedIsReleased) {
  Put(AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 8192, 30}}));
  api_.SetHook([](const kube::FakeApi::Call& call) {
    return call.verb == "PATCH" ? Internal("apiserver down") : Status::Ok();
  });
  Allocator& allocator = Make();
  EXPECT_FALSE(allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus()).ok());
  EXPECT_TRUE(allocator.book().Holders().empty());
}

// A pod deleted while the book held it: the watch cache cannot drop it from
// the book (gone and not yet seen look alike there), so the book's refusal
// is decided again on a LIST, which does.
TEST_F(AllocatorTest, ABookRefusalFromTheCacheRestsOnAFreshList) {
  Allocator& allocator = Make();
  json old_pod = AssignedPod("old", "2024-01-01T00:00:01Z", {{"main", 0, 12288, 30}});
  old_pod["metadata"]["annotations"]["tessera.io/allocated"] = "main";
  old_pod["status"]["phase"] = "Running";
  Put(old_pod);
  ASSERT_TRUE(allocator.Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return allocator.CachedPods().has_value(); }));
  Put(AssignedPod("first", "2024-01-01T00:00:02Z", {{"main", 1, 1024, 10}}));
  ASSERT_TRUE(testing::WaitUntil([&] { return allocator.CachedPods()->size() == 2; }));
  ASSERT_TRUE(allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 0)}, TwoGpus()).ok());
  ASSERT_EQ(allocator.book().Holders().size(), 2u);  // "old" (from the pod list) and "first"

  ASSERT_TRUE(api_.Remove(kube::PodPath("ns", "old")).ok());
  Put(AssignedPod("next", "2024-01-01T00:00:03Z", {{"main", 0, 8192, 30}}));
  ASSERT_TRUE(testing::WaitUntil([&] {
    auto cached = allocator.CachedPods();
    return cached->size() == 2 && std::none_of(cached->begin(), cached->end(), [](const auto& p) {
             return p->name == "old";
           });
  }));
  const int lists = api_.CountCalls("LIST");
  auto env = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 1)}, TwoGpus());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("TESSERA_POD"), "ns/next");
  EXPECT_EQ(api_.CountCalls("LIST"), lists + 1) << "one LIST, for the book's refusal";
  EXPECT_EQ(allocator.book().Holders().size(), 2u);  // "first" and "next"
}

TEST_F(AllocatorTest, TwoResourcesEachFindTheirOwnContainer) {
  paths_.resources.gpushare.enabled = true;
  Put(AssignedPod("tessera", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));  // older
  Put(AssignedPod("gpushare", "2024-01-01T00:00:02Z", {{"main", 0, 4096, 0, /*gpushare=*/true}}));
  Allocator& allocator = Make();
  auto share = allocator.Allocate("aliyun.com/gpu-mem", {SlotId("GPU-0", 0)}, TwoGpus());
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  EXPECT_EQ(share->envs.at("TESSERA_POD"), "ns/gpushare");
  EXPECT_EQ(share->envs.at("ALIYUN_COM_GPU_MEM_CONTAINER"), "4");
  auto own = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 1)}, TwoGpus());
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->envs.at("TESSERA_POD"), "ns/tessera");
  EXPECT_EQ(Allocated(Now("gpushare")), "main");
  EXPECT_EQ(Allocated(Now("tessera")), "main");
}

// Two pods want the same share: Allocate cannot tell them apart, unless
// GetPreferredAllocation steered the kubelet to those very slots for one.
TEST_F(AllocatorTest, PreferSteersToTheOldestAndBreaksTheTie) {
  Put(AssignedPod("young", "2024-01-01T00:00:09Z", {{"main", 0, 4096, 30}}));
  Put(AssignedPod("old", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  Allocator& allocator = Make();
  std::vector<PodRef> named;
  auto tie = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 3)}, TwoGpus(), &named);
  EXPECT_EQ(tie.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(named.size(), 2u) << tie.status().message();

  auto chosen = allocator.Prefer("tessera.io/gpu", {SlotId("GPU-1", 0), SlotId("GPU-0", 3), SlotId("GPU-0", 1)}, {}, 1);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(*chosen, std::vector<std::string>{SlotId("GPU-0", 3)});
  auto old = allocator.Allocate("tessera.io/gpu", *chosen, TwoGpus());
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->envs.at("TESSERA_POD"), "ns/old");
  auto young = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 1)}, TwoGpus());
  ASSERT_TRUE(young.ok()) << young.status().ToString();
  EXPECT_EQ(young->envs.at("TESSERA_POD"), "ns/young");

  // Nothing left to steer to: no preference, the kubelet chooses.
  auto none = allocator.Prefer("tessera.io/gpu", {SlotId("GPU-0", 0)}, {}, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Started, the Allocator reads its watch cache; a pod the cache has not
// seen yet is found by a LIST before anything is refused.
TEST_F(AllocatorTest, TheCacheIsReadFirstAndARefusalRestsOnAFreshList) {
  Allocator& allocator = Make();
  ASSERT_TRUE(allocator.Start().ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return allocator.CachedPods().has_value(); }));
  api_.HoldWatches(true);  // the cache lags from here on
  Put(AssignedPod("late", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
  const int lists = api_.CountCalls("LIST");
  auto env = allocator.Allocate("tessera.io/gpu", {SlotId("GPU-0", 0)}, TwoGpus());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->envs.at("TESSERA_POD"), "ns/late");
  EXPECT_EQ(api_.CountCalls("LIST"), lists + 1) << "the cache first, then one LIST";
  api_.HoldWatches(false);
  // Caught up (our own write included), the cache answers alone.
  const std::string rv = Now("late")["metadata"]["resourceVersion"];
  ASSERT_TRUE(testing::WaitUntil([&] {
    auto cached = allocator.CachedPods();
    return cached && cached->size() == 1 && (*cached)[0]->resource_version == rv;
  }));
  Put(AssignedPod("next", "2024-01-01T00:00:02Z", {{"main", 1, 4096, 30}}));
  ASSERT_TRUE(testing::WaitUntil([&] { return allocator.CachedPods()->size() == 2; }));
  const int before = api_.CountCalls("LIST");
  EXPECT_TRUE(allocator.Allocate("tessera.io/gpu", {SlotId("GPU-1", 0)}, TwoGpus()).ok());
  EXPECT_EQ(api_.CountCalls("LIST"), before);
}

}  // namespace
}  // namespace tessera::node
