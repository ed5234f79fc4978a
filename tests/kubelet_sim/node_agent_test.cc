// tessera-node in simulated mode against the real API server, driven over its
// real gRPC socket by the kubelet stand-in: inventory publishing, slot health
// (and the Node status the stand-in derives from it), the Allocate handshake
// for pods created already bound with assignments, and the reconciliation
// against the stand-in's pod-resources record (Events and counters scraped
// from /metrics).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "core/codec.h"
#include "kube/events.h"
#include "kube/paths.h"
#include "tests/kubelet_sim/kubelet_sim.h"
#include "tests/support/cluster_env.h"
#include "tests/support/http_probe.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr int kSlotsPerGpu = 4;

struct Suite {
  explicit Suite(ClusterEnv e) : env(std::move(e)) {}
  ClusterEnv env;
  std::optional<kube::Client> client;
  std::string ns, node, dir, gpu_file;
  std::vector<SimNode> nodes;
  std::vector<std::string> uuids;
  std::unique_ptr<KubeletSim> kubelet;
  ChildProcess agent;
  int metrics_port = 0;
};
Suite* suite = nullptr;

void WriteGpus(bool second_healthy) {
  std::ofstream out(suite->gpu_file + ".tmp");
  out << "gpus:\n";
  for (size_t i = 0; i < suite->uuids.size(); ++i) {
    out << "- {uuid: " << suite->uuids[i] << ", model: H100, memMiB: 81920, sms: 132, numa: 0, healthy: "
        << ((i == 1 && !second_healthy) ? "false" : "true") << "}\n";
  }
  out.close();
  std::filesystem::rename(suite->gpu_file + ".tmp", suite->gpu_file);  // atomic: the agent never reads half a file
}


class NodeAgentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto env = ClusterEnv::FromEnvironment();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    suite = new Suite(env.value());
    auto client = suite->env.MakeClient();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    suite->client.emplace(std::move(client).value());
    const std::string id = std::to_string(::getpid());
    suite->ns = "node-agent-" + id;
    ASSERT_TRUE(CreateNamespace(*suite->client, suite->ns).ok());
    // A Node as the simulator makes it (A100s); the agent must overwrite its inventory with the file's H100s.
    suite->nodes = UniformSimNodes("tnode-" + id, 1, 2, "A100", 40960, kSlotsPerGpu);
    suite->node = suite->nodes[0].info.name;
    for (const auto& g : suite->nodes[0].info.gpus) suite->uuids.push_back(g.uuid);
    ASSERT_TRUE(CreateSimNodes(*suite->client, suite->nodes).ok());

    // Unix socket paths must stay short: a fresh folder under the temp dir.
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-node-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    suite->dir = tmpl;
    suite->gpu_file = suite->dir + "/gpus.yaml";
    WriteGpus(true);

    suite->kubelet = std::make_unique<KubeletSim>(*suite->client, KubeletSimOptions{suite->node, suite->dir + "/dp"});
    ASSERT_TRUE(suite->kubelet->Start().ok());
    suite->metrics_port = FreeLoopbackPort();
    ASSERT_NE(suite->metrics_port, 0);
    std::filesystem::create_directories(suite->env.dir + "/logs");
    auto agent = ChildProcess::Start(
        {suite->env.bin_dir + "/tessera-node", "--node-name", suite->node, "--kubeconfig", suite->env.kubeconfig,
         "--device-plugin-dir", suite->dir + "/dp", "--slots-per-gpu", std::to_string(kSlotsPerGpu),
         "--simulated-gpus", suite->gpu_file, "--library-host-path", suite->dir + "/libtessera-cuda.so",
         "--preload-host-path", suite->dir + "/ld.so.preload", "--region-root", suite->dir + "/regions",
         "--resync-ms", "200", "--pod-resources-socket", suite->kubelet->PodResourcesSocket(),
         "--reconcile-interval-ms", "300", "--metrics-bind-address",
         "127.0.0.1:" + std::to_string(suite->metrics_port)},
        suite->env.dir + "/logs/tessera-node-" + id + ".log");
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    suite->agent = std::move(agent).value();
    ASSERT_TRUE(suite->kubelet->WaitForDevices(
        [](const std::vector<SimDevice>& d) { return d.size() == 2 * kSlotsPerGpu; }, std::chrono::seconds(30)))
        << "the plugin never registered and listed its slots; see " << suite->env.dir << "/logs";
  }
  static void TearDownTestSuite() {
    if (!suite) return;
    suite->agent.Stop(SIGTERM);
    if (suite->kubelet) suite->kubelet->Stop();
    if (suite->client) {
      (void)DeleteNamespace(*suite->client, suite->ns);
      (void)DeleteSimNodes(*suite->client, suite->nodes);
    }
    std::error_code ec;
    if (!suite->dir.empty()) std::filesystem::remove_all(suite->dir, ec);
    delete suite;
    suite = nullptr;
  }
  void SetUp() override { ASSERT_NE(suite, nullptr); }

  kube::Client& Client() { return *suite->client; }

  // Creates a pod already bound to the node with `assignment` (raw text) and assigned-at.
  // `env`: the first container's spec env, when not null.
  void CreateBound(const std::string& name, const std::vector<ContainerShape>& shapes, const std::string& assignment,
                   const std::string& assigned_at, const json& env = nullptr) {
    json pod = GpuPod(suite->ns, name, shapes, {},
                      {{std::string(core::kAssignmentAnnotation), assignment}, {"tessera.io/assigned-at", assigned_at}});
    pod["spec"]["nodeName"] = suite->node;
    if (!env.is_null()) pod["spec"]["containers"][0]["env"] = env;
    auto created = Client().Create(kube::PodsPath(suite->ns), pod);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  std::string Assignment(const std::vector<core::ContainerAssignment>& containers) {
    return *core::EncodeAssignment(core::Assignment{suite->node, containers});
  }
  Result<json> Settled(const std::string& name) {
    return WaitForPod(Client(), suite->ns, name, [](const json& pod) {
      const std::string phase = pod["status"].value("phase", "");
      return phase == "Running" || phase == "Failed";
    }, seconds(60));
  }
  // A counter scraped from the agent's /metrics.
  static Result<uint64_t> Counter(const std::string& name) {
    return ScrapeCounter(suite->metrics_port, name);
  }
  static uint64_t CounterOrZero(const std::string& name) {
    auto v = Counter(name);
    return v.ok() ? *v : 0;
  }
  // Waits until `name` reaches at least `value`; its last value.
  static uint64_t WaitForCounter(const std::string& name, uint64_t value, seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    uint64_t seen = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      auto v = Counter(name);
      if (v.ok()) seen = *v;
      if (seen >= value) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return seen;
  }
  // The Events of `reason` on pod `name` of the suite's namespace.
  json EventsOn(const std::string& name, const std::string& reason) {
    auto list = Client().List(kube::EventsPath(suite->ns), "", "involvedObject.name=" + name + ",reason=" + reason);
    return list.ok() ? (*list)["items"] : json::array();
  }
  json WaitForEvents(const std::string& name, const std::string& reason, seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json items = EventsOn(name, reason);
    while (items.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      items = EventsOn(name, reason);
    }
    return items;
  }
  // The Node's status {capacity, allocatable} of tessera.io/gpu once it reads
  // {capacity, allocatable}, else after 10 s; -1 for what is missing.
  std::pair<int, int> WaitForNodeGpuStatus(int capacity, int allocatable) {
    auto read = [&] {
      auto node = Client().Get(kube::NodePath(suite->node));
      if (!node.ok()) return std::make_pair(-1, -1);
      auto count = [&](const char* field) {
        const json& status = (*node)["status"];
        if (!status.contains(field) || !status[field].contains("tessera.io/gpu")) return -1;
        return std::stoi(status[field]["tessera.io/gpu"].get<std::string>());
      };
      return std::make_pair(count("capacity"), count("allocatable"));
    };
    const auto deadline = std::chrono::steady_clock::now() + seconds(10);
    auto seen = read();
    while (seen != std::make_pair(capacity, allocatable) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      seen = read();
    }
    return seen;
  }
  static json Allocations(const json& pod) {
    const auto& a = pod["metadata"].value("annotations", json::object());
    if (!a.contains(kSimAllocationsAnnotation)) return json::object();
    return json::parse(a[kSimAllocationsAnnotation].get<std::string>());
  }
};

TEST_F(NodeAgentTest, PublishesTheInventoryFromTheFile) {
  auto node = Client().Get(kube::NodePath(suite->node));
  for (int i = 0; i < 100 && node.ok() && node.value()["metadata"]["labels"].value("tessera.io/gpu-model", "") != "H100";
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    node = Client().Get(kube::NodePath(suite->node));
  }
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node.value()["metadata"]["labels"]["tessera.io/gpu-model"], "H100");
  EXPECT_EQ(node.value()["metadata"]["labels"]["tessera.io/gpu-memory-mib"], "81920");
  auto inventory = core::DecodeInventory(
      node.value()["metadata"]["annotations"][std::string(core::kInventoryAnnotation)].get<std::string>());
  ASSERT_TRUE(inventory.ok()) << inventory.status().ToString();
  ASSERT_EQ(inventory->size(), 2u);
  EXPECT_EQ((*inventory)[1].uuid, suite->uuids[1]);
  EXPECT_EQ((*inventory)[1].memory_mib, 81920);
  // Slots are named after the GPUs.
  std::set<std::string> ids;
  for (const auto& d : suite->kubelet->Devices()) ids.insert(d.id);
  EXPECT_TRUE(ids.count(suite->uuids[0] + "-0"));
  EXPECT_TRUE(ids.count(suite->uuids[1] + "-" + std::to_string(kSlotsPerGpu - 1)));
}

TEST_F(NodeAgentTest, SameSizePodsPendingTogetherGetTheirOwnGpus) {
  const auto& u = suite->uuids;
  suite->kubelet->SetPaused(true);  // both pods pending when the kubelet looks
  CreateBound("p1-older", {{"main", 1, 4096, 30}}, Assignment({{"main", {{1, u[1], 4096, 300}}}}),
              "2026-01-01T00:00:01Z");
  CreateBound("p2-newer", {{"main", 1, 4096, 30}}, Assignment({{"main", {{0, u[0], 4096, 300}}}}),
              "2026-01-01T00:00:02Z");
  suite->kubelet->SetPaused(false);

  auto p1 = Settled("p1-older");
  ASSERT_TRUE(p1.ok()) << p1.status().ToString();
  auto p2 = Settled("p2-newer");
  ASSERT_TRUE(p2.ok()) << p2.status().ToString();
  for (const auto* pod : {&p1.value(), &p2.value()}) {
    EXPECT_EQ((*pod)["status"]["phase"], "Running") << pod->dump();
  }

  json e1 = Allocations(*p1)["main"]["envs"];
  EXPECT_EQ(e1["NVIDIA_VISIBLE_DEVICES"], u[1]);
  EXPECT_EQ(e1["TESSERA_GPU_MEM_LIMIT_MIB_0"], "4096");
  EXPECT_EQ(e1["TESSERA_GPU_CORE_PERCENT_0"], "30");
  EXPECT_EQ(e1["TESSERA_GPU_MEM_FRACTION"], "0.0500");
  EXPECT_EQ(e1["TESSERA_POD"], suite->ns + "/p1-older");
  json e2 = Allocations(*p2)["main"]["envs"];
  EXPECT_EQ(e2["NVIDIA_VISIBLE_DEVICES"], u[0]);
  EXPECT_EQ(e2["TESSERA_POD"], suite->ns + "/p2-newer");
  // The kubelet took the slots the plugin preferred: on the assigned GPU.
  EXPECT_EQ(Allocations(*p2)["main"]["deviceIDs"][0].get<std::string>().rfind(u[0], 0), 0u);
  EXPECT_EQ((*p1)["metadata"]["annotations"]["tessera.io/allocated"], "main");
  for (const char* name : {"p1-older", "p2-newer"}) (void)Client().Delete(kube::PodPath(suite->ns, name), 0);
}

// A pod whose GPU container follows one without GPUs, spanning both GPUs
// (whole, as a multi-GPU container must): its GPUs in assignment order.
TEST_F(NodeAgentTest, MultiGpuContainerGetsItsGpusInAssignmentOrder) {
  const auto& u = suite->uuids;
  CreateBound("p3-multi", {{"first", 0, 0, 0}, {"second", 2, 8192, 100}},
              Assignment({{"first", {}}, {"second", {{1, u[1], 8192, 1000}, {0, u[0], 8192, 1000}}}}),
              "2026-01-01T00:00:03Z");
  auto p3 = Settled("p3-multi");
  ASSERT_TRUE(p3.ok()) << p3.status().ToString();
  EXPECT_EQ((*p3)["status"]["phase"], "Running") << p3->dump();
  json a3 = Allocations(*p3);
  EXPECT_EQ(a3["second"]["envs"]["NVIDIA_VISIBLE_DEVICES"], u[1] + "," + u[0]);
  EXPECT_EQ(a3["second"]["envs"]["TESSERA_GPU_MEM_LIMIT_MIB_1"], "8192");
  EXPECT_EQ(a3["second"]["envs"]["TESSERA_GPU_CORE_PERCENT_1"], "100");
  EXPECT_EQ(a3["second"]["deviceIDs"].size(), 2u);
  // Mounts: the library, ld.so.preload, the container's own region folder
  // and the node's busy boards.
  json mounts = a3["second"]["mounts"];
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[1]["containerPath"], "/etc/ld.so.preload");
  EXPECT_EQ(mounts[1]["hostPath"], suite->dir + "/ld.so.preload");
  const std::string region = mounts[2]["hostPath"].get<std::string>();
  EXPECT_EQ(region, suite->dir + "/regions/" + (*p3)["metadata"]["uid"].get<std::string>() + "/second");
  EXPECT_TRUE(std::filesystem::is_directory(region));
  EXPECT_EQ(mounts[3]["containerPath"], "/var/run/tessera/boards");
  EXPECT_EQ(mounts[3]["hostPath"], suite->dir + "/regions/boards");
  for (const std::string& uuid : {u[0], u[1]}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(suite->dir + "/regions/boards/" + uuid + ".board")) << uuid;
  }
  EXPECT_EQ((*p3)["metadata"]["annotations"]["tessera.io/allocated"], "second");
  (void)Client().Delete(kube::PodPath(suite->ns, "p3-multi"), 0);
}

TEST_F(NodeAgentTest, CorruptAssignmentFailsTheAllocateWithItsReason) {
  CreateBound("corrupt", {{"main", 1, 4096, 30}}, "{\"v\":1,\"node\":", "2026-01-01T00:00:04Z");
  auto pod = Settled("corrupt");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ((*pod)["status"]["phase"], "Failed");
  EXPECT_EQ((*pod)["status"]["reason"], "UnexpectedAdmissionError");
  const std::string message = (*pod)["status"].value("message", "");
  EXPECT_NE(message.find(suite->ns + "/corrupt: assignment annotation unreadable"), std::string::npos) << message;
  EXPECT_TRUE(Allocations(*pod).empty());
  EXPECT_FALSE((*pod)["metadata"]["annotations"].contains("tessera.io/allocated"));
  // The refusal is raised on the pod itself, where kubectl describe shows it.
  json events = WaitForEvents("corrupt", "TesseraAllocateFailed", seconds(20));
  ASSERT_EQ(events.size(), 1u) << events.dump();
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["source"]["component"], "tessera-node");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], (*pod)["metadata"]["uid"]);
  EXPECT_NE(events[0]["message"].get<std::string>().find(suite->ns + "/corrupt: assignment annotation unreadable"),
            std::string::npos)
      << events[0].dump();
  EXPECT_GE(CounterOrZero("tessera_node_allocate_failures_total"), 1u);
  (void)Client().Delete(kube::PodPath(suite->ns, "corrupt"), 0);
}

// A pod created bound, with an assignment written by hand that gives it far
// more than it asks for (issue 19's hole), or one copied from a running pod
// onto a GPU it no longer fits: refused, nothing marked, the pod told why.
TEST_F(NodeAgentTest, ForgedOrCopiedAssignmentsAreRefused) {
  const auto& u = suite->uuids;
  const uint64_t refused_before = CounterOrZero("tessera_node_assignments_refused_total");
  CreateBound("forged", {{"main", 1, 1024, 5}}, Assignment({{"main", {{0, u[0], 15360, 1000}}}}),
              "2026-01-01T00:00:04Z");
  auto pod = Settled("forged");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ((*pod)["status"]["phase"], "Failed");
  const std::string message = (*pod)["status"].value("message", "");
  EXPECT_NE(message.find("is given 15360 MiB and 100 percent of GPU 0, but asks for 1024 MiB and 5 percent"),
            std::string::npos)
      << message;
  EXPECT_TRUE(Allocations(*pod).empty());
  EXPECT_FALSE((*pod)["metadata"]["annotations"].contains("tessera.io/allocated"));
  json events = WaitForEvents("forged", "TesseraAssignmentRefused", seconds(20));
  ASSERT_EQ(events.size(), 1u) << events.dump();
  EXPECT_EQ(events[0]["involvedObject"]["uid"], (*pod)["metadata"]["uid"]);

  // A legitimate 60 % share, then the same assignment copied onto a second
  // pod asking the same: together 120 % of GPU 1's compute.
  const std::string shared = Assignment({{"main", {{1, u[1], 4096, 600}}}});
  CreateBound("holder", {{"main", 1, 4096, 60}}, shared, "2026-01-01T00:00:05Z");
  auto holder = Settled("holder");
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_EQ((*holder)["status"]["phase"], "Running") << holder->dump();
  CreateBound("copy", {{"main", 1, 4096, 60}}, shared, "2026-01-01T00:00:06Z");
  auto copy = Settled("copy");
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)["status"]["phase"], "Failed");
  const std::string copied = (*copy)["status"].value("message", "");
  EXPECT_NE(copied.find("60 percent of it already handed to 1 container(s): together over 100 percent"),
            std::string::npos)
      << copied;

  // The scheduler's own assignment, but the pod sets its limit in its spec
  // too: whichever copy its runtime lets the program see, no share.
  CreateBound("own-limit", {{"main", 1, 2048, 20}}, Assignment({{"main", {{0, u[0], 2048, 200}}}}),
              "2026-01-01T00:00:07Z", json::array({{{"name", "TESSERA_GPU_MEM_LIMIT_MIB_0"}, {"value", "40960"}}}));
  auto own = Settled("own-limit");
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ((*own)["status"]["phase"], "Failed");
  EXPECT_NE((*own)["status"].value("message", "").find("container \"main\" sets TESSERA_GPU_MEM_LIMIT_MIB_0 in its spec"),
            std::string::npos)
      << own->dump();
  EXPECT_EQ(WaitForEvents("own-limit", "TesseraAssignmentRefused", seconds(20)).size(), 1u);
  EXPECT_GE(CounterOrZero("tessera_node_assignments_refused_total"), refused_before + 3);
  for (const char* name : {"forged", "holder", "copy", "own-limit"}) (void)Client().Delete(kube::PodPath(suite->ns, name), 0);
}

TEST_F(NodeAgentTest, EditingTheGpuFileTogglesSlotHealth) {
  WriteGpus(false);
  const std::string sick = suite->uuids[1];
  auto unhealthy = [&](const std::vector<SimDevice>& devices) {
    int n = 0;
    for (const auto& d : devices) {
      if (d.health == "Unhealthy") {
        if (d.id.rfind(sick, 0) != 0) return false;
        ++n;
      }
    }
    return n == kSlotsPerGpu;
  };
  EXPECT_TRUE(suite->kubelet->WaitForDevices(unhealthy, std::chrono::seconds(20)));
  // The stand-in, as the kubelet, tells the API server: the sick GPU's slots leave allocatable.
  EXPECT_EQ(WaitForNodeGpuStatus(2 * kSlotsPerGpu, kSlotsPerGpu), std::make_pair(2 * kSlotsPerGpu, kSlotsPerGpu));
  WriteGpus(true);
  EXPECT_TRUE(suite->kubelet->WaitForDevices(
      [](const std::vector<SimDevice>& d) {
        return d.size() == 2 * kSlotsPerGpu &&
               std::all_of(d.begin(), d.end(), [](const SimDevice& x) { return x.health == "Healthy"; });
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(WaitForNodeGpuStatus(2 * kSlotsPerGpu, 2 * kSlotsPerGpu),
            std::make_pair(2 * kSlotsPerGpu, 2 * kSlotsPerGpu));
}

// The allocator's optimistic concurrency rests on this API server behaviour:
// a merge patch carrying a stale metadata.resourceVersion is refused with 409.
TEST_F(NodeAgentTest, MergePatchWithStaleResourceVersionConflicts) {
  suite->kubelet->SetPaused(true);  // the stand-in must not touch the pod meanwhile
  struct Resume {
    ~Resume() { suite->kubelet->SetPaused(false); }
  } resume;
  CreateBound("rv-check", {{"main", 1, 1024, 10}}, Assignment({{"main", {{0, suite->uuids[0], 1024, 100}}}}),
              "2026-01-01T00:00:06Z");
  const std::string path = kube::PodPath(suite->ns, "rv-check");
  auto pod = Client().Get(path);
  ASSERT_TRUE(pod.ok());
  const std::string stale = (*pod)["metadata"]["resourceVersion"];
  ASSERT_TRUE(Client().Patch(path, kube::PatchType::kMerge, {{"metadata", {{"labels", {{"touched", "yes"}}}}}}).ok());
  auto refused = Client().Patch(path, kube::PatchType::kMerge,
                                {{"metadata", {{"resourceVersion", stale}, {"annotations", {{"x", "y"}}}}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  (void)Client().Delete(path, 0);
}

// Restarts the kubelet stand-in and expects a new registration within 10 s.
void ExpectReRegistration(bool wipe_plugin_sockets) {
  const int before = suite->kubelet->Registrations();
  ASSERT_TRUE(suite->kubelet->Restart(wipe_plugin_sockets).ok());
  bool again = false;
  for (int i = 0; i < 100 && !again; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    again = suite->kubelet->Registrations() > before;
  }
  EXPECT_TRUE(again) << "tessera-node did not register again after the kubelet restart";
  EXPECT_TRUE(suite->kubelet->WaitForDevices(
      [](const std::vector<SimDevice>& d) {
        return d.size() == 2 * kSlotsPerGpu &&
               std::all_of(d.begin(), d.end(), [](const SimDevice& x) { return x.health == "Healthy"; });
      },
      std::chrono::seconds(20)));
}

TEST_F(NodeAgentTest, ReRegistersAfterTheKubeletWipesItsSockets) { ExpectReRegistration(true); }

TEST_F(NodeAgentTest, ReRegistersWhenKubeletSockIsCreatedAgain) { ExpectReRegistration(false); }

TEST_F(NodeAgentTest, AllocatesAfterReRegistration) {
  const auto& u = suite->uuids;
  CreateBound("after-restart", {{"main", 1, 20480, 100}}, Assignment({{"main", {{1, u[1], 20480, 1000}}}}),
              "2026-01-01T00:00:05Z");
  auto pod = Settled("after-restart");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  ASSERT_EQ((*pod)["status"]["phase"], "Running") << pod->dump();
  json envs = Allocations(*pod)["main"]["envs"];
  EXPECT_EQ(envs["NVIDIA_VISIBLE_DEVICES"], u[1]);
  EXPECT_EQ(envs["TESSERA_GPU_CORE_PERCENT_0"], "100");
  EXPECT_EQ(envs["TESSERA_GPU_MEM_FRACTION"], "0.2500");
  (void)Client().Delete(kube::PodPath(suite->ns, "after-restart"), 0);
}

TEST_F(NodeAgentTest, ReconcileFindsNoMismatchInNormalAllocations) {
  const uint64_t mismatches = CounterOrZero("tessera_node_allocation_mismatches_total");
  const auto& u = suite->uuids;
  CreateBound("rec-ok", {{"main", 1, 2048, 10}}, Assignment({{"main", {{0, u[0], 2048, 100}}}}),
              "2026-01-01T00:00:07Z");
  auto pod = Settled("rec-ok");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  ASSERT_EQ((*pod)["status"]["phase"], "Running") << pod->dump();
  // Two full passes after the kubelet recorded the pod.
  const uint64_t runs = CounterOrZero("tessera_node_reconcile_runs_total");
  EXPECT_GE(WaitForCounter("tessera_node_reconcile_runs_total", runs + 2, seconds(20)), runs + 2);
  EXPECT_EQ(CounterOrZero("tessera_node_allocation_mismatches_total"), mismatches);
  EXPECT_TRUE(EventsOn("rec-ok", "TesseraAllocationMismatch").empty());
  EXPECT_GE(CounterOrZero("tessera_node_allocations_total"), 1u);
  (void)Client().Delete(kube::PodPath(suite->ns, "rec-ok"), 0);
}

TEST_F(NodeAgentTest, ACorruptKubeletRecordRaisesOneMismatchEvent) {
  const uint64_t mismatches = CounterOrZero("tessera_node_allocation_mismatches_total");
  const auto& u = suite->uuids;
  CreateBound("rec-bad", {{"main", 1, 2048, 10}}, Assignment({{"main", {{0, u[0], 2048, 100}}}}),
              "2026-01-01T00:00:08Z");
  auto pod = Settled("rec-bad");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  ASSERT_EQ((*pod)["status"]["phase"], "Running") << pod->dump();
  // The kubelet's record now says the container holds a slot on the other GPU.
  const std::string wrong = u[1] + "-" + std::to_string(kSlotsPerGpu - 1);
  ASSERT_TRUE(suite->kubelet->CorruptRecord(suite->ns, "rec-bad", "main", {wrong}).ok());

  json events = WaitForEvents("rec-bad", "TesseraAllocationMismatch", seconds(20));
  ASSERT_EQ(events.size(), 1u) << events.dump();
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["source"]["component"], "tessera-node");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], (*pod)["metadata"]["uid"]);
  const std::string message = events[0]["message"];
  EXPECT_NE(message.find(wrong), std::string::npos) << message;
  EXPECT_NE(message.find(u[0]), std::string::npos) << message;
  EXPECT_EQ(CounterOrZero("tessera_node_allocation_mismatches_total"), mismatches + 1);

  // Further passes see the same mismatch and report nothing new.
  const uint64_t runs = CounterOrZero("tessera_node_reconcile_runs_total");
  EXPECT_GE(WaitForCounter("tessera_node_reconcile_runs_total", runs + 3, seconds(20)), runs + 3);
  EXPECT_EQ(CounterOrZero("tessera_node_allocation_mismatches_total"), mismatches + 1);
  EXPECT_EQ(EventsOn("rec-bad", "TesseraAllocationMismatch").size(), 1u);
  (void)Client().Delete(kube::PodPath(suite->ns, "rec-bad"), 0);
}

// The stand-in writes the status a kubelet writes once the containers run:
// kubectl's READY column counts ready containers, and Deployments count
// Ready pods as available.
TEST_F(NodeAgentTest, AdmittedPodIsReadyAsAKubeletReportsIt) {
  const auto& u = suite->uuids;
  json pod = GpuPod(suite->ns, "ready", {{"main", 1, 2048, 10}, {"side", 0, 0, 0}}, {},
                    {{std::string(core::kAssignmentAnnotation), Assignment({{"main", {{0, u[0], 2048, 100}}}})},
                     {"tessera.io/assigned-at", "2026-01-01T00:00:09Z"}});
  pod["spec"]["nodeName"] = suite->node;
  pod["spec"]["initContainers"] = json::array({{{"name", "setup"}, {"image", "registry.example/setup:1"}}});
  ASSERT_TRUE(Client().Create(kube::PodsPath(suite->ns), pod).ok());
  auto settled = Settled("ready");
  ASSERT_TRUE(settled.ok()) << settled.status().ToString();
  const json& status = (*settled)["status"];
  ASSERT_EQ(status["phase"], "Running") << status.dump();
  std::map<std::string, std::string> conditions;
  for (const auto& c : status["conditions"]) conditions[c["type"]] = c["status"];
  EXPECT_EQ(conditions["Initialized"], "True") << status.dump();
  EXPECT_EQ(conditions["ContainersReady"], "True") << status.dump();
  EXPECT_EQ(conditions["Ready"], "True") << status.dump();
  EXPECT_TRUE(status.contains("startTime")) << status.dump();
  ASSERT_EQ(status["containerStatuses"].size(), 2u) << status.dump();
  std::set<std::string> names;
  for (const auto& c : status["containerStatuses"]) {
    names.insert(c["name"].get<std::string>());
    EXPECT_TRUE(c["ready"].get<bool>()) << c.dump();
    EXPECT_TRUE(c["started"].get<bool>()) << c.dump();
    EXPECT_EQ(c["restartCount"], 0) << c.dump();
    EXPECT_TRUE(c["state"].contains("running")) << c.dump();
  }
  EXPECT_EQ(names, (std::set<std::string>{"main", "side"}));
  ASSERT_EQ(status["initContainerStatuses"].size(), 1u) << status.dump();
  EXPECT_EQ(status["initContainerStatuses"][0]["state"]["terminated"]["reason"], "Completed") << status.dump();
  (void)Client().Delete(kube::PodPath(suite->ns, "ready"), 0);
}

// A graceful delete (kubectl delete, a controller scaling down, an
// eviction) sets deletionTimestamp; the kubelet then stops the containers
// and deletes the pod for good. The stand-in does the same at once, for the
// pods it admitted and for those it never admits (no GPU of its resource),
// and the GPU it held takes a whole-GPU pod again.
TEST_F(NodeAgentTest, GracefulDeleteFinishesInsteadOfHangingInTerminating) {
  const auto& u = suite->uuids;
  CreateBound("graceful", {{"main", 1, 81920, 100}}, Assignment({{"main", {{1, u[1], 81920, 1000}}}}),
              "2026-01-01T00:00:10Z");
  json plain = GpuPod(suite->ns, "plain", {{"main", 0, 0, 0}});
  plain["spec"]["nodeName"] = suite->node;
  ASSERT_TRUE(Client().Create(kube::PodsPath(suite->ns), plain).ok());
  auto pod = Settled("graceful");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  ASSERT_EQ((*pod)["status"]["phase"], "Running") << pod->dump();

  const auto start = std::chrono::steady_clock::now();
  for (const char* name : {"graceful", "plain"}) {
    ASSERT_TRUE(Client().Delete(kube::PodPath(suite->ns, name), 60).ok()) << name;
  }
  for (const char* name : {"graceful", "plain"}) {
    Status gone = Status::Ok();
    while (std::chrono::steady_clock::now() - start < seconds(20)) {
      gone = Client().Get(kube::PodPath(suite->ns, name)).status();
      if (gone.code() == StatusCode::kNotFound) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(gone.code(), StatusCode::kNotFound) << name << " still there 20 s into its 60 s grace period";
  }

  // The whole GPU again, for a new pod.
  CreateBound("after-graceful", {{"main", 1, 81920, 100}}, Assignment({{"main", {{1, u[1], 81920, 1000}}}}),
              "2026-01-01T00:00:11Z");
  auto next = Settled("after-graceful");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ((*next)["status"]["phase"], "Running") << next->dump();
  (void)Client().Delete(kube::PodPath(suite->ns, "after-graceful"), 0);
}

}  // namespace
}  // namespace tessera::testing
