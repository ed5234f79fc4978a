// What one API request costs Tessera's Kubernetes client and the API server,
// over HTTP/2 and over HTTP/1.1, measured in one run against a real
// loopback kube-apiserver (tools/controlplane):
//
//   build/bench/kube_client_bench [--threads 8] [--requests 4000] [--rounds 2]
//                                 [--dir out/bench-kube-client]
//
// Each round sends the same requests over each protocol in turn: `threads`
// threads share one kube::Client (as tessera-scheduler's binds do) and send
// `requests` merge PATCHes of small ConfigMaps in all, a write about the
// size of a Binding. Per protocol it prints requests/s and the CPU
// microseconds per request spent by this process (the client) and by
// kube-apiserver (and etcd), from /proc, so the two protocols are compared
// on the same server in the same run.
#include <CLI/CLI.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
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

int Sh(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

struct Sample {
  double seconds = 0, client_cpu = 0, server_cpu = 0;
  int failed = 0;
};

Sample Run(const tessera::kube::ClientConfig& base, bool http2, int threads, int requests, pid_t apiserver,
           pid_t etcd) {
  tessera::kube::ClientConfig config = base;
  config.http2 = http2;
  tessera::kube::Client client(config);
  // Warm the connections first: a handshake per thread is not what is measured.
  std::vector<std::thread> warm;
  for (int t = 0; t < threads; ++t) {
    warm.emplace_back([&client] { (void)client.Get("/api/v1/namespaces/default/configmaps/bench-0"); });
  }
  for (auto& t : warm) t.join();

  std::atomic<int> next{0}, failed{0};
  const double client0 = SelfCpuSeconds();
  const double server0 = ProcessCpuSeconds(apiserver) + ProcessCpuSeconds(etcd);
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (int i = next++; i < requests; i = next++) {
        const std::string name = "bench-" + std::to_string(i % 64);
        const nlohmann::json patch = {{"metadata", {{"annotations", {{"tessera.io/bench", std::to_string(i)}}}}}};
        if (!client.Patch("/api/v1/namespaces/default/configmaps/" + name, tessera::kube::PatchType::kMerge, patch)
                 .ok()) {
          ++failed;
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  Sample s;
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  s.client_cpu = SelfCpuSeconds() - client0;
  s.server_cpu = ProcessCpuSeconds(apiserver) + ProcessCpuSeconds(etcd) - server0;
  s.failed = failed;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera's API client: cost per request over HTTP/2 and HTTP/1.1"};
  int threads = 8, requests = 4000, rounds = 2;
  std::string dir = "out/bench-kube-client", repo = ".";
  app.add_option("--threads", threads)->check(CLI::PositiveNumber);
  app.add_option("--requests", requests, "requests per protocol per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds)->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "where the cluster lives (logs stay there)");
  app.add_option("--repo", repo, "repository root (for tools/controlplane)");
  CLI11_PARSE(app, argc, argv);

  std::filesystem::create_directories(dir);
  dir = std::filesystem::canonical(dir).string();
  const std::string cp = std::filesystem::canonical(repo).string() + "/tools/controlplane";
  Sh(cp + "/cluster-down.sh " + dir + " >/dev/null 2>&1");
  if (Sh("EXTENDER=0 SCHEDULER=0 " + cp + "/cluster-up.sh " + dir + " >/dev/null") != 0) {
    std::fprintf(stderr, "cluster-up.sh failed for %s\n", dir.c_str());
    return 1;
  }
  struct Down {
    std::string cmd;
    ~Down() { Sh(cmd); }
  } down{cp + "/cluster-down.sh " + dir + " >/dev/null 2>&1"};

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
  std::printf("%d threads, %d merge PATCHes per protocol per round, one kube::Client\n", threads, requests);
  std::printf("%-6s %-9s %10s %14s %16s %7s\n", "round", "protocol", "requests/s", "client us/req",
              "server us/req", "failed");
  double sum[2][2] = {{0, 0}, {0, 0}};  // [http2][client, server] CPU seconds
  for (int round = 1; round <= rounds; ++round) {
    for (const bool http2 : {true, false}) {
      const Sample s = Run(config, http2, threads, requests, apiserver, etcd);
      sum[http2][0] += s.client_cpu;
      sum[http2][1] += s.server_cpu;
      std::printf("%-6d %-9s %10.0f %14.1f %16.1f %7d\n", round, http2 ? "HTTP/2" : "HTTP/1.1", requests / s.seconds,
                  1e6 * s.client_cpu / requests, 1e6 * s.server_cpu / requests, s.failed);
      std::fflush(stdout);
    }
  }
  std::printf("HTTP/1.1 against HTTP/2, CPU per request over all rounds: client %.2fx, API server + etcd %.2fx\n",
              sum[0][0] / sum[1][0], sum[0][1] / sum[1][1]);
  return 0;
}
