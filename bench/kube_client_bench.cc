// What one API request costs Tessera's Kubernetes client and the API server,
// in two variants of the client measured in one run against a real loopback
// kube-apiserver (tools/controlplane):
//
//   build/bench/kube_client_bench [--compare protocol|share] [--threads 8] [--burst 0]
//                                 [--requests 4000] [--rounds 2] [--dir out/bench-kube-client]
//
// --compare protocol: HTTP/2 against HTTP/1.1 (ClientConfig::http2).
// --compare share: TLS session sharing off against on
// (ClientConfig::share_tls_sessions), over the default protocol.
//
// Each round sends the same requests with each variant in turn, the order
// alternating from round to round; each variant gets a kube::Client of its
// own, shared by all threads (as tessera-scheduler's binds share one), and
// sends `requests` merge PATCHes of small ConfigMaps, a write about the size
// of a Binding. With --burst 0, `threads` threads send them back to back
// over warmed connections. With --burst N, N threads send one request each
// at once, and the next burst starts when all are answered: with N above the
// client's 96 idle handles (src/kube/internal/curl_session.h) every burst
// after the first opens N - 96 new connections, as a burst of binds beyond
// the pool does. Per variant it prints requests/s, the CPU microseconds per
// request spent by this process (the client) and by kube-apiserver (and
// etcd), from /proc, and the connections the client opened; at the end, the
// second variant's CPU per request over the first's, over all rounds and
// the lowest and highest round.
#include <CLI/CLI.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "kube/config.h"
#include "tests/support/own_cluster.h"

namespace {

using Clock = std::chrono::steady_clock;

double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
    if (i == 15) break;
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

pid_t PidOf(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/pids/" + name + ".pid");
  pid_t pid = 0;
  in >> pid;
  return pid;
}

struct Sample {
  double seconds = 0, client_cpu = 0, server_cpu = 0;
  int requests = 0, failed = 0;
  int64_t connections = 0;  // opened while measured
};

struct Variant {
  const char* name;
  bool http2;
  bool share_tls_sessions;
};

bool PatchOne(tessera::kube::Client& client, int i) {
  const std::string name = "bench-" + std::to_string(i % 64);
  const nlohmann::json patch = {{"metadata", {{"annotations", {{"tessera.io/bench", std::to_string(i)}}}}}};
  return client.Patch("/api/v1/namespaces/default/configmaps/" + name, tessera::kube::PatchType::kMerge, patch).ok();
}

Sample Run(const tessera::kube::ClientConfig& base, const Variant& variant, int threads, int burst, int requests,
           pid_t apiserver, pid_t etcd) {
  tessera::kube::ClientConfig config = base;
  config.http2 = variant.http2;
  config.share_tls_sessions = variant.share_tls_sessions;
  tessera::kube::Client client(config);
  const int workers_n = burst > 0 ? burst : threads;
  const int bursts = burst > 0 ? std::max(1, requests / burst) : 0;
  // Warm the connections first (one burst's worth): the first handshakes
  // are not what is measured.
  std::vector<std::thread> warm;
  for (int t = 0; t < workers_n; ++t) {
    warm.emplace_back([&client] { (void)client.Get("/api/v1/namespaces/default/configmaps/bench-0"); });
  }
  for (auto& t : warm) t.join();

  Sample s;
  s.requests = burst > 0 ? bursts * burst : requests;
  std::atomic<int> next{0}, failed{0};
  std::barrier sync(workers_n);
  const int64_t connections0 = client.connections_opened();
  const double client0 = SelfCpuSeconds();
  const double server0 = ProcessCpuSeconds(apiserver) + ProcessCpuSeconds(etcd);
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < workers_n; ++t) {
    workers.emplace_back([&, t] {
      if (burst > 0) {
        for (int b = 0; b < bursts; ++b) {
          sync.arrive_and_wait();  // all of the previous burst answered
          if (!PatchOne(client, b * burst + t)) ++failed;
        }
      } else {
        for (int i = next++; i < requests; i = next++) {
          if (!PatchOne(client, i)) ++failed;
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  s.client_cpu = SelfCpuSeconds() - client0;
  s.server_cpu = ProcessCpuSeconds(apiserver) + ProcessCpuSeconds(etcd) - server0;
  s.connections = client.connections_opened() - connections0;
  s.failed = failed;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera's API client: cost per request in two variants (protocol, or TLS session sharing)"};
  int threads = 8, burst = 0, requests = 4000, rounds = 2;
  std::string compare = "protocol", dir = "out/bench-kube-client", repo = ".";
  app.add_option("--compare", compare, "protocol: HTTP/2 against HTTP/1.1; share: TLS session sharing off against on")
      ->check(CLI::IsMember({"protocol", "share"}));
  app.add_option("--threads", threads, "threads sending back to back (without --burst)")->check(CLI::PositiveNumber);
  app.add_option("--burst", burst, "requests sent at once, burst after burst (0: --threads back to back)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--requests", requests, "requests per variant per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds)->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "where the cluster lives (logs stay there)");
  app.add_option("--repo", repo, "repository root (for tools/controlplane)");
  CLI11_PARSE(app, argc, argv);

  std::filesystem::create_directories(dir);
  dir = std::filesystem::canonical(dir).string();
  auto cluster = tessera::testing::OwnCluster::Start(std::filesystem::canonical(repo).string(), dir,
                                                     "EXTENDER=0 SCHEDULER=0");
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().message().c_str());
    return 1;
  }

  auto loaded = tessera::kube::LoadKubeconfig(dir + "/kubeconfig");
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
    return 1;
  }
  tessera::kube::ClientConfig config = *loaded;
  config.qps = 0;  // unlimited: the API server is what is measured
  {
    tessera::kube::Client setup(config);
    for (int i = 0; i < 64; ++i) {
      const nlohmann::json cm = {{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"metadata", {{"name", "bench-" + std::to_string(i)}, {"namespace", "default"}}},
                                 {"data", {{"k", "v"}}}};
      if (auto done = setup.Create("/api/v1/namespaces/default/configmaps", cm); !done.ok()) {
        std::fprintf(stderr, "creating ConfigMap bench-%d: %s\n", i, done.status().message().c_str());
        return 1;
      }
    }
  }
  const pid_t apiserver = PidOf(dir, "kube-apiserver"), etcd = PidOf(dir, "etcd");
  Variant variants[2] = {{"HTTP/2", true, config.share_tls_sessions}, {"HTTP/1.1", false, config.share_tls_sessions}};
  if (compare == "share") {
    variants[0] = {"share off", config.http2, false};
    variants[1] = {"share on", config.http2, true};
  }
  if (burst > 0) {
    std::printf("bursts of %d requests at once, %d merge PATCHes per variant per round, one kube::Client\n", burst,
                std::max(1, requests / burst) * burst);
  } else {
    std::printf("%d threads, %d merge PATCHes per variant per round, one kube::Client\n", threads, requests);
  }
  std::printf("%-6s %-9s %10s %14s %16s %12s %7s\n", "round", "variant", "requests/s", "client us/req",
              "server us/req", "connections", "failed");
  double sum[2][2] = {{0, 0}, {0, 0}};  // [variant][client, server] CPU seconds
  int64_t connections[2] = {0, 0};
  double ratio_min[2] = {1e9, 1e9}, ratio_max[2] = {0, 0};  // per round, [client, server]
  for (int round = 1; round <= rounds; ++round) {
    Sample samples[2];
    // The order alternates, so neither variant always runs on a server the other just warmed.
    for (const int v : round % 2 == 1 ? std::array<int, 2>{0, 1} : std::array<int, 2>{1, 0}) {
      const Sample s = Run(config, variants[v], threads, burst, requests, apiserver, etcd);
      samples[v] = s;
      sum[v][0] += s.client_cpu;
      sum[v][1] += s.server_cpu;
      connections[v] += s.connections;
      std::printf("%-6d %-9s %10.0f %14.1f %16.1f %12lld %7d\n", round, variants[v].name, s.requests / s.seconds,
                  1e6 * s.client_cpu / s.requests, 1e6 * s.server_cpu / s.requests,
                  static_cast<long long>(s.connections), s.failed);
      std::fflush(stdout);
    }
    for (int k = 0; k < 2; ++k) {
      const double ratio = (k == 0 ? samples[1].client_cpu / samples[0].client_cpu
                                   : samples[1].server_cpu / samples[0].server_cpu);
      ratio_min[k] = std::min(ratio_min[k], ratio);
      ratio_max[k] = std::max(ratio_max[k], ratio);
    }
  }
  std::printf(
      "%s against %s, CPU per request over all rounds: client %.2fx (rounds %.2f-%.2f), "
      "API server + etcd %.2fx (rounds %.2f-%.2f); connections opened: %lld against %lld\n",
      variants[1].name, variants[0].name, sum[1][0] / sum[0][0], ratio_min[0], ratio_max[0], sum[1][1] / sum[0][1],
      ratio_min[1], ratio_max[1], static_cast<long long>(connections[1]), static_cast<long long>(connections[0]));
  return 0;
}
