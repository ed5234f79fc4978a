#include "node/plugin_host.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

#include "kube/fake_api.h"
#include "node/compat_plugins.h"
#include "node/device_plugin.h"

namespace tessera::node {
namespace {

std::shared_ptr<spdlog::logger> Quiet() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

PluginHostOptions Options() {
  PluginHostOptions options;
  options.node = "n1";
  options.server.dir = "/nonexistent";
  return options;
}

// Takes every inventory unless told to refuse; remembers the last one.
class RecordingPlugin final : public v1beta1::DevicePlugin::Service, public HostedPlugin {
 public:
  explicit RecordingPlugin(bool refuse = false) : refuse_(refuse) {}
  grpc::Service* GrpcService() override { return this; }
  Status SetGpus(std::vector<core::GpuInfo> gpus) override {
    if (refuse_) return InvalidArgument("device ID too long");
    gpus_ = std::move(gpus);
    return Status::Ok();
  }
  void EndStreams() override {}
  void Shutdown() override {}
  std::vector<core::GpuInfo>* seen = &gpus_;

 private:
  const bool refuse_;
  std::vector<core::GpuInfo> gpus_;
};

TEST(PluginHostTest, EveryResourceTakesTheGpusAndARefusalNamesItsResource) {
  kube::FakeApi api;  // never called: no test here starts the host
  PluginHost host(Options(), api, MountPaths{}, Quiet());
  auto a = std::make_unique<RecordingPlugin>();
  auto refusing = std::make_unique<RecordingPlugin>(true);
  auto c = std::make_unique<RecordingPlugin>();
  std::vector<core::GpuInfo>* seen_a = a->seen;
  std::vector<core::GpuInfo>* seen_c = c->seen;
  ASSERT_TRUE(host.Add("gpu.example/a", "a.sock", std::move(a)).ok());
  ASSERT_TRUE(host.Add("gpu.example/b", "b.sock", std::move(refusing)).ok());
  ASSERT_TRUE(host.Add("gpu.example/c", "c.sock", std::move(c)).ok());
  EXPECT_EQ(host.Resources(), (std::vector<std::string>{"gpu.example/a", "gpu.example/b", "gpu.example/c"}));
  const std::vector<core::GpuInfo> gpus = {{0, "GPU-a", "T4", 15360, 40, 0, true}};
  Status st = host.SetGpus(gpus);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "gpu.example/b: device ID too long");
  EXPECT_EQ(*seen_a, gpus);  // the others took them
  EXPECT_EQ(*seen_c, gpus);
}

TEST(PluginHostTest, AddRefusesWhatCannotBeServed) {
  kube::FakeApi api;  // never called: no test here starts the host
  PluginHost host(Options(), api, MountPaths{}, Quiet());
  EXPECT_NE(host.Add("gpu.example/a", "a.sock", nullptr).message().find("no plugin"), std::string::npos);
  ASSERT_TRUE(host.Add("gpu.example/a", "a.sock", std::make_unique<RecordingPlugin>()).ok());
  EXPECT_FALSE(host.Add("gpu.example/a", "other.sock", std::make_unique<RecordingPlugin>()).ok());
  EXPECT_FALSE(host.Add("gpu.example/b", "a.sock", std::make_unique<RecordingPlugin>()).ok());
  EXPECT_EQ(host.Resources(), (std::vector<std::string>{"gpu.example/a"}));
}

TEST(PluginHostTest, StartNeedsAResource) {
  kube::FakeApi api;  // never called: no test here starts the host
  PluginHost host(Options(), api, MountPaths{}, Quiet());
  EXPECT_EQ(host.Start().code(), StatusCode::kFailedPrecondition);
}

// The front ends become resources of the one host, beside the agent's.
TEST(PluginHostTest, CompatFrontEndsAreAddedToTheHost) {
  kube::FakeApi api;  // never called: no test here starts the host
  PluginHost host(Options(), api, MountPaths{}, Quiet());
  ASSERT_TRUE(host.Add("tessera.io/gpu", "tessera-gpu.sock",
                       std::make_unique<DevicePluginService>(host.allocator(), "tessera.io/gpu", 4, Quiet()))
                  .ok());
  CompatOptions none;
  ASSERT_TRUE(AddCompatPlugins(none, host, Quiet()).ok());
  EXPECT_EQ(host.Resources(), (std::vector<std::string>{"tessera.io/gpu"}));
  CompatOptions both;
  both.resources.gpushare.enabled = true;
  both.resources.hami.enabled = true;
  ASSERT_TRUE(AddCompatPlugins(both, host, Quiet()).ok());
  EXPECT_EQ(host.Resources(), (std::vector<std::string>{"tessera.io/gpu", "aliyun.com/gpu-mem", "nvidia.com/gpu"}));
  // Every resource gets the node's GPUs: slots, GiB units.
  EXPECT_TRUE(host.SetGpus({{0, "GPU-a", "T4", 15360, 40, 0, true}}).ok());
  // A second time: the names and sockets are taken.
  EXPECT_FALSE(AddCompatPlugins(both, host, Quiet()).ok());
}

}  // namespace
}  // namespace tessera::node
