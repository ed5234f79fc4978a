// The DRA kubelet plugin's handlers and slice publisher over a fake API
// server and temporary folders: what the kubelet receives per claim, the
// CDI file, idempotent repeats, and each claim's error.
#include "dra/kubelet_plugin.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "dra/cdi.h"
#include "dra/test_support.h"
#include "kube/paths.h"
#include "node/arbiter_loop.h"

namespace tessera::dra {
namespace {

namespace fs = std::filesystem;

class KubeletPluginTest : public testing::PluginTest {
 protected:
  nlohmann::json ReadJson(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
};

TEST_F(KubeletPluginTest, PrepareWritesTheCdiSpecAndAnswersItsIdAndRepeatsAlike) {
  DraService service(api_, options_, testing::Quiet());
  service.SetGpus(testing::TwoGpus());
  nlohmann::json object = testing::Claim("ns", "c", "uid-1", {testing::Result("gpu-1", "8Gi", "30")});
  object["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "p"}, {"uid", "pod-uid"}}};
  AddClaim(object);
  drapb::NodePrepareResourcesRequest request;
  auto* claim = request.add_claims();
  claim->set_namespace_("ns");
  claim->set_name("c");
  claim->set_uid("uid-1");
  for (int round = 0; round < 2; ++round) {  // a repeat answers the same and leaves the same file
    drapb::NodePrepareResourcesResponse response;
    ASSERT_TRUE(service.NodePrepareResources(nullptr, &request, &response).ok());
    const auto& out = response.claims().at("uid-1");
    EXPECT_EQ(out.error(), "");
    ASSERT_EQ(out.devices_size(), 1);
    EXPECT_EQ(out.devices(0).pool_name(), "node-1");
    EXPECT_EQ(out.devices(0).device_name(), "gpu-1");
    EXPECT_EQ(out.devices(0).share_id(), "share-gpu-1");
    ASSERT_EQ(out.devices(0).request_names_size(), 1);
    EXPECT_EQ(out.devices(0).request_names(0), "gpu");
    ASSERT_EQ(out.devices(0).cdi_device_ids_size(), 1);
    EXPECT_EQ(out.devices(0).cdi_device_ids(0), "tessera.io/gpu=uid-1");
    const nlohmann::json spec = ReadJson(options_.cdi_dir + "/tessera.io-gpu-uid-1.json");
    EXPECT_EQ(spec["kind"], "tessera.io/gpu");
    EXPECT_EQ(spec["devices"][0]["name"], "uid-1");
    const nlohmann::json& env = spec["devices"][0]["containerEdits"]["env"];
    EXPECT_NE(std::find(env.begin(), env.end(), "TESSERA_GPU_MEM_LIMIT_MIB_0=8192"), env.end());
    EXPECT_TRUE(fs::is_directory(options_.paths.region_root_host + "/dra/uid-1/claim"));
    // The record names the shares and the pod, for a restart and the usage pass.
    auto record = node::DecodeClaimRecord(ReadJson(options_.paths.region_root_host + "/dra/uid-1/holder.json"));
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    EXPECT_EQ(record->holder.shares, (std::vector<core::GpuShare>{{1, "GPU-bbbb", 8192, 300}}));
    EXPECT_EQ(record->pods, (std::vector<node::PodRef>{{"ns", "p", "pod-uid"}}));
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(options_.cdi_dir)) ++files;
    EXPECT_EQ(files, 1u);  // no temporary file left behind
  }

  drapb::NodeUnprepareResourcesRequest unprepare;
  *unprepare.add_claims() = *claim;
  auto* never = unprepare.add_claims();  // never prepared: OK
  never->set_namespace_("ns");
  never->set_name("other");
  never->set_uid("uid-9");
  for (int round = 0; round < 2; ++round) {
    drapb::NodeUnprepareResourcesResponse response;
    ASSERT_TRUE(service.NodeUnprepareResources(nullptr, &unprepare, &response).ok());
    EXPECT_EQ(response.claims().at("uid-1").error(), "");
    EXPECT_EQ(response.claims().at("uid-9").error(), "");
  }
  EXPECT_FALSE(fs::exists(options_.cdi_dir + "/tessera.io-gpu-uid-1.json"));
  EXPECT_FALSE(fs::exists(options_.paths.region_root_host + "/dra/uid-1"));
}

// A pod in ns with `annotations`, as the API server has it.
nlohmann::json AnnotatedPod(const std::string& name, const std::string& uid,
                            const std::map<std::string, std::string>& annotations) {
  return {{"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", uid}, {"annotations", annotations}}},
          {"spec", {{"nodeName", "node-1"}, {"containers", {{{"name", "main"}}}}}}};
}

nlohmann::json Reserved(const std::string& name, const std::string& uid) {
  return {{"resource", "pods"}, {"name", name}, {"uid", uid}};
}

bool HasEnv(const nlohmann::json& spec, const std::string& entry) {
  const nlohmann::json& env = spec["devices"][0]["containerEdits"]["env"];
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST_F(KubeletPluginTest, ThePodsAnnotationsReachTheEnvAndTheArbiterRecord) {
  DraService service(api_, options_, testing::Quiet());
  service.SetGpus(testing::TwoGpus());
  const std::string pods = kube::PodsPath("ns");
  ASSERT_TRUE(api_.Upsert(pods, AnnotatedPod("p1", "pod-uid-1", {{"tessera.io/priority", "high"},
                                                                 {"tessera.io/gpu-core-limit", "60"}})).ok());
  // A second pod sharing the claim asks otherwise: the first pod's count (and a warning says so).
  ASSERT_TRUE(api_.Upsert(pods, AnnotatedPod("p2", "pod-uid-2", {{"tessera.io/priority", "low"}})).ok());
  nlohmann::json object = testing::Claim("ns", "c", "uid-1", {testing::Result("gpu-1", "8Gi", "30")});
  object["status"]["reservedFor"] = {Reserved("p1", "pod-uid-1"), Reserved("p2", "pod-uid-2")};
  AddClaim(object);

  const std::string root = options_.paths.region_root_host;
  ASSERT_TRUE(service.Prepare({"ns", "c", "uid-1"}).ok());
  const std::string spec_path = options_.cdi_dir + "/tessera.io-gpu-uid-1.json";
  EXPECT_FALSE(HasEnv(ReadJson(spec_path), "TESSERA_GPU_CORE_POLICY=hard"));
  EXPECT_TRUE(fs::exists(root + "/dra/uid-1/claim.arbiter.json"));  // beside the region, out of the container's reach
  // The node's arbiter finds the claim where claims' regions live.
  EXPECT_EQ(node::ClaimsRoot(root), root + "/" + node::kClaimsFolder);
  std::vector<node::ArbiterContainer> found = node::RegionSource(root)();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key, "uid-1/claim");
  EXPECT_EQ(found[0].region_dir, node::ClaimRegionDir(root, "uid-1"));
  EXPECT_EQ(found[0].priority, core::Priority::kHigh);
  EXPECT_EQ(found[0].policy, node::CorePolicy::kShare);
  ASSERT_EQ(found[0].slots.size(), 1u);
  EXPECT_EQ(found[0].slots[0].gpu, 1);
  EXPECT_EQ(found[0].slots[0].share_ppm, 300'000u);
  EXPECT_EQ(found[0].slots[0].limit_ppm, 600'000u);

  // The pod asks `hard` now: a repeated prepare writes it into the env and the record (no ceiling then).
  ASSERT_TRUE(api_.Upsert(pods, AnnotatedPod("p1", "pod-uid-1", {{"tessera.io/gpu-core-policy", "hard"},
                                                                 {"tessera.io/gpu-core-limit", "60"}})).ok());
  ASSERT_TRUE(service.Prepare({"ns", "c", "uid-1"}).ok());
  EXPECT_TRUE(HasEnv(ReadJson(spec_path), "TESSERA_GPU_CORE_POLICY=hard"));
  found = node::RegionSource(root)();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].policy, node::CorePolicy::kHard);
  EXPECT_EQ(found[0].priority, core::Priority::kNormal);
  EXPECT_EQ(found[0].slots[0].limit_ppm, 0u);

  ASSERT_TRUE(service.Unprepare({"ns", "c", "uid-1"}).ok());
  EXPECT_TRUE(node::RegionSource(root)().empty());
}

TEST_F(KubeletPluginTest, APodGoneOrReplacedIsSkippedAndAnUnreadablePodFailsThePrepare) {
  DraService service(api_, options_, testing::Quiet());
  service.SetGpus(testing::TwoGpus());
  const std::string pods = kube::PodsPath("ns");
  // "old" is now another pod (another uid); "gone" is not there; "p3" gives the annotations.
  ASSERT_TRUE(api_.Upsert(pods, AnnotatedPod("old", "pod-uid-new", {{"tessera.io/priority", "high"}})).ok());
  ASSERT_TRUE(api_.Upsert(pods, AnnotatedPod("p3", "pod-uid-3", {{"tessera.io/priority", "low"}})).ok());
  nlohmann::json object = testing::Claim("ns", "c", "uid-1", {testing::Result("gpu-0", "1Gi", "10")});
  object["status"]["reservedFor"] = {Reserved("gone", "pod-uid-0"), Reserved("old", "pod-uid-old"),
                                     Reserved("p3", "pod-uid-3")};
  AddClaim(object);
  auto compute = ClaimCompute(api_, object, {}, *testing::Quiet());
  ASSERT_TRUE(compute.ok()) << compute.status().message();
  EXPECT_EQ(compute->priority, core::Priority::kLow);
  // Reserved for no pod: the defaults.
  nlohmann::json unreserved = object;
  unreserved["status"].erase("reservedFor");
  EXPECT_EQ(ClaimCompute(api_, unreserved, {}, *testing::Quiet()).value(), node::ComputeAnnotations{});

  // The API server failing the pod's GET fails the prepare (the kubelet retries), naming the pod; nothing is written.
  api_.SetHook([&](const kube::FakeApi::Call& call) {
    return call.path.find("/pods/") != std::string::npos ? Status(StatusCode::kUnavailable, "API server away")
                                                         : Status::Ok();
  });
  auto prepared = service.Prepare({"ns", "c", "uid-1"});
  api_.SetHook(nullptr);
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(prepared.status().message().find("claim ns/c (uid uid-1): reading pod ns/gone"), std::string::npos)
      << prepared.status().message();
  EXPECT_FALSE(fs::exists(options_.cdi_dir + "/tessera.io-gpu-uid-1.json"));
  EXPECT_TRUE(service.Prepare({"ns", "c", "uid-1"}).ok());
}

TEST_F(KubeletPluginTest, EachBadClaimGetsItsOwnErrorNamingIt) {
  DraService service(api_, options_, testing::Quiet());
  service.SetGpus(testing::TwoGpus());
  AddClaim(testing::Claim("ns", "good", "u-good", {testing::Result("gpu-0", "1Gi", "10")}));
  AddClaim(testing::Claim("ns", "big", "u-big", {testing::Result("gpu-0", "99Gi", "10")}));
  AddClaim(testing::Claim("ns", "replaced", "u-new", {testing::Result("gpu-0", "1Gi", "")}));
  AddClaim(testing::Claim("ns", "elsewhere", "u-else", {testing::Result("gpu-9", "1Gi", "")}));
  drapb::NodePrepareResourcesRequest request;
  for (const auto& [name, uid] : std::vector<std::pair<std::string, std::string>>{
           {"good", "u-good"}, {"big", "u-big"}, {"replaced", "u-old"}, {"elsewhere", "u-else"}, {"gone", "u-gone"}}) {
    auto* c = request.add_claims();
    c->set_namespace_("ns");
    c->set_name(name);
    c->set_uid(uid);
  }
  drapb::NodePrepareResourcesResponse response;
  ASSERT_TRUE(service.NodePrepareResources(nullptr, &request, &response).ok());
  EXPECT_EQ(response.claims().at("u-good").error(), "");
  EXPECT_EQ(response.claims().at("u-good").devices_size(), 1);
  auto error_of = [&](const std::string& uid) { return response.claims().at(uid).error(); };
  EXPECT_NE(error_of("u-big").find("ResourceClaim ns/big device gpu-0: consumed memory 101376 MiB is more than"),
            std::string::npos) << error_of("u-big");
  EXPECT_NE(error_of("u-old").find("claim ns/replaced (uid u-old): the API server's claim of that name has uid u-new"),
            std::string::npos) << error_of("u-old");
  EXPECT_NE(error_of("u-else").find("gpu-9: this node has no such GPU"), std::string::npos) << error_of("u-else");
  EXPECT_NE(error_of("u-gone").find("claim ns/gone (uid u-gone): reading it:"), std::string::npos) << error_of("u-gone");
  EXPECT_TRUE(fs::exists(options_.cdi_dir + "/tessera.io-gpu-u-good.json"));
  EXPECT_FALSE(fs::exists(options_.cdi_dir + "/tessera.io-gpu-u-big.json"));
  EXPECT_FALSE(service.Unprepare({"ns", "x", "../etc"}).ok());
}

TEST_F(KubeletPluginTest, RegistrationAnswersTheDriverItsSocketV1AndTheHealthService) {
  RegistrationService service(options_, testing::Quiet());
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(service.GetInfo(nullptr, nullptr, &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.tessera.io");
  EXPECT_EQ(info.endpoint(), options_.plugins_dir + "/gpu.tessera.io/dra.sock");
  // The kubelet takes the first service it knows; the health service is
  // listed after, as the plugin helper of Kubernetes lists it.
  ASSERT_EQ(info.supported_versions_size(), 2);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  EXPECT_EQ(info.supported_versions(1), "v1alpha1.DRAResourceHealth");
  EXPECT_FALSE(service.Registered().has_value());
  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(false);
  status.set_error("no");
  ASSERT_TRUE(service.NotifyRegistrationStatus(nullptr, &status, nullptr).ok());
  EXPECT_EQ(service.Registered(), false);
  EXPECT_EQ(RegistrationSocket(options_), options_.registry_dir + "/gpu.tessera.io-reg.sock");
}

TEST_F(KubeletPluginTest, PublisherCreatesThenUpdatesOnlyOnChange) {
  SlicePublisher publisher(api_, options_);
  auto gpus = testing::TwoGpus();
  auto first = publisher.Publish(gpus);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(*first);
  const std::string path = ResourceSlicePath("node-1-gpu.tessera.io");
  ASSERT_TRUE(api_.Peek(path).has_value());
  EXPECT_EQ((*api_.Peek(path))["spec"]["pool"]["generation"], 1);
  auto again = publisher.Publish(gpus);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);  // nothing changed, nothing written
  gpus[1].healthy = false;
  auto changed = publisher.Publish(gpus);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  const nlohmann::json slice = *api_.Peek(path);
  EXPECT_EQ(slice["spec"]["pool"]["generation"], 2);
  EXPECT_EQ(slice["spec"]["devices"].size(), 1u);
  // The API server away: the error comes back, and KubeletPlugin tries again next time.
  KubeletPlugin plugin(api_, options_, testing::Quiet());
  api_.SetHook([](const kube::FakeApi::Call&) { return Status(StatusCode::kUnavailable, "API server away"); });
  EXPECT_EQ(plugin.SetGpus(gpus).code(), StatusCode::kUnavailable);
  api_.SetHook(nullptr);
  EXPECT_TRUE(plugin.SetGpus(gpus).ok());
}

// A kubelet deletes its node's ResourceSlices when it starts (seen with
// 1.36): the plugin's watch publishes the slice again at once, with the GPUs
// published last, and puts back a slice someone else changed.
TEST_F(KubeletPluginTest, ASliceDeletedOrChangedBySomeoneElseIsPublishedAgain) {
  KubeletPlugin plugin(api_, options_, testing::Quiet());
  const std::string path = ResourceSlicePath("node-1-gpu.tessera.io");
  ASSERT_TRUE(plugin.SetGpus(testing::TwoGpus()).ok());
  ASSERT_TRUE(plugin.Start().ok());
  const nlohmann::json published = *api_.Peek(path);
  auto wait_for = [&](const std::function<bool(const std::optional<nlohmann::json>&)>& ok) {
    for (int i = 0; i < 500; ++i) {
      if (ok(api_.Peek(path))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  // Let the informer list before the delete, so that it sees a delete.
  for (int i = 0; i < 500 && api_.OpenWatches() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(api_.Remove(path).ok());
  EXPECT_TRUE(wait_for([&](const auto& s) { return s && (*s)["spec"]["devices"] == published["spec"]["devices"]; }));

  nlohmann::json edited = *api_.Peek(path);
  edited["spec"]["devices"] = nlohmann::json::array();
  ASSERT_TRUE(api_.Upsert(ResourceSlicesPath(), edited).ok());
  EXPECT_TRUE(wait_for([&](const auto& s) { return s && (*s)["spec"]["devices"] == published["spec"]["devices"]; }));
  plugin.Stop();
}

}  // namespace
}  // namespace tessera::dra
