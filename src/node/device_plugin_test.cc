// The device-plugin service's gRPC handlers, called as the kubelet's calls
// arrive (no socket), over a real Allocator and a fake API server: what the
// kubelet receives, and that every refusal reaches it as a gRPC error that
// says why.
#include "node/device_plugin.h"

#include <gtest/gtest.h>

#include "kube/fake_api.h"
#include "kube/paths.h"
#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using testing::AssignedPod;

class DevicePluginTest : public ::testing::Test {
 protected:
  DevicePluginTest()
      : allocator_(api_, "n1", Paths(), testing::Quiet()), service_(allocator_, "tessera.io/gpu", 4, testing::Quiet()) {
    EXPECT_TRUE(service_.SetGpus(testing::TwoGpus()).ok());
  }

  MountPaths Paths() {
    MountPaths paths;
    paths.region_root_host = regions_.path();
    return paths;
  }

  grpc::Status Allocate(const std::vector<std::vector<std::string>>& containers, v1beta1::AllocateResponse* out) {
    v1beta1::AllocateRequest request;
    for (const auto& ids : containers) {
      auto* c = request.add_container_requests();
      for (const auto& id : ids) c->add_devices_ids(id);
    }
    return service_.Allocate(nullptr, &request, out);
  }

  kube::FakeApi api_;
  testing::TempDir regions_;
  Allocator allocator_;
  DevicePluginService service_;
};

TEST_F(DevicePluginTest, OptionsOfferThePreferredAllocation) {
  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(service_.GetDevicePluginOptions(nullptr, nullptr, &options).ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());
  EXPECT_FALSE(options.pre_start_required());
}

TEST_F(DevicePluginTest, AllocateAnswersWithTheContainersEnvironmentAndMounts) {
  ASSERT_TRUE(api_.Upsert(kube::PodsPath("ns"), AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 1, 2048, 25}})).ok());
  v1beta1::AllocateResponse response;
  grpc::Status st = Allocate({{"GPU-1-3"}}, &response);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(response.container_responses_size(), 1);
  const auto& answer = response.container_responses(0);
  EXPECT_EQ(answer.envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-1");
  EXPECT_EQ(answer.envs().at("TESSERA_GPU_MEM_LIMIT_MIB_0"), "2048");
  EXPECT_EQ(answer.envs().at("TESSERA_GPU_CORE_PERCENT_0"), "25");
  ASSERT_EQ(answer.mounts_size(), 4);
  EXPECT_EQ(answer.mounts(0).container_path(), kLibraryContainerPath);
  EXPECT_EQ(answer.mounts(1).container_path(), kPreloadContainerPath);
  EXPECT_EQ(answer.mounts(2).container_path(), kRegionContainerPath);
  EXPECT_FALSE(answer.mounts(2).read_only());
  const std::string uid = (*api_.Peek(kube::PodPath("ns", "a")))["metadata"]["uid"];
  EXPECT_EQ(answer.mounts(2).host_path(), regions_.path() + "/" + uid + "/main");
}

TEST_F(DevicePluginTest, ARefusalGivesTheKubeletItsCodeAndReason) {
  v1beta1::AllocateResponse response;
  // No pending container wants GPU-0: the message names what was asked.
  grpc::Status none = Allocate({{"GPU-0-0"}}, &response);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(none.error_message().find("GPU-0"), std::string::npos) << none.error_message();

  // A slot ID that is not ours.
  grpc::Status bad = Allocate({{"not-a-slot"}}, &response);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("not-a-slot"), std::string::npos) << bad.error_message();

  // The API server away: the kubelet may retry (UNAVAILABLE), and hears why.
  api_.SetHook([](const kube::FakeApi::Call&) {
    return Status(StatusCode::kUnavailable, "LIST /api/v1/pods: connection refused");
  });
  grpc::Status away = Allocate({{"GPU-0-0"}}, &response);
  EXPECT_EQ(away.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(away.error_message().find("connection refused"), std::string::npos) << away.error_message();
  EXPECT_EQ(response.container_responses_size(), 0);
}

TEST_F(DevicePluginTest, OneRefusedContainerFailsTheWholeCall) {
  ASSERT_TRUE(api_.Upsert(kube::PodsPath("ns"), AssignedPod("a", "2024-01-01T00:00:01Z",
                                                            {{"first", 0, 2048, 25}, {"second", 1, 2048, 25}}))
                  .ok());
  v1beta1::AllocateResponse response;
  // The second container's slots are on the wrong GPU.
  grpc::Status st = Allocate({{"GPU-0-0"}, {"GPU-0-1"}}, &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(st.error_message().empty());
}

TEST_F(DevicePluginTest, GetPreferredAllocationSteersToTheAssignedGpu) {
  ASSERT_TRUE(api_.Upsert(kube::PodsPath("ns"), AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 1, 2048, 25}})).ok());
  v1beta1::PreferredAllocationRequest request;
  auto* c = request.add_container_requests();
  for (const char* id : {"GPU-0-0", "GPU-0-1", "GPU-1-2", "GPU-1-3"}) c->add_available_deviceids(id);
  c->set_allocation_size(1);
  v1beta1::PreferredAllocationResponse response;
  ASSERT_TRUE(service_.GetPreferredAllocation(nullptr, &request, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  ASSERT_EQ(response.container_responses(0).deviceids_size(), 1);
  EXPECT_EQ(response.container_responses(0).deviceids(0), "GPU-1-2");
}

}  // namespace
}  // namespace tessera::node
