// Real kube-scheduler throughput with and without Tessera's extender, on the
// same pods over the same simulated nodes, measured in one run (issue 3 (b);
// target: with >= 0.8x of without).
//
//   build/bench/scheduling_throughput [--nodes 200] [--pods 1000] [--qps 200] [--pairs 1]
//                                     [--extender-flag=--filter-returns-best=false ...]
//                                     [--dir out/bench-scheduling]
//
// For each mode it starts a fresh loopback cluster without kube-scheduler,
// creates the nodes and all pods, then starts kube-scheduler (and, in the
// "with" mode, tessera-scheduler as its extender) and times the binds: from
// the first bound pod to the last, so API-server load from creating pods and
// the scheduler's start-up are outside the window. --pairs N runs the two
// modes back to back N times (alternating which goes first) and prints a
// row per pair, then the ratio's min / median / max and each mode's
// control-plane CPU per pod. Each row also gives the rate between the 10th
// and the 90th percentile bind ("10-90%") and its ratio: the same run
// without either mode's start and drain, which in a window of a few
// seconds can decide a pair.
//
// Per mode it also prints the 1-minute load average when the window opened
// (other work on the machine skews both modes) and the CPU seconds each
// control-plane process used inside the window, and it saves kube-scheduler's,
// tessera-scheduler's and the API server's /metrics at the window's end under
// DIR/{without,with}/metrics/ (per-verb latency and call counts).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "core/random.h"
#include "tests/support/cluster_env.h"
#include "tests/support/own_cluster.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct RunResult {
  int bound = 0;
  double seconds = 0;
  double load_average = 0;                // 1-minute load average when the window opened
  std::map<std::string, double> cpu;      // process -> CPU seconds inside the window
  std::vector<double> bound_at;           // seconds from the first bind to each bind, in order
  double pods_per_second() const { return seconds > 0 ? (bound - 1) / seconds : 0; }
  // The rate between the 10th and the 90th percentile bind: the window
  // without either mode's start (first connections, first binds queueing
  // at the API server) and drain (the last binds, the scheduler idle).
  double middle_pods_per_second() const {
    if (bound_at.size() < 10) return pods_per_second();
    const size_t lo = bound_at.size() / 10, hi = bound_at.size() * 9 / 10;
    const double span = bound_at[hi] - bound_at[lo];
    return span > 0 ? static_cast<double>(hi - lo) / span : 0;
  }
};

double LoadAverage() {
  double one = 0;
  std::ifstream in("/proc/loadavg");
  in >> one;
  return one;
}

// User + system CPU seconds of process `pid` so far (0 when it cannot be read).
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {  // field 3 is the state
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
    if (i == 15) break;
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The cluster's processes by name, from DIR/pids ("kube-scheduler", ...;
// a tessera-scheduler-PORT.pid file counts as "tessera-scheduler").
std::map<std::string, pid_t> ClusterPids(const std::string& dir) {
  std::map<std::string, pid_t> pids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/pids", ec)) {
    std::string name = entry.path().stem().string();
    if (name.starts_with("tessera-scheduler")) name = "tessera-scheduler";
    std::ifstream in(entry.path());
    pid_t pid = 0;
    if (in >> pid) pids[name] = pid;
  }
  return pids;
}

std::map<std::string, double> CpuOf(const std::map<std::string, pid_t>& pids) {
  std::map<std::string, double> cpu;
  for (const auto& [name, pid] : pids) cpu[name] = CpuSeconds(pid);
  return cpu;
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
                          const std::string& repo, const std::string& bin_dir,
                          const std::vector<std::string>& extender_flags) {
  const std::string dir = root + (with_extender ? "/with" : "/without");
  // Both API clients get the same rate limit: kube-scheduler's (its binds
  // and events without the extender) and tessera-scheduler's (its binds).
  const std::string limits = "SCHEDULER_QPS=" + std::to_string(qps) + " SCHEDULER_BURST=" + std::to_string(2 * qps);
  TESSERA_ASSIGN_OR_RETURN(
      std::unique_ptr<OwnCluster> cluster,
      OwnCluster::Start(repo, dir, limits + " EXTENDER=" + std::string(with_extender ? "1" : "0") + " SCHEDULER=0"));
  const std::string& cp = cluster->controlplane();
  auto nodes = UniformSimNodes("bench", node_count, 8, "A100", 81920);
  cluster->ForgetOnExit(nodes);

  ::setenv("TESSERA_TEST_KUBECONFIG", (dir + "/kubeconfig").c_str(), 1);
  ::setenv("TESSERA_TEST_CLUSTER_DIR", dir.c_str(), 1);
  ::setenv("TESSERA_BIN_DIR", bin_dir.c_str(), 1);
  TESSERA_ASSIGN_OR_RETURN(ClusterEnv env, ClusterEnv::FromEnvironment());
  TESSERA_ASSIGN_OR_RETURN(kube::ClientConfig config, kube::LoadKubeconfig(env.kubeconfig));
  config.qps = 1000;
  config.burst = 2000;
  kube::Client client(config);

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
    std::vector<std::string> flags = {"--log-level", "info", "--kube-api-qps", std::to_string(qps),
                                      "--kube-api-burst", std::to_string(2 * qps)};
    flags.insert(flags.end(), extender_flags.begin(), extender_flags.end());
    TESSERA_ASSIGN_OR_RETURN(ChildProcess child, env.StartExtender(flags));
    extender.emplace(std::move(child));
  }
  if (Sh(cp + "/scheduler-up.sh " + dir + " >/dev/null") != 0) return Internal("scheduler-up.sh failed");

  RunResult result;
  const std::map<std::string, pid_t> pids = ClusterPids(dir);
  std::map<std::string, double> cpu_at_first;
  std::optional<Clock::time_point> first;
  // Binds are counted from one pod watch (an event per bind), not by
  // listing the pods over and over: a LIST of 1,000 pods costs the API
  // server tens of ms of CPU, which on a small machine would tax the slower
  // mode more, for longer.
  std::set<std::string> bound;
  std::string resource_version;
  auto relist = [&]() -> Status {
    TESSERA_ASSIGN_OR_RETURN(auto list, client.List("/api/v1/namespaces/default/pods"));
    resource_version = list.value("resourceVersion", "");
    for (const auto& pod : list["items"]) {
      if (!pod["spec"].value("nodeName", "").empty()) bound.insert(pod["metadata"].value("name", ""));
    }
    return Status();
  };
  TESSERA_RETURN_IF_ERROR(relist());
  if (static_cast<int>(bound.size()) >= pod_count) return Internal("pods were bound before the schedulers started");
  auto on_event = [&](const kube::WatchEvent& event) {
    const auto& meta = event.object["metadata"];
    if (meta.contains("resourceVersion")) resource_version = meta.value("resourceVersion", "");
    if (event.type != "ADDED" && event.type != "MODIFIED") return true;
    if (event.object["spec"].value("nodeName", "").empty()) return true;
    if (!bound.insert(meta.value("name", "")).second) return true;
    const auto now = Clock::now();
    if (!first) {
      first = now;
      result.load_average = LoadAverage();
      cpu_at_first = CpuOf(pids);
    }
    result.bound_at.push_back(std::chrono::duration<double>(now - *first).count());
    if (static_cast<int>(bound.size()) < pod_count) return true;
    result.bound = static_cast<int>(bound.size());
    result.seconds = std::chrono::duration<double>(now - *first).count();
    return false;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  Status last_error;
  while (result.bound == 0 && Clock::now() < deadline) {
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count());
    Status st = client.Watch("/api/v1/namespaces/default/pods", resource_version, on_event, nullptr, std::max(1, left));
    if (st.ok()) continue;
    // A busy API server may time a watch out; go on from where it ended
    // (after a relist when the version is too old).
    last_error = st;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const size_t seen = bound.size();
    if (st.code() == StatusCode::kOutOfRange && relist().ok() && first) {
      // Binds found by the relist count as seen now.
      const double at = std::chrono::duration<double>(Clock::now() - *first).count();
      result.bound_at.resize(result.bound_at.size() + (bound.size() - seen), at);
      if (static_cast<int>(bound.size()) >= pod_count) {
        result.bound = static_cast<int>(bound.size());
        result.seconds = at;
      }
    }
  }
  if (result.bound == 0 && !last_error.ok()) return Internal("watching the pods: " + last_error.message());
  if (result.bound > 0) {
    for (const auto& [name, seconds] : CpuOf(pids)) result.cpu[name] = seconds - cpu_at_first[name];
    // Both schedulers' /metrics as the window closed, for the breakdown.
    std::filesystem::create_directories(dir + "/metrics");
    std::string ks_port;
    if (std::ifstream in(dir + "/kube-scheduler.port"); in >> ks_port) {
      Sh("curl -sfk https://127.0.0.1:" + ks_port + "/metrics -o " + dir + "/metrics/kube-scheduler.txt");
    }
    // The API server's (request counts by verb and resource), with the admin token.
    Sh("set -a; . " + dir + "/cluster.env; curl -sf --cacert " + dir + "/pki/ca.crt -H \"Authorization: Bearer $(cut -d, -f1 " +
       dir + "/pki/tokens.csv | head -n1)\" \"$TESSERA_APISERVER/metrics\" -o " + dir + "/metrics/kube-apiserver.txt");
    if (with_extender) {
      Sh("curl -sf http://127.0.0.1:" + std::to_string(env.extender_port) + "/metrics -o " + dir +
         "/metrics/tessera-scheduler.txt");
    }
    return result;
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
  int pairs = 1;
  app.add_option("--pairs", pairs, "run both modes back to back this many times")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "where the two clusters live (logs stay there)");
  app.add_option("--repo", repo, "repository root (for tools/controlplane)");
  std::vector<std::string> extender_flags;
  app.add_option("--extender-flag", extender_flags,
                 "a flag for tessera-scheduler (repeat; e.g. --extender-flag=--filter-returns-best=false)");
  app.add_option("--bin-dir", bin_dir, "folder with tessera-scheduler (default: beside this binary's build tree)");
  CLI11_PARSE(app, argc, argv);
  if (bin_dir.empty()) bin_dir = (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "bin").string();
  std::filesystem::create_directories(dir);
  dir = std::filesystem::canonical(dir).string();
  repo = std::filesystem::canonical(repo).string();

  std::printf("kube-scheduler %s, %d pods over %d simulated nodes (8 GPUs each), client limits %d qps / %d burst\n",
              testing::KubeSchedulerVersion(repo).c_str(), pods, nodes, qps, 2 * qps);
  std::printf("%-4s %-28s %8s %10s %8s %11s %9s %6s  %s\n", "pair", "mode", "seconds", "pods/s", "ratio",
              "10-90% p/s", "10-90% r", "load", "CPU seconds in the window");
  std::fflush(stdout);
  auto cpu_text = [](const testing::RunResult& r) {
    std::string text;
    for (const auto& [name, seconds] : r.cpu) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %.1f", text.empty() ? "" : ", ", name.c_str(), seconds);
      text += buf;
    }
    return text;
  };
  // Odd pairs run the baseline first, even pairs the extender first, so
  // neither mode always inherits the machine the other just left.
  std::vector<double> ratios, middle_ratios;
  double cpu_ms_without = 0, cpu_ms_with = 0, cpu_ms_extender = 0;
  int bound_without = 0, bound_with = 0;
  for (int pair = 1; pair <= pairs; ++pair) {
    Result<testing::RunResult> without = Status::Ok(), with = Status::Ok();
    for (const bool extender : pair % 2 == 1 ? std::vector<bool>{false, true} : std::vector<bool>{true, false}) {
      auto run = testing::RunMode(extender, nodes, pods, qps, dir, repo, bin_dir,
                                  extender ? extender_flags : std::vector<std::string>{});
      if (!run.ok()) {
        std::fprintf(stderr, "%s extender: %s\n", extender ? "with" : "without", run.status().message().c_str());
        return 1;
      }
      (extender ? with : without) = std::move(run);
    }
    const double ratio = with->pods_per_second() / without->pods_per_second();
    ratios.push_back(ratio);
    const double middle_ratio = with->middle_pods_per_second() / without->middle_pods_per_second();
    middle_ratios.push_back(middle_ratio);
    for (const auto& [name, seconds] : without->cpu) cpu_ms_without += 1000 * seconds;
    for (const auto& [name, seconds] : with->cpu) {
      cpu_ms_with += 1000 * seconds;
      if (name == "tessera-scheduler") cpu_ms_extender += 1000 * seconds;
    }
    bound_without += without->bound;
    bound_with += with->bound;
    std::printf("%-4d %-28s %8.2f %10.1f %8.2f %11.1f %9.2f %6.2f  %s\n", pair, "without extender (baseline)",
                without->seconds, without->pods_per_second(), 1.0, without->middle_pods_per_second(), 1.0,
                without->load_average, cpu_text(*without).c_str());
    std::printf("%-4d %-28s %8.2f %10.1f %8.2f %11.1f %9.2f %6.2f  %s\n", pair, "with tessera-scheduler", with->seconds,
                with->pods_per_second(), ratio, with->middle_pods_per_second(), middle_ratio, with->load_average,
                cpu_text(*with).c_str());
    std::fflush(stdout);
  }
  // The spread of the ratio, and where the CPU went: control-plane CPU per
  // bound pod in each mode (all processes listed above), and the
  // extender's own part of it.
  auto spread = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t mid = values.size() / 2;
    const double median = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
    char text[96];
    std::snprintf(text, sizeof text, "min %.2f, median %.2f, max %.2f", values.front(), median, values.back());
    return std::string(text);
  };
  // On a machine the control plane saturates, throughput follows CPU per
  // pod, so their quotient is the ratio the CPU allows, steadier than any
  // one pair's.
  const double per_pod_without = cpu_ms_without / std::max(1, bound_without);
  const double per_pod_with = cpu_ms_with / std::max(1, bound_with);
  std::printf("ratio over %d pair(s): %s (10-90%%: %s); CPU ms per pod: without %.2f, with %.2f "
              "(tessera-scheduler %.2f), their quotient %.2f\n",
              pairs, spread(ratios).c_str(), spread(middle_ratios).c_str(), per_pod_without, per_pod_with,
              cpu_ms_extender / std::max(1, bound_with), per_pod_with > 0 ? per_pod_without / per_pod_with : 0.0);
  return 0;
}
