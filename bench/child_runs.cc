#include "bench/child_runs.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace tessera::bench {

bool RunBenchmarksIfChild(int* argc, char** argv) {
  if (std::getenv("TESSERA_BENCH_CHILD") == nullptr) return false;
  benchmark::Initialize(argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return true;
}

std::map<std::string, double> RunChild(const std::string& env, int argc, char** argv) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  std::string cmd = "env TESSERA_BENCH_CHILD=1 " + env + " " + self + " --benchmark_format=json";
  for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  if (p != nullptr) pclose(p);
  std::map<std::string, double> ns;
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("benchmarks")) return ns;
  for (const auto& b : j["benchmarks"]) ns[b["name"]] = b["real_time"].get<double>();
  return ns;
}

bool PrintRatios(const std::vector<std::pair<std::string, std::map<std::string, double>>>& runs) {
  for (const auto& [label, ns] : runs) {
    if (ns.empty()) {
      std::fprintf(stderr, "the benchmark run \"%s\" failed\n", label.c_str());
      return false;
    }
  }
  const auto& base = runs.front().second;
  bool aggregates = false;
  for (const auto& [name, value] : base) aggregates = aggregates || name.find("_median") != std::string::npos;
  std::printf("%-32s", "benchmark");
  for (const auto& [label, ns] : runs) std::printf(" %14s", (label + " ns").c_str());
  for (size_t r = 1; r < runs.size(); ++r) std::printf(" %14s", (runs[r].first + "/x").c_str());
  std::printf("\n");
  for (const auto& [name, first] : base) {
    // With --benchmark_repetitions, medians only: this machine is shared.
    if (aggregates && name.find("_median") == std::string::npos) continue;
    std::printf("%-32s", name.c_str());
    for (const auto& [label, ns] : runs) std::printf(" %14.1f", ns.count(name) ? ns.at(name) : 0.0);
    for (size_t r = 1; r < runs.size(); ++r) {
      const auto it = runs[r].second.find(name);
      std::printf(" %13.2fx", it == runs[r].second.end() ? 0.0 : it->second / first);
    }
    std::printf("\n");
  }
  return true;
}

}  // namespace tessera::bench
