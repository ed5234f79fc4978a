// End-to-end MPS isolation (tessera.io/isolation: mps) through the whole
// hand-over: kube-scheduler with tessera-scheduler as its extender, and two
// simulated nodes with a real tessera-node each: one with --mps=on running
// the stand-in control daemon of tests/fake_mps (no real MPS daemon runs
// here), one with --mps=off. An MPS pod runs on the first with MPS's
// variables, its GPU's pipe folder and the daemons' /dev/shm; one held to
// the second is refused at scheduling time, saying MPS; and a pod whose GPU's
// daemon died (and cannot be started again) is refused at admission, naming
// the GPU. A third node serves HAMi's and gpushare's resources too: their
// pods get MPS there. On a fourth the agent is killed (SIGKILL) and started
// again: it takes over the daemons the first one left, and MPS pods still
// run.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "core/codec.h"
#include "kube/paths.h"
#include "node/mps.h"
#include "tests/kubelet_sim/farm_suite.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The stand-in daemon (a shell script).
const char* kFakeControl = TESSERA_FAKE_MPS_CONTROL;

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

class MpsPathTest : public FarmSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-mps", {"--gpushare", "true", "--hami", "true"}); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override {
    OpenNamespace("mps", 20);
    // Short: the daemons' pipe folders live here. The control program is a
    // copy, so the test can take it away.
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-mps-e2e-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    control_ = dir_ + "/nvidia-cuda-mps-control";
    mps_root_ = dir_ + "/mps";
    InstallControl();
  }
  void TearDown() override {
    if (!dir_.empty()) InstallControl();  // the agent quits its daemons through it
    FarmSuite::TearDown();                // tessera-node quits its daemons on SIGTERM
    KillLeftoverDaemons();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A stand-in daemon still running (its agent killed before it could quit
  // it) would loop for ever: its control.pid names it.
  void KillLeftoverDaemons() {
    std::error_code ec;
    if (mps_root_.empty() || !std::filesystem::exists(mps_root_, ec)) return;
    for (const auto& gpu : std::filesystem::directory_iterator(mps_root_, ec)) {
      const std::string pid = FirstLine(gpu.path().string() + "/pipe/control.pid");
      if (pid.empty() || FirstLine("/proc/" + pid + "/cmdline").find("nvidia-cuda-mps-control") == std::string::npos) {
        continue;
      }
      ::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL);
    }
  }

  void InstallControl() {
    std::error_code ec;
    std::filesystem::copy_file(kFakeControl, control_, std::filesystem::copy_options::overwrite_existing, ec);
    ASSERT_FALSE(ec) << ec.message();
    std::filesystem::permissions(control_, std::filesystem::perms::owner_all, ec);
    ASSERT_FALSE(ec) << ec.message();
  }

  // One node named <group>-<suffix>, labelled tessera.io/e2e-mps=<suffix>,
  // its tessera-node run with `flags`.
  NodeFarm* StartNode(const std::string& suffix, std::vector<std::string> flags,
                      std::vector<std::string> extra_resources = {}) {
    auto nodes = UniformSimNodes(group_ + "-" + suffix, 1, 2, "A100", 40960, 4);
    nodes[0].labels["tessera.io/e2e-mps"] = suffix;
    return AddFarm(std::move(nodes), ClusterFarmOptions(std::move(flags), std::move(extra_resources)));
  }

  // The mps flag of each GPU in the node's published inventory, by uuid.
  std::map<std::string, bool> PublishedMps(const std::string& node) {
    std::map<std::string, bool> out;
    auto object = client_->Get(kube::NodePath(node));
    if (!object.ok()) return out;
    auto gpus = core::DecodeInventory(Annotation(*object, core::kInventoryAnnotation));
    if (!gpus.ok()) return out;
    for (const auto& g : *gpus) out[g.uuid] = g.mps;
    return out;
  }
  bool WaitForPublishedMps(const std::string& node, const std::map<std::string, bool>& want,
                           seconds timeout = seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (PublishedMps(node) == want) return true;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  }

  Status SubmitMps(const std::string& name, const std::string& node_kind, int64_t mem_mib, int core_percent) {
    json pod = GpuPod(ns_, name, {{"main", 1, mem_mib, core_percent}},
                      {{kGroupLabel, group_}, {"tessera.io/e2e-mps", node_kind}},
                      {{"tessera.io/isolation", "mps"}});
    return client_->Create(kube::PodsPath(ns_), pod).status();
  }
  std::string AssignedGpu(const json& pod) {
    auto a = core::DecodeAssignment(Annotation(pod, core::kAssignmentAnnotation));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->containers.at(0).gpus.at(0).uuid : "";
  }

  std::string dir_, control_, mps_root_;
  NodeFarm* mps_farm_ = nullptr;  // owned by the fixture (AddFarm)
  NodeFarm* plain_farm_ = nullptr;
};

TEST_F(MpsPathTest, MpsPodsRunOnlyWhereTheirGpusDaemonRuns) {
  mps_farm_ = StartNode("on", {"--mps=on", "--mps-control", control_, "--mps-root", mps_root_});
  plain_farm_ = StartNode("off", {"--mps=off"});
  ASSERT_TRUE(mps_farm_ && plain_farm_);
  const SimNode& on = mps_farm_->node(0);
  const SimNode& off = plain_farm_->node(0);
  const std::string uuid0 = on.info.gpus[0].uuid, uuid1 = on.info.gpus[1].uuid;

  // Each node says truthfully which GPUs run MPS: the scheduler reads it there.
  ASSERT_TRUE(WaitForPublishedMps(on.info.name, {{uuid0, true}, {uuid1, true}})) << "see " << mps_farm_->AgentLog(0);
  ASSERT_TRUE(WaitForPublishedMps(off.info.name, {{off.info.gpus[0].uuid, false}, {off.info.gpus[1].uuid, false}}));
  for (const auto& g : on.info.gpus) {
    const std::string pipe = node::MpsPipeDir(mps_root_, g.uuid);
    EXPECT_EQ(FirstLine(pipe + "/devices"), g.uuid) << "each daemon sees only its own GPU";
  }

  // An MPS pod runs with MPS's limits from its share and its GPU's pipe folder.
  ASSERT_TRUE(SubmitMps("mps-a", "on", 8192, 30).ok());
  auto running = Settled("mps-a");
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  ASSERT_EQ(Phase(*running), "Running") << (*running)["status"].dump() << "; see " << mps_farm_->AgentLog(0);
  const std::string gpu = AssignedGpu(*running);
  const json alloc = json::parse(Annotation(*running, kSimAllocationsAnnotation))["main"];
  const json& envs = alloc["envs"];
  EXPECT_EQ(envs.value("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", ""), "30");
  EXPECT_EQ(envs.value("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ""), "0=8192M");
  EXPECT_EQ(envs.value("CUDA_MPS_PIPE_DIRECTORY", ""), node::kMpsPipeContainerPath);
  EXPECT_EQ(envs.value("NVIDIA_VISIBLE_DEVICES", ""), gpu);
  EXPECT_EQ(envs.value("TESSERA_GPU_MEM_LIMIT_MIB_0", ""), "8192") << "the hook keeps the memory limit";
  EXPECT_EQ(envs.value("TESSERA_GPU_CORE_PERCENT_0", ""), "100") << "MPS alone limits compute";
  bool pipe_mounted = false, shm_mounted = false;
  for (const auto& m : alloc["mounts"]) {
    if (m.value("containerPath", "") == node::kMpsShmContainerPath) {
      // The agent runs on the host here: its daemons' /dev/shm is the host's (--mps-shm's default).
      shm_mounted = true;
      EXPECT_EQ(m.value("hostPath", ""), "/dev/shm");
      EXPECT_FALSE(m.value("readOnly", true));
    }
    if (m.value("containerPath", "") != node::kMpsPipeContainerPath) continue;
    pipe_mounted = true;
    EXPECT_EQ(m.value("hostPath", ""), node::MpsPipeDir(mps_root_, gpu));
    EXPECT_FALSE(m.value("readOnly", true));
  }
  EXPECT_TRUE(pipe_mounted) << alloc["mounts"].dump();
  EXPECT_TRUE(shm_mounted) << alloc["mounts"].dump();

  // Held to the node without MPS: refused when scheduling, saying why.
  ASSERT_TRUE(SubmitMps("mps-nowhere", "off", 4096, 20).ok());
  auto rejections = WaitForEvents("mps-nowhere", "FailedScheduling", seconds(15));
  ASSERT_FALSE(rejections.empty()) << "no FailedScheduling for an MPS pod held to a node without MPS";
  EXPECT_NE(rejections.back().find("runs MPS"), std::string::npos) << rejections.back();
  auto nowhere = client_->Get(kube::PodPath(ns_, "mps-nowhere"));
  ASSERT_TRUE(nowhere.ok());
  EXPECT_FALSE(IsBound(*nowhere)) << "an MPS pod must never fall back to the hook";

  // Bound, not yet admitted, when its GPU's daemon dies and cannot start again.
  mps_farm_->Kubelet(0).SetPaused(true);
  ASSERT_TRUE(SubmitMps("mps-late", "on", 4096, 20).ok());
  auto bound = WaitForPod(*client_, ns_, "mps-late", IsBound);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  const std::string lost = AssignedGpu(*bound);
  std::filesystem::remove(control_);
  const std::string pid_file = node::MpsPipeDir(mps_root_, lost) + "/control.pid";
  const pid_t daemon = static_cast<pid_t>(std::stol(FirstLine(pid_file)));
  ASSERT_EQ(::kill(daemon, SIGKILL), 0);
  const std::string kept = lost == uuid0 ? uuid1 : uuid0;
  ASSERT_TRUE(WaitForPublishedMps(on.info.name, {{lost, false}, {kept, true}}))
      << "the node still says GPU " << lost << " runs MPS; see " << mps_farm_->AgentLog(0);
  mps_farm_->Kubelet(0).SetPaused(false);
  auto refused = Settled("mps-late");
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(Phase(*refused), "Failed") << "an MPS pod must not start without its GPU's daemon";
  EXPECT_EQ((*refused)["status"].value("reason", ""), "UnexpectedAdmissionError");
  const std::string message = (*refused)["status"].value("message", "");
  EXPECT_NE(message.find("the MPS control daemon of GPU " + lost + " is not running"), std::string::npos) << message;
  EXPECT_TRUE(Annotation(*refused, kSimAllocationsAnnotation).empty());
  auto events = WaitForEvents("mps-late", "TesseraAllocateFailed", seconds(15));
  ASSERT_FALSE(events.empty()) << "no TesseraAllocateFailed Event on the pod";
  EXPECT_NE(events.back().find(lost), std::string::npos) << events.back();

  // The program is back: the daemon is started again and the flag follows.
  InstallControl();
  EXPECT_TRUE(WaitForPublishedMps(on.info.name, {{lost, true}, {kept, true}}))
      << "GPU " << lost << "'s daemon was not started again; see " << mps_farm_->AgentLog(0);
  EXPECT_EQ(Phase(*client_->Get(kube::PodPath(ns_, "mps-a"))), "Running");
}

// Pods in the compatibility vocabularies ask for MPS the same way: their
// Allocates come through tessera-node's HAMi and gpushare plugins, which
// share the Allocator (and so the MPS supervisor's answer) with Tessera's.
// gpushare's pods name memory only: MPS holds back no compute for them.
TEST_F(MpsPathTest, CompatPodsGetMpsThroughTheirOwnResources) {
  mps_farm_ = StartNode("compat",
                        {"--mps=on", "--mps-control", control_, "--mps-root", mps_root_, "--gpushare", "true",
                         "--hami", "true"},
                        {"aliyun.com/gpu-mem", "nvidia.com/gpu"});
  ASSERT_TRUE(mps_farm_);
  const SimNode& on = mps_farm_->node(0);
  ASSERT_TRUE(WaitForPublishedMps(on.info.name, {{on.info.gpus[0].uuid, true}, {on.info.gpus[1].uuid, true}}))
      << "see " << mps_farm_->AgentLog(0);
  const std::map<std::string, json> limits = {
      {"hami-mps", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "4096"}, {"nvidia.com/gpucores", "25"}}},
      {"gpushare-mps", {{"aliyun.com/gpu-mem", "4"}}}};
  for (const auto& [name, limit] : limits) {
    json pod = GpuPod(ns_, name, {{"main", 0, 0, 0}}, {{kGroupLabel, group_}, {"tessera.io/e2e-mps", "compat"}},
                      {{"tessera.io/isolation", "mps"}});
    pod["spec"]["containers"][0]["resources"]["limits"] = limit;
    ASSERT_TRUE(client_->Create(kube::PodsPath(ns_), pod).ok()) << name;
  }
  for (const auto& [name, limit] : limits) {
    SCOPED_TRACE(name);
    auto running = Settled(name);
    ASSERT_TRUE(running.ok()) << running.status().ToString();
    ASSERT_EQ(Phase(*running), "Running") << (*running)["status"].dump() << "; see " << mps_farm_->AgentLog(0);
    const std::string gpu = AssignedGpu(*running);
    const json alloc = json::parse(Annotation(*running, kSimAllocationsAnnotation))["main"];
    const json& envs = alloc["envs"];
    EXPECT_EQ(envs.value("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "unset"), name == "hami-mps" ? "25" : "unset");
    EXPECT_EQ(envs.value("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ""), "0=4096M");
    EXPECT_EQ(envs.value("CUDA_MPS_PIPE_DIRECTORY", ""), node::kMpsPipeContainerPath);
    bool pipe_mounted = false;
    for (const auto& m : alloc["mounts"])
      pipe_mounted = pipe_mounted || m.value("hostPath", "") == node::MpsPipeDir(mps_root_, gpu);
    EXPECT_TRUE(pipe_mounted) << alloc["mounts"].dump();
  }
}

// tessera-node killed (SIGKILL) on an MPS node: its daemons outlive it, and
// the agent started next takes them over instead of starting others; the
// node keeps publishing MPS and admitting MPS pods.
TEST_F(MpsPathTest, AnAgentKilledLeavesItsDaemonsToTheNextOne) {
  mps_farm_ = StartNode("takeover", {"--mps=on", "--mps-control", control_, "--mps-root", mps_root_});
  ASSERT_TRUE(mps_farm_);
  const SimNode& on = mps_farm_->node(0);
  std::map<std::string, bool> all_mps;
  for (const auto& g : on.info.gpus) all_mps[g.uuid] = true;
  ASSERT_TRUE(WaitForPublishedMps(on.info.name, all_mps)) << "see " << mps_farm_->AgentLog(0);
  std::map<std::string, std::string> daemons;  // GPU uuid -> the stand-in's pid
  for (const auto& g : on.info.gpus) daemons[g.uuid] = FirstLine(node::MpsPipeDir(mps_root_, g.uuid) + "/control.pid");

  mps_farm_->StopAgent(0, SIGKILL);
  for (const auto& [uuid, pid] : daemons) {
    ASSERT_FALSE(pid.empty()) << uuid;
    EXPECT_EQ(::kill(static_cast<pid_t>(std::stol(pid)), 0), 0) << "GPU " << uuid << "'s daemon died with its agent";
  }
  ASSERT_TRUE(mps_farm_->StartAgent(0).ok()) << "see " << mps_farm_->AgentLog(0);
  // The Node still carries the killed agent's inventory: wait for the new
  // agent's word on each GPU instead.
  auto took_over = [&] {
    std::ifstream log(mps_farm_->AgentLog(0));
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    size_t n = 0;
    for (size_t at = text.find("took over the MPS control daemon of GPU"); at != std::string::npos;
         at = text.find("took over the MPS control daemon of GPU", at + 1)) {
      ++n;
    }
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (took_over() < daemons.size() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(took_over(), daemons.size()) << "see " << mps_farm_->AgentLog(0);
  ASSERT_TRUE(WaitForPublishedMps(on.info.name, all_mps)) << "see " << mps_farm_->AgentLog(0);
  for (const auto& [uuid, pid] : daemons) {
    EXPECT_EQ(FirstLine(node::MpsPipeDir(mps_root_, uuid) + "/control.pid"), pid)
        << "GPU " << uuid << ": a second daemon was started; see " << mps_farm_->AgentLog(0);
  }

  ASSERT_TRUE(SubmitMps("mps-after", "takeover", 4096, 20).ok());
  auto running = Settled("mps-after");
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(Phase(*running), "Running") << (*running)["status"].dump() << "; see " << mps_farm_->AgentLog(0);
}

}  // namespace
}  // namespace tessera::testing
