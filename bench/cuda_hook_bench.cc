// Cost of libtessera-cuda.so on the hooked path, against the fake driver:
// alloc/free pairs and a kernel-launch loop, each measured three ways in one
// run: without the library, preloaded with no limit (pass-through), and
// preloaded with a limit (enforcing). The parent re-runs itself once per way
// (the library reads its configuration once per process) and prints ratios.
//   build/bench/cuda_hook_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#define __CUDA_API_VERSION_INTERNAL 1
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace {

void Context() {
  CUcontext ctx;
  cuInit(0);
  cuDevicePrimaryCtxRetain(&ctx, 0);
  cuCtxSetCurrent(ctx);
}

void BM_AllocFree(benchmark::State& state) {
  Context();
  for (auto _ : state) {
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS) state.SkipWithError("alloc failed");
    cuMemFree_v2(p);
  }
}
BENCHMARK(BM_AllocFree);

void BM_AsyncAllocFree(benchmark::State& state) {
  Context();
  for (auto _ : state) {
    CUdeviceptr p;
    if (cuMemAllocAsync(&p, 1 << 20, nullptr) != CUDA_SUCCESS) state.SkipWithError("alloc failed");
    cuMemFreeAsync(p, nullptr);
  }
}
BENCHMARK(BM_AsyncAllocFree);

void BM_LaunchLoop(benchmark::State& state) {
  Context();
  // As the CUDA runtime does: resolve once through cuGetProcAddress.
  void* fn = nullptr;
  cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000, 0, nullptr);
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(fn);
  for (auto _ : state) {
    benchmark::DoNotOptimize(launch(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  }
}
BENCHMARK(BM_LaunchLoop);

void BM_MemGetInfo(benchmark::State& state) {
  Context();
  for (auto _ : state) {
    size_t f, t;
    benchmark::DoNotOptimize(cuMemGetInfo_v2(&f, &t));
  }
}
BENCHMARK(BM_MemGetInfo);

// name -> ns per iteration, from one child run's JSON.
std::map<std::string, double> RunChild(const std::string& env, const std::string& args) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  std::string cmd = "env TESSERA_BENCH_CHILD=1 " + env + " " + self +
                    " --benchmark_format=json " + args;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  if (p != nullptr) pclose(p);
  std::map<std::string, double> ns;
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ns;
  for (const auto& b : j["benchmarks"]) ns[b["name"]] = b["real_time"].get<double>();
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("TESSERA_BENCH_CHILD") != nullptr) {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  std::string args;
  for (int i = 1; i < argc; ++i) args += std::string(" ") + argv[i];
  const std::string lib = TESSERA_CUDA_LIB;
  auto none = RunChild("LD_PRELOAD=", args);
  auto pass = RunChild("LD_PRELOAD=" + lib, args);
  auto limit = RunChild("LD_PRELOAD=" + lib + " TESSERA_GPU_MEM_LIMIT_MIB_0=1024", args);
  if (none.empty() || pass.empty() || limit.empty()) {
    std::fprintf(stderr, "a benchmark run failed\n");
    return 1;
  }
  std::printf("%-20s %12s %12s %12s %10s %10s\n", "benchmark", "no lib ns", "no limit ns",
              "limit ns", "no limit/x", "limit/x");
  const bool aggregates = none.count("BM_AllocFree_median") != 0;
  for (const auto& [name, base] : none) {
    // With --benchmark_repetitions, medians only: this machine is shared.
    if (aggregates && name.find("_median") == std::string::npos) continue;
    std::printf("%-20s %12.1f %12.1f %12.1f %9.2fx %9.2fx\n", name.c_str(), base, pass[name],
                limit[name], pass[name] / base, limit[name] / base);
  }
  return 0;
}
