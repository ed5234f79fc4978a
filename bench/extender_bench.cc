// Filter + prioritize cycles of the scheduler extender at the target scale:
// 5,000 nodes with 8 GPUs each (40,000 GPUs, mixed models), half of all GPU
// compute already taken by random shares booked through the ledger. Each
// cycle asks for a typical pod (1 GPU with 8 GiB and 30 %, and three other
// common shapes in turn) with the names of all 5,000 nodes, as kube-scheduler
// does with nodeCacheCapable: true.
//   in_process  the handlers called directly (the baseline)
//   in_process+bind  a new pod each cycle, bound to the best node, so nodes
//               change and the policy keeps learning as in production
//   in_process_best+bind  the same with filter_returns_best (tessera-scheduler's
//               default): filter answers the best node, no prioritize call
//   without_gpus+bound  /dra/prioritize (PrioritizeClaims) for a new pod
//               without GPUs each cycle (1, 4 or 16 CPUs; place_pods_without_gpus),
//               which is then bound to the node scored 10 as the pod watch
//               shows it (kube-scheduler binds such pods), so nodes change
//   http        the same bodies POSTed over loopback to the real server
//   http_2conn  two client connections at once, as kube-scheduler's
//               concurrent prioritize calls and binds do (throughput)
// Each reports per-cycle latency percentiles and cycles/s as counters, and
// the run ends with the HTTP / in-process ratios.
//
//   build/bench/extender_bench [--benchmark_filter=http]
//   TESSERA_BENCH_POLICY=tessera-v1 build/bench/extender_bench   (default: the extender's default policy)
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <thread>

#include "core/random.h"
#include "scheduler/cluster_state.h"
#include "scheduler/extender.h"
#include "scheduler/server.h"
#include "scheduler/test_cluster.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;
using Seconds = std::chrono::duration<double>;

constexpr int kNodes = 5000;
constexpr int kGpusPerNode = 8;
constexpr int kBodies = 64;

struct Model {
  const char* name;
  int64_t mem_mib;
};
constexpr Model kModels[] = {{"A100", 81920}, {"A100", 40960}, {"H100", 81559}, {"L4", 23034}, {"T4", 15360}};

std::shared_ptr<spdlog::logger> Quiet() {
  return std::make_shared<spdlog::logger>("bench", std::make_shared<spdlog::sinks::null_sink_mt>());
}

// A pod as kube-scheduler sends it: labels, env, mounts, tolerations.
json TypicalPod(int i, const testing::Container& c) {
  char name[16];
  std::snprintf(name, sizeof name, "job-%06d", i);
  json pod = testing::PodJson("team-" + std::to_string(i % 17), name, {c});
  pod["metadata"]["labels"] = {{"app", "inference"}, {"team", "vision"}, {"pod-template-hash", "7c9f8d6b5"}};
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", "inference-7c9f8d6b5"},
                                         {"uid", "0f4c7a2e-5d1b-4a8e-9c3f-2b7d6e1a9c04"}, {"controller", true}}};
  json& ctr = pod["spec"]["containers"][0];
  for (int e = 0; e < 12; ++e) ctr["env"].push_back({{"name", "ENV_VAR_" + std::to_string(e)}, {"value", "some-value-" + std::to_string(e)}});
  ctr["volumeMounts"] = {{{"name", "model-cache"}, {"mountPath", "/models"}}, {{"name", "kube-api-access"}, {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}, {"readOnly", true}}};
  ctr["ports"] = {{{"containerPort", 8080}, {"protocol", "TCP"}}};
  pod["spec"]["volumes"] = {{{"name", "model-cache"}, {"emptyDir", json::object()}}};
  pod["spec"]["tolerations"] = {{{"key", "node.kubernetes.io/not-ready"}, {"operator", "Exists"}, {"effect", "NoExecute"}, {"tolerationSeconds", 300}}};
  pod["spec"]["priority"] = 0;
  pod["spec"]["serviceAccountName"] = "default";
  return pod;
}

struct Cluster {
  std::unique_ptr<ClusterState> state;
  testing::FakeBinder binder;
  std::unique_ptr<Extender> extender;
  std::unique_ptr<Extender> best_extender;  // the same with filter_returns_best
  std::vector<std::string> bodies;
  std::vector<std::string> names;  // every node, as kube-scheduler lists them
  double core_used = 0;  // share of all GPU compute taken
};

Cluster& TheCluster() {
  static Cluster* c = [] {
    auto* out = new Cluster;
    ClusterStateOptions so;
    so.logger = Quiet();
    out->state = std::make_unique<ClusterState>(so);
    std::vector<std::string> names;
    for (int i = 0; i < kNodes; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "gpu-node-%05d", i);
      names.push_back(name);
      const Model& m = kModels[i % 5];
      out->state->UpsertNode(testing::NodeJson(name, kGpusPerNode, m.name, m.mem_mib, "128", "1Ti"));
    }
    // Half of all GPU compute taken by random pods, booked as the extender would.
    core::Rng rng(42);
    const int64_t target = int64_t{kNodes} * kGpusPerNode * 1000 / 2;
    int64_t used = 0;
    for (int p = 0; used < target; ++p) {
      const std::string& node = names[rng.Below(kNodes)];
      core::PodRequest req;
      req.key = "load/p" + std::to_string(p);
      req.cpu_milli = 2000;
      req.memory_mib = 8192;
      const bool whole = rng.Below(5) == 0;
      const int gpus = whole ? 1 << rng.Below(3) : 1;
      const int64_t core_milli = whole ? 1000 : 100 * static_cast<int64_t>(1 + rng.Below(7));
      const int64_t mem = whole ? 0 : 1024 * static_cast<int64_t>(1 + rng.Below(12));
      req.containers.push_back({"main", gpus, mem, core_milli, {}});
      auto pick = [&](const core::NodeState& n) -> Result<core::Assignment> {
        core::GpuPick gp;
        if (!core::PickGpus(req, n, core::GpuSelect::kRandom, &rng, &gp)) return ResourceExhausted("full");
        return core::MakeAssignment(req, n, gp);
      };
      if (testing::PickAndAssume(*out->state, req, "u" + std::to_string(p), node, pick, Clock::now()).ok())
        used += gpus * core_milli;
    }
    out->core_used = static_cast<double>(used) / (kNodes * kGpusPerNode * 1000.0);
    out->names = names;
    ExtenderOptions eo;
    eo.logger = Quiet();
    eo.place_pods_without_gpus = true;  // only without_gpus+bound asks PrioritizeClaims
    // TESSERA_BENCH_POLICY=tessera-v1 measures another policy the same way.
    if (const char* policy = std::getenv("TESSERA_BENCH_POLICY")) eo.policy = policy;
    auto e = Extender::Create(*out->state, out->binder, eo);
    if (!e.ok()) std::abort();
    out->extender = std::move(e).value();
    eo.filter_returns_best = true;
    auto best = Extender::Create(*out->state, out->binder, eo);
    if (!best.ok()) std::abort();
    out->best_extender = std::move(best).value();
    const testing::Container shapes[] = {
        {"main", 1, 8192, 30}, {"main", 1, 4096, 20}, {"main", 1, 16384, 50}, {"main", 1, 0, 0}};
    for (int i = 0; i < kBodies; ++i) out->bodies.push_back(testing::FilterBody(TypicalPod(i, shapes[i % 4]), names));
    return out;
  }();
  return *c;
}

struct Result {
  double p50_ms = 0, p99_ms = 0, cycles_per_s = 0;
};
std::map<std::string, Result>& Results() {
  static std::map<std::string, Result> r;
  return r;
}

// Per-cycle times -> counters (and Results() under `name`).
void Report(benchmark::State& state, const std::string& name, std::vector<double> ms, double wall_s) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  Result r{pct(0.50), pct(0.99), static_cast<double>(ms.size()) / wall_s};
  state.counters["p50_ms"] = r.p50_ms;
  state.counters["p99_ms"] = r.p99_ms;
  state.counters["max_ms"] = ms.back();
  state.counters["cycles_per_s"] = r.cycles_per_s;
  state.counters["body_KiB"] = static_cast<double>(TheCluster().bodies[0].size()) / 1024.0;
  state.counters["gpu_core_used"] = TheCluster().core_used;
  Results()[name] = r;
}

void Check(benchmark::State& state, int status, const std::string& body) {
  if (status != 200 || body.empty()) state.SkipWithError(("reply " + std::to_string(status)).c_str());
}

void BM_InProcess(benchmark::State& state) {
  Cluster& c = TheCluster();
  std::vector<double> ms;
  size_t i = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const std::string& body = c.bodies[i++ % c.bodies.size()];
    const auto t0 = std::chrono::steady_clock::now();
    HttpReply f = c.extender->Filter(body);
    HttpReply p = c.extender->Prioritize(body);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    Check(state, f.status, f.body);
    Check(state, p.status, p.body);
  }
  Report(state, "in_process", ms, Seconds(std::chrono::steady_clock::now() - start).count());
}

// The full scheduling cycle of a new pod each time: filter, prioritize, then
// bind to the best node, so the cluster changes as it would in production
// (one node per cycle; the policy keeps learning from the bound pods). With
// range(0) = 1, filter_returns_best: filter, then bind to the node it answered.
void BM_InProcessWithBind(benchmark::State& state) {
  Cluster& c = TheCluster();
  const bool best_mode = state.range(0) == 1;
  Extender& extender = best_mode ? *c.best_extender : *c.extender;
  // Per-cycle bodies from one template with a fixed-width pod name.
  const std::string marker = "job-000000";
  const std::string tmpl = c.bodies[0];
  std::vector<double> ms;
  int64_t bound = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    char name[32];
    // Names of their own per mode: pods bound by the other mode still hold shares.
    std::snprintf(name, sizeof name, best_mode ? "cyb-%06d" : "cyc-%06d", static_cast<int>(ms.size() % 1000000));
    std::string body = tmpl;
    for (size_t at = body.find(marker); at != std::string::npos; at = body.find(marker, at + 1))
      body.replace(at, marker.size(), name);
    const json pod = json::parse(body)["Pod"];
    const std::string ns = pod["metadata"]["namespace"], uid = pod["metadata"]["uid"];
    const auto t0 = std::chrono::steady_clock::now();
    HttpReply f = extender.Filter(body);
    HttpReply p = best_mode ? HttpReply{} : extender.Prioritize(body);
    const auto t_mid = std::chrono::steady_clock::now();
    state.PauseTiming();  // the client's own parsing is not the extender's time
    std::string best;
    if (best_mode) {
      const json answered = json::parse(f.body)["NodeNames"];
      if (answered.size() == 1) best = answered[0];
    } else {
      for (const auto& hp : json::parse(p.body))
        if (hp["Score"] == 10) best = hp["Host"];
    }
    state.ResumeTiming();
    const auto t1 = std::chrono::steady_clock::now();
    HttpReply b = extender.Bind(testing::BindBody(ns, name, uid, best));
    const auto t2 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>((t2 - t1) + (t_mid - t0)).count());
    bound += json::parse(b.body)["Error"] == "";
    Check(state, f.status, f.body);
  }
  const double wall = Seconds(std::chrono::steady_clock::now() - start).count();
  double busy = 0;
  for (double m : ms) busy += m / 1000;
  Report(state, best_mode ? "in_process_best+bind" : "in_process+bind", ms, busy > 0 ? busy : wall);
  state.counters["bound"] = static_cast<double>(bound);
}

// One connection per client thread; each iteration is one cycle per thread,
// the threads kept alive across iterations.
void BM_Http(benchmark::State& state) {
  Cluster& c = TheCluster();
  const int connections = static_cast<int>(state.range(0));
  ServerOptions so;
  so.logger = Quiet();
  ExtenderServer server(*c.extender, so);
  auto port = server.Start("127.0.0.1", 0);
  if (!port.ok()) {
    state.SkipWithError(port.status().ToString().c_str());
    return;
  }
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int k = 0; k < connections; ++k) {
    clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", *port));
    clients.back()->set_keep_alive(true);
    clients.back()->set_tcp_nodelay(true);
  }
  std::vector<std::vector<double>> ms(static_cast<size_t>(connections));
  std::atomic<bool> failed{false};
  auto cycle = [&](int k, size_t n) {
    const std::string& body = c.bodies[(n * static_cast<size_t>(connections) + static_cast<size_t>(k)) % c.bodies.size()];
    httplib::Client& client = *clients[static_cast<size_t>(k)];
    const auto t0 = std::chrono::steady_clock::now();
    auto f = client.Post("/filter", body, "application/json");
    auto p = client.Post("/prioritize", body, "application/json");
    ms[static_cast<size_t>(k)].push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!f || !p || f->status != 200 || p->status != 200) failed = true;
  };
  // Helpers run cycle n when `go` reaches n + 1, and report back in `done`.
  std::atomic<size_t> go{0}, done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> helpers;
  for (int k = 1; k < connections; ++k) {
    helpers.emplace_back([&, k] {
      for (size_t n = 0;; ++n) {
        // Block, not spin: spinning would take a core from the server.
        for (size_t g = go.load(); g <= n && !stop.load(); g = go.load()) go.wait(g);
        if (stop.load()) return;
        cycle(k, n);
        done.fetch_add(1);
        done.notify_all();
      }
    });
  }
  size_t n = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    go.store(n + 1);
    go.notify_all();
    cycle(0, n);
    const size_t want = (n + 1) * static_cast<size_t>(connections - 1);
    for (size_t d = done.load(); d < want; d = done.load()) done.wait(d);
    ++n;
  }
  const double wall = Seconds(std::chrono::steady_clock::now() - start).count();
  stop = true;
  go.fetch_add(1);
  go.notify_all();
  for (auto& t : helpers) t.join();
  if (failed) state.SkipWithError("an HTTP cycle failed");
  std::vector<double> all;
  for (const auto& v : ms) all.insert(all.end(), v.begin(), v.end());
  Report(state, connections == 1 ? "http" : "http_" + std::to_string(connections) + "conn", all, wall);
  server.Stop();
}

// A new pod without GPUs each cycle, scored by the second entry's
// prioritize over every node, then bound (as the pod watch shows a pod
// kube-scheduler bound) to the node it scored 10.
void BM_WithoutGpus(benchmark::State& state) {
  Cluster& c = TheCluster();
  const char* cpus[] = {"1", "4", "16"};
  std::vector<double> ms;
  int64_t bound = 0;
  int i = 0;
  const auto start = std::chrono::steady_clock::now();
  double outside_s = 0;  // building bodies and binding: not the extender's cycle
  for (auto _ : state) {
    const auto b0 = std::chrono::steady_clock::now();
    json pod = TypicalPod(100000 + i, {"main", 0, 0, 0});
    pod["metadata"]["name"] = "cpu-" + std::to_string(i);
    pod["metadata"]["uid"] = "uid-cpu-" + std::to_string(i);
    pod["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", cpus[i % 3]}, {"memory", "2Gi"}}}};
    ++i;
    const std::string body = testing::FilterBody(pod, c.names);
    const auto t0 = std::chrono::steady_clock::now();
    HttpReply p = c.extender->PrioritizeClaims(body);
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    Check(state, p.status, p.body);
    for (const auto& hp : json::parse(p.body)) {
      if (hp["Score"] != 10) continue;
      pod["spec"]["nodeName"] = hp["Host"];
      pod["status"]["phase"] = "Running";
      c.state->UpsertPod(pod);
      ++bound;
      break;
    }
    outside_s += Seconds(t0 - b0).count() + Seconds(std::chrono::steady_clock::now() - t1).count();
  }
  state.counters["bound"] = static_cast<double>(bound);
  Report(state, "without_gpus+bound", ms, Seconds(std::chrono::steady_clock::now() - start).count() - outside_s);
}

}  // namespace
}  // namespace tessera::scheduler

int main(int argc, char** argv) {
  using namespace tessera::scheduler;
  benchmark::RegisterBenchmark("extender/in_process", BM_InProcess)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("extender/in_process+bind", BM_InProcessWithBind)->Arg(0)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("extender/in_process_best+bind", BM_InProcessWithBind)->Arg(1)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("extender/without_gpus+bound", BM_WithoutGpus)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("extender/http", BM_Http)->Arg(1)->Iterations(2000)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("extender/http_2conn", BM_Http)->Arg(2)->Iterations(1000)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const auto& r = Results();
  if (r.contains("in_process")) {
    const Result& base = r.at("in_process");
    std::printf("\nfilter+prioritize cycle (with filter_returns_best: filter only), %d nodes / %d GPUs, %.0f %% of GPU "
                "compute in use:\n",
                kNodes,
                kNodes * kGpusPerNode, 100 * TheCluster().core_used);
    for (const auto& [name, res] : r) {
      std::printf("  %-20s p50 %7.3f ms  p99 %7.3f ms  %8.0f cycles/s", name.c_str(), res.p50_ms, res.p99_ms,
                  res.cycles_per_s);
      if (name != "in_process")
        std::printf("   ratio to in-process: p50 x%.2f, p99 x%.2f, throughput x%.2f", res.p50_ms / base.p50_ms,
                    res.p99_ms / base.p99_ms, res.cycles_per_s / base.cycles_per_s);
      std::printf("\n");
    }
  }
  return 0;
}
