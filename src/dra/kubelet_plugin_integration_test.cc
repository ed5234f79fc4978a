// The DRA kubelet plugin as the kubelet meets it: a gRPC client over the
// real Unix sockets (registration, then the endpoint it names: DRAPlugin and
// the device-health stream), claims stored in a fake API server, the CDI
// file on disk.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "dra/kubelet_plugin.h"
#include "dra/test_support.h"

namespace tessera::dra {
namespace {

namespace fs = std::filesystem;

TEST(KubeletPluginIntegrationTest, KubeletsCallsOverTheSockets) {
  testing::TempDir dir;
  kube::FakeApi api;
  const KubeletPluginOptions options = testing::NodeOneOptions(dir.path());
  KubeletPlugin plugin(api, options, testing::Quiet());
  ASSERT_TRUE(plugin.SetGpus(testing::TwoGpus()).ok());
  ASSERT_TRUE(plugin.Start().ok());
  ASSERT_TRUE(api.Peek(ResourceSlicePath("node-1-gpu.tessera.io")).has_value());

  // Registration, as the kubelet's plugin watcher does it.
  auto reg = pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix://" + options.registry_dir + "/gpu.tessera.io-reg.sock", grpc::InsecureChannelCredentials()));
  pluginregistration::PluginInfo info;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(reg->GetInfo(&ctx, {}, &info).ok());
  }
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.tessera.io");
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  {
    grpc::ClientContext ctx;
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse response;
    ASSERT_TRUE(reg->NotifyRegistrationStatus(&ctx, status, &response).ok());
  }
  EXPECT_EQ(plugin.registration().Registered(), true);

  // Prepare through the endpoint it named.
  ASSERT_TRUE(api.Upsert(testing::kClaims, testing::Claim("ns", "c", "uid-1", {testing::Result("gpu-0", "10Gi", "25")}))
                  .ok());
  auto dra = drapb::DRAPlugin::NewStub(grpc::CreateChannel("unix://" + info.endpoint(), grpc::InsecureChannelCredentials()));
  drapb::NodePrepareResourcesRequest request;
  for (const auto& [name, uid] : std::vector<std::pair<std::string, std::string>>{{"c", "uid-1"}, {"nope", "uid-2"}}) {
    auto* c = request.add_claims();
    c->set_namespace_("ns");
    c->set_name(name);
    c->set_uid(uid);
  }
  drapb::NodePrepareResourcesResponse response;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(dra->NodePrepareResources(&ctx, request, &response).ok());
  }
  const auto& good = response.claims().at("uid-1");
  EXPECT_EQ(good.error(), "");
  ASSERT_EQ(good.devices_size(), 1);
  EXPECT_EQ(good.devices(0).cdi_device_ids(0), "tessera.io/gpu=uid-1");
  EXPECT_NE(response.claims().at("uid-2").error().find("claim ns/nope (uid uid-2)"), std::string::npos)
      << response.claims().at("uid-2").error();

  const std::string file = options.cdi_dir + "/tessera.io-gpu-uid-1.json";
  std::ifstream in(file);
  const nlohmann::json spec = nlohmann::json::parse(in);
  EXPECT_EQ(spec["cdiVersion"], "0.6.0");
  EXPECT_EQ(spec["kind"], "tessera.io/gpu");
  const nlohmann::json& edits = spec["devices"][0]["containerEdits"];
  for (const char* want : {"NVIDIA_VISIBLE_DEVICES=GPU-aaaa", "TESSERA_GPU_UUID_0=GPU-aaaa",
                           "TESSERA_GPU_MEM_LIMIT_MIB_0=10240", "TESSERA_GPU_CORE_PERCENT_0=25",
                           "TESSERA_REGION_DIR=/var/run/tessera/region"}) {
    EXPECT_NE(std::find(edits["env"].begin(), edits["env"].end(), want), edits["env"].end()) << want;
  }
  ASSERT_EQ(edits["mounts"].size(), 4u);
  EXPECT_EQ(edits["mounts"][2]["hostPath"], options.paths.region_root_host + "/dra/uid-1/claim");
  // The pods' boards folder, with the claim's GPU's board made before the container starts.
  EXPECT_EQ(edits["mounts"][3]["hostPath"], options.paths.region_root_host + "/boards");
  EXPECT_TRUE(std::filesystem::is_regular_file(options.paths.region_root_host + "/boards/GPU-aaaa.board"));

  // Unprepare removes it; a second time is fine.
  drapb::NodeUnprepareResourcesRequest unprepare;
  *unprepare.add_claims() = request.claims(0);
  for (int round = 0; round < 2; ++round) {
    grpc::ClientContext ctx;
    drapb::NodeUnprepareResourcesResponse out;
    ASSERT_TRUE(dra->NodeUnprepareResources(&ctx, unprepare, &out).ok());
    EXPECT_EQ(out.claims().at("uid-1").error(), "");
  }
  EXPECT_FALSE(fs::exists(file));

  // The device-health stream on the same endpoint, as a 1.36 kubelet opens
  // it: both GPUs, healthy; Stop ends it.
  auto health = healthpb::DRAResourceHealth::NewStub(
      grpc::CreateChannel("unix://" + info.endpoint(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext health_ctx;
  auto stream = health->NodeWatchResources(&health_ctx, {});
  healthpb::NodeWatchResourcesResponse report;
  ASSERT_TRUE(stream->Read(&report));
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_EQ(report.devices(1).device().device_name(), "gpu-1");
  EXPECT_EQ(report.devices(1).health(), healthpb::HEALTHY);

  plugin.Stop();
  EXPECT_FALSE(stream->Read(&report));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_FALSE(fs::exists(options.registry_dir + "/gpu.tessera.io-reg.sock"));
  EXPECT_FALSE(fs::exists(info.endpoint()));
}

}  // namespace
}  // namespace tessera::dra
