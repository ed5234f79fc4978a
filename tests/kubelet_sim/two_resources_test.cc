// tessera-node serving two device-plugin resources on one node (its own
// tessera.io/gpu and gpushare's aliyun.com/gpu-mem) through its one plugin
// host, against the real API server: concurrent Allocates for the two
// resources, issued from two threads over the real gRPC sockets, never swap
// shares. Each round makes two pods pending for the node at once, one per
// resource, both assigned the same GPU with one slot each, so the GPUs and
// slot count an Allocate carries fit both; which one is older alternates.
// Only identifying among the containers that ask for the Allocate's resource,
// one handshake at a time, gives each container its own pod's assignment.
// The kubelet stand-ins (one per resource behind one kubelet.sock, as a real
// kubelet's device manager) only take the registrations and follow the
// device lists: they are paused, the test plays the kubelet's Allocate.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/codec.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kube/paths.h"
#include "node/inventory.h"
#include "tests/kubelet_sim/kubelet_sim.h"
#include "tests/support/cluster_env.h"
#include "tests/support/http_probe.h"
#include "tests/support/process.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr int kSlotsPerGpu = 8;
constexpr int kRounds = 50;
constexpr const char* kGpushare = "aliyun.com/gpu-mem";

// What one Allocate handed out, or why it failed.
struct Handed {
  std::string error;  // empty: OK
  std::map<std::string, std::string> envs;
};

class TwoResourcesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto env = ClusterEnv::FromEnvironment();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_ = new ClusterEnv(env.value());
    auto client = env_->MakeClient();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = new kube::Client(std::move(client).value());
    const std::string id = std::to_string(::getpid());
    ns_ = "two-resources-" + id;
    ASSERT_TRUE(CreateNamespace(*client_, ns_).ok());
    nodes_ = UniformSimNodes("trnode-" + id, 1, 2, "H100", 81920, kSlotsPerGpu);
    ASSERT_TRUE(CreateSimNodes(*client_, nodes_).ok());

    // Unix socket paths must stay short: a fresh folder under the temp dir.
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-2res-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/dp");
    std::ofstream(dir_ + "/gpus.yaml") << node::FormatGpuFile(nodes_[0].info.gpus);

    const std::string node_name = nodes_[0].info.name;
    KubeletSimOptions main_options{node_name, dir_ + "/dp"};
    main_options.pod_resources_socket = dir_ + "/pod-resources.sock";
    kubelet_ = new KubeletSim(*client_, main_options);
    KubeletSimOptions gpushare_options = main_options;
    gpushare_options.resource = kGpushare;
    gpushare_options.serve_registration = false;
    gpushare_options.pod_resources_socket = dir_ + "/pod-resources-gpushare.sock";
    gpushare_kubelet_ = new KubeletSim(*client_, gpushare_options);
    kubelet_->SetPaused(true);  // the test makes the Allocate calls
    gpushare_kubelet_->SetPaused(true);
    ASSERT_TRUE(gpushare_kubelet_->Start().ok());
    kubelet_->Forward(gpushare_kubelet_);
    ASSERT_TRUE(kubelet_->Start().ok());

    metrics_port_ = FreeLoopbackPort();
    ASSERT_NE(metrics_port_, 0);
    std::filesystem::create_directories(env_->dir + "/logs");
    auto agent = ChildProcess::Start(
        {env_->bin_dir + "/tessera-node", "--node-name", node_name, "--kubeconfig", env_->kubeconfig,
         "--device-plugin-dir", dir_ + "/dp", "--slots-per-gpu", std::to_string(kSlotsPerGpu), "--simulated-gpus",
         dir_ + "/gpus.yaml", "--library-host-path", dir_ + "/libtessera-cuda.so", "--preload-host-path",
         dir_ + "/ld.so.preload", "--region-root", dir_ + "/regions", "--resync-ms", "200",
         "--pod-resources-socket", kubelet_->PodResourcesSocket(), "--metrics-bind-address",
         "127.0.0.1:" + std::to_string(metrics_port_), "--gpushare", "true"},
        env_->dir + "/logs/tessera-node-two-resources-" + id + ".log");
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = new ChildProcess(std::move(agent).value());
    ASSERT_TRUE(kubelet_->WaitForDevices(
        [](const std::vector<SimDevice>& d) { return d.size() == 2 * kSlotsPerGpu; }, seconds(30)))
        << "tessera.io/gpu was never registered and listed; see " << env_->dir << "/logs";
    ASSERT_TRUE(gpushare_kubelet_->WaitForDevices(
        [](const std::vector<SimDevice>& d) { return d.size() == 2 * 80; }, seconds(30)))
        << kGpushare << " was never registered and listed; see " << env_->dir << "/logs";
  }

  static void TearDownTestSuite() {
    if (agent_) agent_->Stop(SIGTERM);
    delete agent_;
    agent_ = nullptr;
    if (kubelet_) kubelet_->Stop();
    if (gpushare_kubelet_) gpushare_kubelet_->Stop();
    delete kubelet_;
    delete gpushare_kubelet_;
    kubelet_ = gpushare_kubelet_ = nullptr;
    if (client_) {
      (void)DeleteNamespace(*client_, ns_);
      (void)DeleteSimNodes(*client_, nodes_);
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    delete client_;
    client_ = nullptr;
    delete env_;
    env_ = nullptr;
  }

  // Creates pod `name`, bound to the node, its container "main" asking with
  // `limits` and assigned `share` of GPU 0 at `assigned_at`.
  static void CreateBound(const std::string& name, const json& limits, const core::GpuShare& share,
                          const std::string& assigned_at) {
    const std::string node_name = nodes_[0].info.name;
    auto assignment = core::EncodeAssignment(core::Assignment{node_name, {{"main", {share}}}});
    ASSERT_TRUE(assignment.ok());
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", ns_},
                  {"annotations",
                   {{std::string(core::kAssignmentAnnotation), *assignment}, {"tessera.io/assigned-at", assigned_at}}}}},
                {"spec",
                 {{"nodeName", node_name},
                  {"terminationGracePeriodSeconds", 0},
                  {"containers",
                   json::array({{{"name", "main"},
                                 {"image", "registry.example/test:1"},
                                 {"resources", {{"limits", limits}}}}})}}}};
    auto created = client_->Create(kube::PodsPath(ns_), pod);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }

  // What the kubelet does for one container of `resource`: asks the plugin
  // for its preference among every device listed, then calls Allocate with
  // it (or, without one, with the first device on GPU 0).
  static Handed Admit(const std::string& socket, const std::vector<SimDevice>& devices, std::barrier<>& in_step) {
    auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()));
    const std::string gpu0 = nodes_[0].info.gpus[0].uuid;
    v1beta1::PreferredAllocationRequest prefer;
    auto* want = prefer.add_container_requests();
    for (const auto& d : devices) want->add_available_deviceids(d.id);
    want->set_allocation_size(1);
    v1beta1::PreferredAllocationResponse preferred;
    in_step.arrive_and_wait();
    grpc::ClientContext prefer_context;
    prefer_context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    grpc::Status st = stub->GetPreferredAllocation(&prefer_context, prefer, &preferred);
    std::string chosen;
    if (st.ok() && preferred.container_responses_size() == 1 && preferred.container_responses(0).deviceids_size() == 1) {
      chosen = preferred.container_responses(0).deviceids(0);
    }
    if (chosen.empty()) {
      for (const auto& d : devices) {
        if (d.id.rfind(gpu0 + "-", 0) == 0) {
          chosen = d.id;
          break;
        }
      }
    }
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(chosen);
    v1beta1::AllocateResponse response;
    in_step.arrive_and_wait();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(20));
    st = stub->Allocate(&context, request, &response);
    Handed out;
    if (!st.ok()) {
      out.error = st.error_message();
      return out;
    }
    if (response.container_responses_size() != 1) {
      out.error = "answered " + std::to_string(response.container_responses_size()) + " containers";
      return out;
    }
    for (const auto& [k, v] : response.container_responses(0).envs()) out.envs[k] = v;
    return out;
  }

  static void DeleteAndWait(const std::vector<std::string>& names) {
    for (const auto& name : names) (void)client_->Delete(kube::PodPath(ns_, name), 0);
    const auto deadline = std::chrono::steady_clock::now() + seconds(20);
    for (const auto& name : names) {
      while (std::chrono::steady_clock::now() < deadline &&
             client_->Get(kube::PodPath(ns_, name)).status().code() != StatusCode::kNotFound) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  static ClusterEnv* env_;
  static kube::Client* client_;
  static std::string ns_, dir_;
  static std::vector<SimNode> nodes_;
  static KubeletSim* kubelet_;
  static KubeletSim* gpushare_kubelet_;
  static ChildProcess* agent_;
  static int metrics_port_;
};

ClusterEnv* TwoResourcesTest::env_ = nullptr;
kube::Client* TwoResourcesTest::client_ = nullptr;
std::string TwoResourcesTest::ns_, TwoResourcesTest::dir_;
std::vector<SimNode> TwoResourcesTest::nodes_;
KubeletSim* TwoResourcesTest::kubelet_ = nullptr;
KubeletSim* TwoResourcesTest::gpushare_kubelet_ = nullptr;
ChildProcess* TwoResourcesTest::agent_ = nullptr;
int TwoResourcesTest::metrics_port_ = 0;

TEST_F(TwoResourcesTest, ConcurrentAllocatesForTwoResourcesNeverSwapShares) {
  const core::GpuInfo& gpu0 = nodes_[0].info.gpus[0];
  const std::vector<SimDevice> slots = kubelet_->Devices();
  const std::vector<SimDevice> units = gpushare_kubelet_->Devices();
  auto allocations = ScrapeCounter(metrics_port_, "tessera_node_allocations_total");
  ASSERT_TRUE(allocations.ok()) << allocations.status().ToString();
  const uint64_t allocations_before = *allocations;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string t = "t-" + std::to_string(round), g = "g-" + std::to_string(round);
    // Both pending at once, on the same GPU; the older one alternates.
    char older[32], newer[32];
    std::snprintf(older, sizeof older, "2026-01-01T00:%02d:%02dZ", (2 * round) / 60, (2 * round) % 60);
    std::snprintf(newer, sizeof newer, "2026-01-01T00:%02d:%02dZ", (2 * round + 1) / 60, (2 * round + 1) % 60);
    const bool tessera_older = round % 2 == 0;
    CreateBound(t, {{"tessera.io/gpu", "1"}, {"tessera.io/gpu-mem", "1024"}, {"tessera.io/gpu-core", "1"}},
                core::GpuShare{gpu0.index, gpu0.uuid, 1024, 10}, tessera_older ? older : newer);
    CreateBound(g, {{kGpushare, "1"}}, core::GpuShare{gpu0.index, gpu0.uuid, 1024, 0},
                tessera_older ? newer : older);

    std::barrier<> in_step(2);
    Handed to_t, to_g;
    std::thread tessera_thread([&] { to_t = Admit(dir_ + "/dp/tessera-gpu.sock", slots, in_step); });
    std::thread gpushare_thread([&] { to_g = Admit(dir_ + "/dp/tessera-gpushare.sock", units, in_step); });
    tessera_thread.join();
    gpushare_thread.join();

    ASSERT_EQ(to_t.error, "") << "the tessera.io/gpu Allocate failed";
    ASSERT_EQ(to_g.error, "") << "the " << kGpushare << " Allocate failed";
    EXPECT_EQ(to_t.envs["TESSERA_POD"], ns_ + "/" + t);
    EXPECT_EQ(to_t.envs["NVIDIA_VISIBLE_DEVICES"], gpu0.uuid);
    EXPECT_EQ(to_t.envs["TESSERA_GPU_CORE_PERCENT_0"], "1");
    EXPECT_EQ(to_t.envs.count("ALIYUN_COM_GPU_MEM_CONTAINER"), 0u);
    EXPECT_EQ(to_g.envs["TESSERA_POD"], ns_ + "/" + g);
    EXPECT_EQ(to_g.envs["NVIDIA_VISIBLE_DEVICES"], gpu0.uuid);
    EXPECT_EQ(to_g.envs["ALIYUN_COM_GPU_MEM_CONTAINER"], "1");
    EXPECT_EQ(to_g.envs["TESSERA_GPU_MEM_VIEW"], "device");
    for (const std::string& name : {t, g}) {
      auto pod = client_->Get(kube::PodPath(ns_, name));
      ASSERT_TRUE(pod.ok()) << pod.status().ToString();
      EXPECT_EQ(Annotation(*pod, "tessera.io/allocated"), "main") << name;
    }
    DeleteAndWait({t, g});
    if (HasFatalFailure()) return;
  }
  // Both resources' Allocates are the agent's: each counted once.
  allocations = ScrapeCounter(metrics_port_, "tessera_node_allocations_total");
  ASSERT_TRUE(allocations.ok()) << allocations.status().ToString();
  EXPECT_EQ(*allocations, allocations_before + 2 * kRounds);
}

}  // namespace
}  // namespace tessera::testing
