// Real kube-scheduler throughput with and without Tessera's extender, on the
// same pods over the same simulated nodes, measured in one run (issue 3 (b);
// target: with >= 0.8x of without).
//
//   build/bench/scheduling_throughput [--nodes 200] [--pods 1000] [--dir out/bench-scheduling]
//
// For each mode it starts a fresh loopback cluster without kube-scheduler,
// creates the nodes and all pods, then starts kube-scheduler (and, in the
// "with" mode, tessera-scheduler as its extender) and times the binds: from
// the first bound pod to the last, so API-server load from creating pods and
// the scheduler's start-up are outside the window.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "core/random.h"
#include "tests/support/cluster_env.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct RunResult {
  int bound = 0;
  double seconds = 0;
  double pods_per_second() const { return seconds > 0 ? (bound - 1) / seconds : 0; }
};

int Sh(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

// The version the kube-scheduler that cluster-up.sh starts reports ("v1.36.3"),
// or "(unknown version)"; the same binary cluster-up.sh picks.
std::string KubeSchedulerVersion(const std::string& repo) {
  const char* env_bin = std::getenv("TESSERA_CONTROLPLANE_BIN");
  const std::string bin = env_bin != nullptr && *env_bin != '\0' ? env_bin : repo + "/tools/controlplane/bin";
  std::string version;
  if (FILE* out = popen(("'" + bin + "/kube-scheduler' --version 2>/dev/null").c_str(), "r")) {
    char line[256];
    if (std::fgets(line, sizeof line, out) != nullptr) version = line;  // "Kubernetes v1.36.3\n"
    pclose(out);
  }
  const auto space = version.find(' ');
  if (space == std::string::npos) return "(unknown version)";
  version = version.substr(space + 1);
  while (!version.empty() && (version.back() == '\n' || version.back() == ' ')) version.pop_back();
  return version.empty() ? "(unknown version)" : version;
}

Result<RunResult> RunMode(bool with_extender, int node_count, int pod_count, int qps, const std::string& root,
                          const std::string& repo, const std::string& bin_dir) {
  const std::string dir = root + (with_extender ? "/with" : "/without");
  const std::string cp = repo + "/tools/controlplane";
  Sh(cp + "/cluster-down.sh " + dir + " >/dev/null 2>&1");
  // Both API clients get the same rate limit: kube-scheduler's (its binds
  // and events without the extender) and tessera-scheduler's (its binds).
  const std::string limits = "SCHEDULER_QPS=" + std::to_string(qps) + " SCHEDULER_BURST=" + std::to_string(2 * qps);
  if (Sh(limits + " EXTENDER=" + std::string(with_extender ? "1" : "0") + " SCHEDULER=0 " + cp + "/cluster-up.sh " + dir +
         " >/dev/null") != 0) {
    return Internal("cluster-up.sh failed for " + dir);
  }
  struct Down {
    std::string cmd;
    ~Down() { Sh(cmd); }
  } down{cp + "/cluster-down.sh " + dir + " >/dev/null 2>&1"};

  ::setenv("TESSERA_TEST_KUBECONFIG", (dir + "/kubeconfig").c_str(), 1);
  ::setenv("TESSERA_TEST_CLUSTER_DIR", dir.c_str(), 1);
  ::setenv("TESSERA_BIN_DIR", bin_dir.c_str(), 1);
  TESSERA_ASSIGN_OR_RETURN(ClusterEnv env, ClusterEnv::FromEnvironment());
  TESSERA_ASSIGN_OR_RETURN(kube::ClientConfig config, kube::LoadKubeconfig(env.kubeconfig));
  config.qps = 1000;
  config.burst = 2000;
  kube::Client client(config);

  auto nodes = UniformSimNodes("bench", node_count, 8, "A100", 81920);
  TESSERA_RETURN_IF_ERROR(CreateSimNodes(client, nodes));

  // The same pods in both modes: shares of one GPU, seeded.
  core::Rng rng(42);
  const int64_t mems[] = {4096, 8192, 16384};
  const int cores[] = {10, 20, 30};
  std::vector<nlohmann::json> pods;
  for (int i = 0; i < pod_count; ++i) {
    pods.push_back(GpuPod("default", "bench-" + std::to_string(i), {{"main", 1, mems[rng.Below(3)], cores[rng.Below(3)]}}));
  }
  std::vector<std::thread> creators;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    creators.emplace_back([&, t] {
      for (size_t i = t; i < pods.size(); i += 8) {
        if (!client.Create("/api/v1/namespaces/default/pods", pods[i]).ok()) ++failures;
      }
    });
  }
  for (auto& t : creators) t.join();
  if (failures > 0) return Internal(std::to_string(failures.load()) + " pod creations failed");

  std::optional<ChildProcess> extender;
  if (with_extender) {
    TESSERA_ASSIGN_OR_RETURN(ChildProcess child, env.StartExtender({"--log-level", "info", "--kube-api-qps", std::to_string(qps),
                                                                   "--kube-api-burst", std::to_string(2 * qps)}));
    extender.emplace(std::move(child));
  }
  if (Sh(cp + "/scheduler-up.sh " + dir + " >/dev/null") != 0) return Internal("scheduler-up.sh failed");

  RunResult result;
  std::optional<Clock::time_point> first;
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (Clock::now() < deadline) {
    TESSERA_ASSIGN_OR_RETURN(auto list, client.List("/api/v1/namespaces/default/pods", "", "spec.nodeName!="));
    const int bound = static_cast<int>(list["items"].size());
    const auto now = Clock::now();
    if (bound > 0 && !first) first = now;
    if (bound >= pod_count) {
      result.bound = bound;
      result.seconds = std::chrono::duration<double>(now - *first).count();
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return FailedPrecondition("not every pod was bound within 300 s (mode " +
                            std::string(with_extender ? "with" : "without") + " extender)");
}

}  // namespace
}  // namespace tessera::testing

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"kube-scheduler pods/s with and without tessera-scheduler"};
  int nodes = 200, pods = 1000;
  std::string dir = "out/bench-scheduling";
  std::string repo = ".";
  std::string bin_dir;
  app.add_option("--nodes", nodes);
  app.add_option("--pods", pods);
  int qps = 200;
  app.add_option("--qps", qps, "API client rate limit of kube-scheduler and tessera-scheduler alike (burst 2x)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "where the two clusters live (logs stay there)");
  app.add_option("--repo", repo, "repository root (for tools/controlplane)");
  app.add_option("--bin-dir", bin_dir, "folder with tessera-scheduler (default: beside this binary's build tree)");
  CLI11_PARSE(app, argc, argv);
  if (bin_dir.empty()) bin_dir = (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "bin").string();
  std::filesystem::create_directories(dir);
  dir = std::filesystem::canonical(dir).string();
  repo = std::filesystem::canonical(repo).string();

  auto without = testing::RunMode(false, nodes, pods, qps, dir, repo, bin_dir);
  if (!without.ok()) {
    std::fprintf(stderr, "without extender: %s\n", without.status().message().c_str());
    return 1;
  }
  auto with = testing::RunMode(true, nodes, pods, qps, dir, repo, bin_dir);
  if (!with.ok()) {
    std::fprintf(stderr, "with extender: %s\n", with.status().message().c_str());
    return 1;
  }
  std::printf("kube-scheduler %s, %d pods over %d simulated nodes (8 GPUs each), client limits %d qps / %d burst\n",
              testing::KubeSchedulerVersion(repo).c_str(), pods, nodes, qps, 2 * qps);
  std::printf("%-28s %8s %10s %8s\n", "mode", "seconds", "pods/s", "ratio");
  std::printf("%-28s %8.2f %10.1f %8.2f\n", "without extender (baseline)", without->seconds,
              without->pods_per_second(), 1.0);
  std::printf("%-28s %8.2f %10.1f %8.2f\n", "with tessera-scheduler", with->seconds, with->pods_per_second(),
              with->pods_per_second() / without->pods_per_second());
  return 0;
}
