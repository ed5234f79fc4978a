// kubectl-tessera against the real cluster: simulated GPU nodes, the real
// kube-scheduler with tessera-scheduler as its extender, a known set of pods;
// then the real kubectl-tessera binary (directly, and once through kubectl's
// plugin discovery) must report exactly the shares tessera-scheduler's own
// ClusterState books from the same objects.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "core/codec.h"
#include "scheduler/cluster_state.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

struct Output {
  int rc = -1;
  std::string out;
};

// Runs `command` with /bin/sh; stdout (and stderr when `merge_stderr`).
Output Shell(const std::string& command, bool merge_stderr = false) {
  Output result;
  FILE* pipe = ::popen((command + (merge_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) result.out.append(buf, n);
  const int status = ::pclose(pipe);
  result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

class KubectlTesseraTest : public ExtenderSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-kubectl"); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override { OpenNamespace("e2e-kt", 16); }
  void TearDown() override {
    if (!client_) return;
    CloseNamespace();
    (void)DeleteSimNodes(*client_, nodes_);
  }

  void AddNodes(const std::string& model, int count, int gpus, int64_t mem_mib) {
    std::string lower = model;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto nodes = UniformSimNodes(group_ + "-" + lower, count, gpus, model, mem_mib);
    for (auto& n : nodes) n.labels["tessera.io/e2e-group"] = group_;
    Status created = CreateSimNodes(*client_, nodes);
    ASSERT_TRUE(created.ok()) << created.ToString();
    nodes_.insert(nodes_.end(), nodes.begin(), nodes.end());
  }
  Status Submit(const std::string& name, const std::vector<ContainerShape>& containers,
                const std::map<std::string, std::string>& annotations = {}) {
    return client_
        ->Create("/api/v1/namespaces/" + ns_ + "/pods",
                 GpuPod(ns_, name, containers, {{"tessera.io/e2e-group", group_}}, annotations))
        .status();
  }

  std::string Plugin() const { return Quote(env_->bin_dir + "/kubectl-tessera") + " --kubeconfig " + Quote(env_->kubeconfig); }

  std::vector<SimNode> nodes_;
};

// Per "node/index": memUsedMiB, coreUsedMilli, sharers, memMiB.
using GpuTotals = std::map<std::string, std::array<int64_t, 4>>;

GpuTotals FromPlugin(const nlohmann::json& doc, const std::set<std::string>& nodes) {
  GpuTotals out;
  for (const auto& n : doc["nodes"]) {
    if (!nodes.contains(n["name"].get<std::string>())) continue;
    for (const auto& g : n["gpus"]) {
      out[n["name"].get<std::string>() + "/" + std::to_string(g["index"].get<int>())] = {
          g["memUsedMiB"].get<int64_t>(), g["coreUsedMilli"].get<int64_t>(), g["sharers"].get<int64_t>(),
          g["memMiB"].get<int64_t>()};
    }
  }
  return out;
}

// tessera-scheduler's own books, fed the same Node and Pod objects.
GpuTotals FromSchedulerState(const nlohmann::json& nodes, const nlohmann::json& pods,
                             const std::set<std::string>& names) {
  scheduler::ClusterState state;
  for (const auto& n : nodes) state.UpsertNode(n);
  for (const auto& p : pods) state.UpsertPod(p);
  GpuTotals out;
  for (const auto& g : state.Snapshot().gpu_use) {
    if (!names.contains(g.node)) continue;
    out[g.node + "/" + std::to_string(g.index)] = {g.mem_used_mib, g.core_used_milli, g.sharers, g.mem_total_mib};
  }
  return out;
}

TEST_F(KubectlTesseraTest, InspectMatchesTheLedgerExactly) {
  AddNodes("A100", 2, 2, 40960);
  AddNodes("H100", 1, 4, 81559);
  const std::map<std::string, std::string> h100 = {{"tessera.io/gpu-model", "H100"}};
  const std::map<std::string, std::string> a100 = {{"tessera.io/gpu-model", "A100"}};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Submit("small-" + std::to_string(i), {{"main", 1, 4096, 20}}, a100).ok());
  ASSERT_TRUE(Submit("llm", {{"server", 1, 20480, 30}}, a100).ok());
  ASSERT_TRUE(Submit("rag", {{"embedder", 1, 2048, 10}, {"generator", 1, 12288, 40}}, a100).ok());
  ASSERT_TRUE(Submit("trainer", {{"trainer", 2, 0, 0}, {"sidecar", 1, 4096, 20}}, h100).ok());
  ASSERT_TRUE(Submit("too-big", {{"main", 1, 100000, 10}}).ok());
  const std::vector<std::string> placed = {"small-0", "small-1", "small-2", "small-3", "small-4",
                                           "llm",     "rag",     "trainer"};
  for (const auto& name : placed) {
    auto pod = WaitForPod(*client_, ns_, name, IsBound, seconds(60));
    ASSERT_TRUE(pod.ok()) << name << ": " << pod.status().ToString();
  }
  auto rejected = WaitForPod(*client_, ns_, "too-big", [&](const nlohmann::json&) {
    return !PodEvents(*client_, ns_, "too-big", "FailedScheduling").empty();
  }, seconds(60));
  ASSERT_TRUE(rejected.ok()) << rejected.status().ToString();

  std::set<std::string> names;
  for (const auto& n : nodes_) names.insert(n.info.name);
  Output json = Shell(Plugin() + " inspect -o json");
  ASSERT_EQ(json.rc, 0) << json.out;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  auto nodes = client_->List("/api/v1/nodes");
  auto pods = client_->List("/api/v1/pods");
  ASSERT_TRUE(nodes.ok() && pods.ok());
  const GpuTotals plugin = FromPlugin(doc, names);
  const GpuTotals scheduler = FromSchedulerState(nodes.value()["items"], pods.value()["items"], names);
  ASSERT_EQ(plugin.size(), 8u) << "2 x 2 A100 + 4 H100 GPUs";
  EXPECT_EQ(plugin, scheduler);

  // And the sums of what the pods asked: 5 x 4096 + 20480 + 2048 + 12288 MiB
  // on the A100s; two whole H100s and a 4096 MiB sidecar on the H100 node.
  int64_t a100_mem = 0, a100_core = 0, h100_mem = 0, h100_core = 0;
  for (const auto& [gpu, t] : plugin) {
    (gpu.find("-a100-") != std::string::npos ? a100_mem : h100_mem) += t[0];
    (gpu.find("-a100-") != std::string::npos ? a100_core : h100_core) += t[1];
  }
  EXPECT_EQ(a100_mem, 5 * 4096 + 20480 + 2048 + 12288);
  EXPECT_EQ(a100_core, 5 * 200 + 300 + 100 + 400);
  EXPECT_EQ(h100_mem, 2 * 81559 + 4096);
  EXPECT_EQ(h100_core, 2000 + 200);
  bool pending_listed = false;
  for (const auto& p : doc["pending"]) pending_listed |= p == ns_ + "/too-big";
  EXPECT_TRUE(pending_listed) << doc["pending"].dump();

  // The same through kubectl's plugin discovery (kubectl-tessera on PATH).
  Output via_kubectl = Shell("PATH=" + Quote(env_->bin_dir) + ":\"$PATH\" tools/controlplane/bin/kubectl tessera"
                             " --kubeconfig " + Quote(env_->kubeconfig) + " inspect -o json");
  ASSERT_EQ(via_kubectl.rc, 0) << via_kubectl.out;
  EXPECT_EQ(FromPlugin(nlohmann::json::parse(via_kubectl.out), names), scheduler);

  // inspect -d: every share of the node, one row each.
  const std::string h100_node = group_ + "-h100-0";
  Output detail = Shell("COLUMNS=200 " + Plugin() + " inspect -d " + h100_node);
  ASSERT_EQ(detail.rc, 0) << detail.out;
  EXPECT_NE(detail.out.find("Node " + h100_node + " (H100, 4 GPUs)"), std::string::npos) << detail.out;
  EXPECT_NE(detail.out.find(ns_ + "/trainer[trainer]"), std::string::npos) << detail.out;
  EXPECT_TRUE(std::regex_search(detail.out, std::regex("\n +" + ns_ + "/trainer\\[sidecar\\] +4\\.0 +20%\n")))
      << detail.out;
  EXPECT_EQ(detail.out.find("\x1b["), std::string::npos) << "no colour into a pipe";

  // inspect pod: the assignment per container, and why the other waits.
  Output trainer = Shell(Plugin() + " -n " + ns_ + " inspect pod trainer");
  ASSERT_EQ(trainer.rc, 0) << trainer.out;
  EXPECT_NE(trainer.out.find("Node:       " + h100_node), std::string::npos) << trainer.out;
  EXPECT_TRUE(std::regex_search(trainer.out, std::regex("\ntrainer +[0-3] +H100 +79\\.6 +100%"))) << trainer.out;
  EXPECT_TRUE(std::regex_search(trainer.out, std::regex("\nsidecar +[0-3] +H100 +4\\.0 +20%"))) << trainer.out;
  EXPECT_NE(trainer.out.find("Allocated:  none yet"), std::string::npos) << trainer.out;
  Output big = Shell(Plugin() + " inspect pod too-big --namespace " + ns_);
  ASSERT_EQ(big.rc, 0) << big.out;
  EXPECT_NE(big.out.find("FailedScheduling"), std::string::npos) << big.out;
  EXPECT_NE(big.out.find("100000"), std::string::npos) << big.out;
}

TEST_F(KubectlTesseraTest, TopShowsUsageOnceANodeAgentWritesIt) {
  AddNodes("T4", 1, 1, 15360);
  ASSERT_TRUE(Submit("svc", {{"main", 1, 8192, 50}}).ok());
  ASSERT_TRUE(WaitForPod(*client_, ns_, "svc", IsBound, seconds(60)).ok());
  Output none = Shell(Plugin() + " top -n " + ns_);
  ASSERT_EQ(none.rc, 0) << none.out;
  EXPECT_EQ(none.out, "No pod in namespace " + ns_ + " reports GPU usage yet (tessera.io/usage).\n");

  core::PodUsage usage{.at = std::chrono::system_clock::now(),
                       .containers = {{.name = "main", .gpus = {{0, SimGpuUuid(group_ + "-t4-0", 0), 6000, 0.42}}}}};
  nlohmann::json patch = {{"metadata", {{"annotations", {{"tessera.io/usage", core::EncodeUsage(usage).value()}}}}}};
  ASSERT_TRUE(client_->Patch("/api/v1/namespaces/" + ns_ + "/pods/svc", kube::PatchType::kMerge, patch).ok());
  Output top = Shell("COLUMNS=200 " + Plugin() + " top -n " + ns_);
  ASSERT_EQ(top.rc, 0) << top.out;
  EXPECT_TRUE(std::regex_search(top.out, std::regex(ns_ + " +svc +main +" + group_ + "-t4-0 +0 +5\\.9 / 8\\.0 +42% +50%")))
      << top.out;
  Output json = Shell(Plugin() + " top -A -o json");
  ASSERT_EQ(json.rc, 0) << json.out;
  bool found = false;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  for (const auto& row : doc["usage"]) {
    if (row["namespace"] == ns_) found = row["memUsedMiB"] == 6000 && row["memMiB"] == 8192;
  }
  EXPECT_TRUE(found) << json.out;
}

// A DRA claim as kube-scheduler leaves it (written here through the status
// subresource: no driver or allocator is needed to show it) beside a
// device-plugin pod on the same GPU, in inspect and in top.
TEST_F(KubectlTesseraTest, ClaimsAreSharesBesideThePods) {
  AddNodes("T4", 1, 1, 15360);
  ASSERT_TRUE(Submit("svc", {{"main", 1, 8192, 50}}).ok());
  auto svc = WaitForPod(*client_, ns_, "svc", IsBound, seconds(60));
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  const std::string node = group_ + "-t4-0";
  const std::string claims = "/apis/resource.k8s.io/v1/namespaces/" + ns_ + "/resourceclaims";
  nlohmann::json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "infer-gpu"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"},
             {"exactly",
              {{"deviceClassName", "gpu.tessera.io"},
               {"capacity", {{"requests", {{"memory", "4Gi"}, {"compute", "30"}}}}}}}}}}}}}}};
  auto created = client_->Create(claims, claim);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  nlohmann::json status = {
      {"status",
       {{"allocation",
         {{"devices",
           {{"results",
             {{{"request", "gpu"},
               {"driver", "gpu.tessera.io"},
               {"pool", node},
               {"device", "gpu-0"},
               {"shareID", "6f1c2e5a-0d3b-4c8e-9a7f-1b2c3d4e5f60"},
               {"consumedCapacity", {{"memory", "4Gi"}, {"compute", "30"}}}}}}}}}},
        {"reservedFor",
         {{{"resource", "pods"}, {"name", "svc"}, {"uid", (*svc)["metadata"]["uid"]}}}}}}};
  auto allocated = client_->Patch(claims + "/infer-gpu/status", kube::PatchType::kMerge, status);
  ASSERT_TRUE(allocated.ok()) << allocated.status().ToString();

  Output json = Shell(Plugin() + " inspect -o json");
  ASSERT_EQ(json.rc, 0) << json.out;
  const GpuTotals plugin = FromPlugin(nlohmann::json::parse(json.out), {node});
  ASSERT_EQ(plugin.size(), 1u);
  EXPECT_EQ(plugin.begin()->second, (std::array<int64_t, 4>{8192 + 4096, 500 + 300, 1, 15360}));
  Output detail = Shell("COLUMNS=200 " + Plugin() + " inspect -d " + node);
  ASSERT_EQ(detail.rc, 0) << detail.out;
  EXPECT_NE(detail.out.find("2 shares (1 claim)"), std::string::npos) << detail.out;
  EXPECT_TRUE(std::regex_search(detail.out, std::regex("\n +" + ns_ + "/svc\\[claim:infer-gpu\\] +4\\.0 +30%\n")))
      << detail.out;

  // tessera-node writes the claim's use as the entry claim/<name>.
  core::PodUsage usage{.at = std::chrono::system_clock::now(),
                       .containers = {{.name = "claim/infer-gpu", .gpus = {{0, SimGpuUuid(node, 0), 1024, 0.2}}}}};
  nlohmann::json patch = {{"metadata", {{"annotations", {{"tessera.io/usage", core::EncodeUsage(usage).value()}}}}}};
  ASSERT_TRUE(client_->Patch("/api/v1/namespaces/" + ns_ + "/pods/svc", kube::PatchType::kMerge, patch).ok());
  Output top = Shell("COLUMNS=200 " + Plugin() + " top -n " + ns_);
  ASSERT_EQ(top.rc, 0) << top.out;
  EXPECT_TRUE(
      std::regex_search(top.out, std::regex(ns_ + " +svc +claim:infer-gpu +" + node + " +0 +1\\.0 / 4\\.0 +20% +30%")))
      << top.out;
}

// A node whose kubelet reports fewer slots than its inventory lists (its
// agent restarting) is warned about, with the counts, until the kubelet
// reports them again; the node is shown all along.
TEST_F(KubectlTesseraTest, NodesWithoutTheirSlotsAreWarnedAbout) {
  AddNodes("T4", 1, 2, 15360);
  const std::string node = group_ + "-t4-0";
  auto slots = [&](const std::string& count) {
    return client_->Patch("/api/v1/nodes/" + node + "/status", kube::PatchType::kMerge,
                          {{"status", {{"allocatable", {{"tessera.io/gpu", count}}}}}});
  };
  ASSERT_TRUE(slots("0").ok());
  const std::string warning = "warning: node " + node + ": its kubelet reports 0 of the 16 tessera.io/gpu slots";
  Output before = Shell("COLUMNS=200 " + Plugin() + " inspect", /*merge_stderr=*/true);
  ASSERT_EQ(before.rc, 0) << before.out;
  EXPECT_NE(before.out.find(warning), std::string::npos) << before.out;
  EXPECT_NE(before.out.find(node), before.out.rfind(node)) << "the node's rows are missing:\n" << before.out;
  Output json = Shell(Plugin() + " inspect -o json");
  ASSERT_EQ(json.rc, 0) << json.out;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  bool listed = false;
  for (const auto& p : doc["problems"]) listed |= p["object"] == "node " + node;
  EXPECT_TRUE(listed) << json.out;

  ASSERT_TRUE(slots("16").ok());
  Output after = Shell("COLUMNS=200 " + Plugin() + " inspect", /*merge_stderr=*/true);
  ASSERT_EQ(after.rc, 0) << after.out;
  EXPECT_EQ(after.out.find("warning: node " + node + ":"), std::string::npos) << after.out;
}

TEST_F(KubectlTesseraTest, ErrorsAreOneLineWithExitCodes) {
  Output pod = Shell(Plugin() + " -n " + ns_ + " inspect pod nope", true);
  EXPECT_EQ(pod.rc, 1);
  EXPECT_EQ(pod.out, "kubectl-tessera: pod \"nope\" not found in namespace \"" + ns_ + "\"\n");
  Output node = Shell(Plugin() + " inspect -d no-such-node", true);
  EXPECT_EQ(node.rc, 1);
  EXPECT_EQ(node.out, "kubectl-tessera: node \"no-such-node\" not found\n");
  Output usage = Shell(Plugin() + " inspect -o xml", true);
  EXPECT_EQ(usage.rc, 2) << usage.out;
  Output context = Shell(Plugin() + " --context elsewhere inspect", true);
  EXPECT_EQ(context.rc, 1);
  EXPECT_NE(context.out.find("context \"elsewhere\" not found"), std::string::npos) << context.out;
  Output named = Shell(Plugin() + " --context tessera-local inspect -o yaml", true);
  EXPECT_EQ(named.rc, 0) << named.out;
  EXPECT_EQ(named.out.rfind("v: 1\nkind: GpuInventory\n", 0), 0u) << named.out;

  // An API server nobody answers: say which.
  std::ifstream in(env_->kubeconfig);
  std::stringstream text;
  text << in.rdbuf();
  const std::string dead = env_->dir + "/kubeconfig-unreachable";
  std::ofstream(dead) << std::regex_replace(text.str(), std::regex("server: https://[^\\s]+"),
                                            "server: https://127.0.0.1:1");
  Output down = Shell(Quote(env_->bin_dir + "/kubectl-tessera") + " --kubeconfig " + Quote(dead) + " inspect", true);
  EXPECT_EQ(down.rc, 1);
  EXPECT_EQ(down.out.rfind("kubectl-tessera: cannot reach the Kubernetes API server at https://127.0.0.1:1: ", 0), 0u)
      << down.out;
  EXPECT_EQ(std::count(down.out.begin(), down.out.end(), '\n'), 1) << down.out;
}

}  // namespace
}  // namespace tessera::testing
