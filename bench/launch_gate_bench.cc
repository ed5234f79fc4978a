// Cost of libtessera-cuda.so's launch gate against the fake driver, measured
// three ways in one run: without the library, preloaded with no compute limit
// (one load and one branch per launch), and preloaded with an uncontended
// share (TESSERA_GPU_CORE_PERCENT_0=50, kernels and launches of zero
// simulated time, so the bucket never runs dry: the gate admits, records events and measures on
// every launch but never waits). The parent re-runs itself per way and
// prints ratios against the no-library run. Fake-driver numbers: a real
// cuLaunchKernel costs microseconds, the fake's tens of nanoseconds.
//   build/bench/launch_gate_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
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

const CUfunction kKernel = reinterpret_cast<CUfunction>(0x1000);

CUstream Context() {
  CUcontext ctx;
  cuInit(0);
  cuDevicePrimaryCtxRetain(&ctx, 0);
  cuCtxSetCurrent(ctx);
  CUstream s = nullptr;
  cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  return s;
}

void BM_LaunchKernel(benchmark::State& state) {
  CUstream s = Context();
  for (auto _ : state) {
    benchmark::DoNotOptimize(cuLaunchKernel(kKernel, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
  }
  cuCtxSynchronize();
}
BENCHMARK(BM_LaunchKernel);

void BM_LaunchViaProcAddress(benchmark::State& state) {
  CUstream s = Context();
  // As the CUDA runtime does: resolve once through cuGetProcAddress.
  void* fn = nullptr;
  cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000, 0, nullptr);
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(fn);
  for (auto _ : state) {
    benchmark::DoNotOptimize(launch(kKernel, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
  }
  cuCtxSynchronize();
}
BENCHMARK(BM_LaunchViaProcAddress);

void BM_LaunchPerThreadStream(benchmark::State& state) {
  Context();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        cuLaunchKernel_ptsz(kKernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  }
  cuCtxSynchronize();
}
BENCHMARK(BM_LaunchPerThreadStream);

void BM_GraphLaunch(benchmark::State& state) {
  CUstream s = Context();
  CUgraph g;
  CUgraphExec exec;
  cuGraphCreate(&g, 0);
  cuGraphInstantiateWithFlags(&exec, g, 0);
  for (auto _ : state) benchmark::DoNotOptimize(cuGraphLaunch(exec, s));
  cuCtxSynchronize();
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
}
BENCHMARK(BM_GraphLaunch);

// name -> ns per iteration, from one child run's JSON.
std::map<std::string, double> RunChild(const std::string& env, const std::string& args) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  std::string cmd = "env TESSERA_BENCH_CHILD=1 FAKE_CUDA_KERNEL_US=0 FAKE_CUDA_LAUNCH_HOST_NS=0 " + env + " " + self +
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
  auto gated = RunChild("LD_PRELOAD=" + lib + " TESSERA_GPU_CORE_POLICY=hard TESSERA_GPU_CORE_PERCENT_0=50", args);
  if (none.empty() || pass.empty() || gated.empty()) {
    std::fprintf(stderr, "a benchmark run failed\n");
    return 1;
  }
  std::printf("%-30s %10s %12s %10s %11s %9s\n", "benchmark", "no lib ns", "no limit ns",
              "share ns", "no limit/x", "share/x");
  const bool aggregates = none.count("BM_LaunchKernel_median") != 0;
  for (const auto& [name, base] : none) {
    // With --benchmark_repetitions, medians only: this machine is shared.
    if (aggregates && name.find("_median") == std::string::npos) continue;
    std::printf("%-30s %10.1f %12.1f %10.1f %10.2fx %8.2fx\n", name.c_str(), base, pass[name],
                gated[name], pass[name] / base, gated[name] / base);
  }
  return 0;
}
