// One openb trace through the real path: the simulator's FGD arrivals for one
// seed (tessera-sim fgd's protocol: shuffled, inflated to --tune x the GPUs,
// arrival only) become Pod objects in a loopback cluster whose Node objects
// are the trace's GPU nodes; kube-scheduler places them with
// tessera-scheduler as its extender, configured as deploy/ configures it
// (percentageOfNodesToScore: 100, pods without GPUs scored by the /dra
// entry). At the end it counts the GPU shares of the bound pods and prints
// the unallocated GPUs beside the simulator's figure for the same arrivals,
// policy and seed, computed in this process by the same code as
// tessera-sim (issue 23: is the simulator's gain there when deployed?).
//
//   build/bench/trace_replay --data ../shared/data/alibaba-gpu-v2023 --trace default
//                            [--policy tessera] [--seed 42] [--tune 1.3] [--dir out/trace-replay]
//
// The pods are created one after the other in arrival order once the
// schedulers run, so kube-scheduler's queue (priority, then when a pod was
// queued) takes them in that order (created before it starts, its first
// list of thousands of pods came in another order). Unlike the
// simulator, kube-scheduler does not wait for one pod's bind before the
// next pod's filter: the extender holds filter's choice for a GPU pod until
// its bind, and books a pod without GPUs only when the pod watch shows it
// bound. A pod that fits nowhere stays pending (kube-scheduler retries it;
// with arrivals only, nothing frees room for it). The run ends when no pod
// has been bound for --settle seconds.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "core/fragmentation.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "tests/support/cluster_env.h"
#include "tests/support/own_cluster.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string data, trace = "default", policy = "tessera", dir = "out/trace-replay", repo, bin_dir;
  uint64_t seed = 42;
  double tune = 1.3;
  int settle_seconds = 30;
  int timeout_seconds = 1800;
};

// Pod "r-NNNNNN" (the arrival's index) asking for what the trace pod asks:
// CPU and memory as requests, a share as tessera.io/gpu-core (the traces'
// shares are whole percents), whole GPUs as tessera.io/gpu, allowed models
// as tessera.io/gpu-model.
nlohmann::json TracePodObject(size_t index, const core::PodRequest& req) {
  char name[32];
  std::snprintf(name, sizeof name, "r-%06zu", index);
  nlohmann::json requests = {{"cpu", std::to_string(req.cpu_milli) + "m"},
                             {"memory", std::to_string(req.memory_mib) + "Mi"}};
  nlohmann::json limits = nlohmann::json::object();
  nlohmann::json annotations = {{"tessera.io/trace-task", req.key}};
  const core::ContainerRequest& c = req.containers.front();
  if (c.gpu_count > 0) {
    if (c.core_milli_per_gpu >= 1000) {
      limits["tessera.io/gpu"] = std::to_string(c.gpu_count);
    } else {
      limits["tessera.io/gpu-core"] = std::to_string(c.core_milli_per_gpu / 10);
    }
    for (const auto& [resource, value] : limits.items()) requests[resource] = value;
    if (!c.models.allowed.empty()) {
      std::string models;
      for (const auto& m : c.models.allowed) models += (models.empty() ? "" : "|") + m;
      annotations["tessera.io/gpu-model"] = models;
    }
  }
  nlohmann::json container = {{"name", "main"}, {"image", "registry.k8s.io/pause:3.10"},
                              {"resources", {{"requests", requests}}}};
  if (!limits.empty()) container["resources"]["limits"] = limits;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"annotations", annotations}}},
          {"spec",
           {{"containers", nlohmann::json::array({container})},
            {"terminationGracePeriodSeconds", 0},
            // The simulator does not preempt; with this class kube-scheduler
            // skips its preemption pass over every node for each pod that
            // fits nowhere.
            {"priorityClassName", "trace-replay"},
            {"automountServiceAccountToken", false}}}};
}

// The trace's nodes as simulated Nodes: its CPU, memory, GPU count and
// model; GPU memory is not in the traces and no pod asks for it.
std::vector<SimNode> TraceSimNodes(const std::vector<core::NodeInfo>& nodes) {
  std::vector<SimNode> out;
  for (const core::NodeInfo& info : nodes) {
    SimNode node;
    node.info = info;
    node.slots_per_gpu = 64;  // the device-plugin slots: more than the smallest shares fill
    node.max_pods = 1000;     // the simulator has no per-node pod limit
    for (core::GpuInfo& gpu : node.info.gpus) {
      gpu.uuid = SimGpuUuid(info.name, gpu.index);
      gpu.memory_mib = 32768;
      gpu.max_sharers = node.slots_per_gpu;
    }
    out.push_back(std::move(node));
  }
  return out;
}

int64_t GpuMilli(const core::PodRequest& req) { return sim::PodGpuMilli(req); }

int Run(const Args& args) {
  const std::string nodes_csv = args.data + "/openb_node_list_gpu_node.csv";
  const std::string pods_csv = args.data + "/openb_pod_list_" + args.trace + ".csv";
  auto trace = sim::LoadTrace(nodes_csv, pods_csv);
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", trace.status().message().c_str());
    return 2;
  }
  const int64_t capacity = trace->gpus * 1000;
  const std::vector<core::PodRequest> arrivals = sim::FgdArrivals(trace->pods, capacity, args.tune, args.seed);
  // tessera.io/gpu-core is a whole percent: a share the real path cannot ask
  // for exactly would make the two figures differ by rounding.
  for (const core::PodRequest& pod : trace->pods) {
    const int64_t share = pod.containers.front().core_milli_per_gpu;
    if (share < 1000 && share % 10 != 0) {
      std::fprintf(stderr, "%s: pod %s asks for %lld milli of a GPU, not a whole percent\n", pods_csv.c_str(),
                   pod.key.c_str(), static_cast<long long>(share));
      return 2;
    }
  }

  // The simulator's run on the same arrivals.
  sim::ReplayOptions opt{args.policy, args.seed, core::TypicalWorkload(trace->pods, 0.95), {}};
  sim::ReplayStats sim_stats;
  auto sim_run = sim::Replay(trace->nodes, arrivals, opt, &sim_stats);
  if (!sim_run.ok()) {
    std::fprintf(stderr, "simulator: %s\n", sim_run.status().message().c_str());
    return 2;
  }
  const sim::Curve curve = sim::AllocCurve(*sim_run);
  // The allocation after the last arrival (at 130 % arrived with --tune 1.3).
  std::optional<double> sim_alloc;
  for (const std::optional<double>& point : curve)
    if (point) sim_alloc = point;
  if (!sim_alloc) {
    std::fprintf(stderr, "simulator: no allocation recorded (no pod arrived?)\n");
    return 2;
  }
  const double sim_unalloc = 100.0 - *sim_alloc;

  // The cluster.
  const std::string& dir = args.dir;
  auto cluster = OwnCluster::Start(args.repo, dir, "SCHEDULER_QPS=1000 SCHEDULER_BURST=2000 EXTENDER=1 SCHEDULER=0");
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().message().c_str());
    return 1;
  }
  const std::string& cp = (*cluster)->controlplane();
  const std::vector<SimNode> nodes = TraceSimNodes(trace->nodes);
  (*cluster)->ForgetOnExit(nodes);
  // As deploy/ configures kube-scheduler: every feasible node is scored.
  {
    std::ofstream config(dir + "/scheduler-config.yaml", std::ios::app);
    config << "percentageOfNodesToScore: 100\n";
  }
  ::setenv("TESSERA_TEST_KUBECONFIG", (dir + "/kubeconfig").c_str(), 1);
  ::setenv("TESSERA_TEST_CLUSTER_DIR", dir.c_str(), 1);
  ::setenv("TESSERA_BIN_DIR", args.bin_dir.c_str(), 1);
  auto env = ClusterEnv::FromEnvironment();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().message().c_str());
    return 1;
  }
  auto config = kube::LoadKubeconfig(env->kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  config->qps = 1000;
  config->burst = 2000;
  kube::Client client(*config);
  const auto start = Clock::now();
  if (Status s = CreateSimNodes(client, nodes); !s.ok()) {
    std::fprintf(stderr, "creating nodes: %s\n", s.message().c_str());
    return 1;
  }
  const nlohmann::json priority_class = {{"apiVersion", "scheduling.k8s.io/v1"},
                                         {"kind", "PriorityClass"},
                                         {"metadata", {{"name", "trace-replay"}}},
                                         {"value", 0},
                                         {"preemptionPolicy", "Never"}};
  if (Status s = client.Create("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class).status(); !s.ok()) {
    std::fprintf(stderr, "creating the PriorityClass: %s\n", s.message().c_str());
    return 1;
  }
  const double setup_seconds = std::chrono::duration<double>(Clock::now() - start).count();

  auto extender = env->StartExtender({"--log-level", "info", "--policy", args.policy, "--kube-api-qps", "1000",
                                      "--kube-api-burst", "2000"});
  if (!extender.ok()) {
    std::fprintf(stderr, "tessera-scheduler: %s\n", extender.status().message().c_str());
    return 1;
  }
  if (Sh(cp + "/scheduler-up.sh " + dir + " >/dev/null") != 0) {
    std::fprintf(stderr, "scheduler-up.sh failed\n");
    return 1;
  }
  // One pod after the other, in arrival order, with kube-scheduler running:
  // its queue takes pods of one priority in the order they were queued.
  const auto scheduling = Clock::now();
  for (size_t i = 0; i < arrivals.size(); ++i) {
    if (Status s = client.Create("/api/v1/namespaces/default/pods", TracePodObject(i, arrivals[i])).status();
        !s.ok()) {
      std::fprintf(stderr, "creating pod %zu: %s\n", i, s.message().c_str());
      return 1;
    }
  }
  const double create_seconds = std::chrono::duration<double>(Clock::now() - scheduling).count();

  // Bound pods, polled by LIST every 5 s until none is bound for --settle s.
  std::map<std::string, std::string> bound;  // pod name -> node
  auto last_change = Clock::now();
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    auto list = client.List("/api/v1/namespaces/default/pods");
    if (!list.ok()) continue;
    size_t before = bound.size();
    for (const auto& pod : (*list)["items"]) {
      const std::string node = pod["spec"].value("nodeName", "");
      if (!node.empty()) bound[pod["metadata"].value("name", "")] = node;
    }
    const auto now = Clock::now();
    if (bound.size() != before) last_change = now;
    if (bound.size() == arrivals.size() || now - last_change > std::chrono::seconds(args.settle_seconds)) break;
    if (now - scheduling > std::chrono::seconds(args.timeout_seconds)) {
      std::fprintf(stderr, "timed out after %d s with %zu of %zu pods bound\n", args.timeout_seconds,
                   bound.size(), arrivals.size());
      break;
    }
  }
  const double place_seconds =
      std::chrono::duration<double>(last_change - scheduling).count();

  int64_t allocated = 0, demanded = 0;
  size_t gpu_pods = 0, gpu_bound = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const int64_t milli = GpuMilli(arrivals[i]);
    demanded += milli;
    if (milli > 0) ++gpu_pods;
    char name[32];
    std::snprintf(name, sizeof name, "r-%06zu", i);
    if (bound.count(name) == 0) continue;
    allocated += milli;
    if (milli > 0) ++gpu_bound;
  }
  const double real_unalloc = 100.0 - 100.0 * static_cast<double>(allocated) / static_cast<double>(capacity);
  std::printf("trace %s, policy %s, seed %llu, tune %.2f: %zu nodes, %lld GPUs, %zu pods (%zu with GPUs), "
              "GPU demand %.1f %% of capacity\n",
              args.trace.c_str(), args.policy.c_str(), static_cast<unsigned long long>(args.seed), args.tune,
              nodes.size(), static_cast<long long>(trace->gpus), arrivals.size(), gpu_pods,
              100.0 * static_cast<double>(demanded) / static_cast<double>(capacity));
  std::printf("%-30s %10s %14s %16s\n", "", "placed", "GPU pods placed", "unallocated GPU %");
  std::printf("%-30s %10lld %14s %16.2f\n", "simulator", static_cast<long long>(sim_stats.placed), "-",
              sim_unalloc);
  std::printf("%-30s %10zu %14zu %16.2f\n", "kube-scheduler + extender", bound.size(), gpu_bound, real_unalloc);
  std::printf("setup %.0f s, pods created in %.0f s, placing %.0f s (to the last bind); logs under %s/logs\n",
              setup_seconds, create_seconds, place_seconds, dir.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace tessera::testing

int main(int argc, char** argv) {
  tessera::testing::Args args;
  args.repo = ".";
  CLI::App app{"one openb trace through kube-scheduler and tessera-scheduler, against the simulator"};
  app.add_option("--data", args.data, "folder with the openb CSVs (default: REPO/../shared/data/alibaba-gpu-v2023)");
  app.add_option("--trace", args.trace, "pod list: openb_pod_list_TRACE.csv")->capture_default_str();
  app.add_option("--policy", args.policy, "tessera-scheduler's --policy")->capture_default_str();
  app.add_option("--seed", args.seed, "the arrival order's seed")->capture_default_str();
  app.add_option("--tune", args.tune, "GPU demand as a multiple of the GPUs")->capture_default_str();
  app.add_option("--settle", args.settle_seconds, "seconds without a bind that end the run")->capture_default_str();
  app.add_option("--timeout", args.timeout_seconds, "most seconds of scheduling")->capture_default_str();
  app.add_option("--dir", args.dir, "where the cluster lives (logs stay there)")->capture_default_str();
  app.add_option("--repo", args.repo, "repository root (for tools/controlplane)")->capture_default_str();
  app.add_option("--bin-dir", args.bin_dir, "folder with tessera-scheduler (default: beside this binary's build tree)");
  CLI11_PARSE(app, argc, argv);
  if (args.bin_dir.empty())
    args.bin_dir = (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "bin").string();
  args.repo = std::filesystem::canonical(args.repo).string();
  if (args.data.empty()) args.data = args.repo + "/../shared/data/alibaba-gpu-v2023";
  std::filesystem::create_directories(args.dir);
  args.dir = std::filesystem::canonical(args.dir).string();
  return tessera::testing::Run(args);
}
