// Cost of libtessera-cuda.so's launch gate against the fake driver, measured
// three ways in one run: without the library, preloaded with no compute limit
// (one load and one branch per launch), and preloaded with an uncontended
// share (TESSERA_GPU_CORE_PERCENT_0=50, kernels and launches of zero
// simulated time, so the bucket never runs dry: the gate admits, records events and measures on
// every launch but never waits). The parent re-runs itself per way and
// prints ratios against the no-library run. Fake-driver numbers: a real
// cuLaunchKernel costs microseconds, the fake's tens of nanoseconds. With
// TESSERA_BENCH_BASELINE_LIB set to a libtessera-cuda.so built from another
// commit, a fourth run measures that library's share path on the same fake
// driver in the same run, so a change to the gate is compared with its base.
//   build/bench/launch_gate_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#define __CUDA_API_VERSION_INTERNAL 1
#include <benchmark/benchmark.h>
#include <cuda.h>

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/child_runs.h"

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

}  // namespace

int main(int argc, char** argv) {
  if (tessera::bench::RunBenchmarksIfChild(&argc, argv)) return 0;
  const std::string lib = TESSERA_CUDA_LIB;
  const std::string fake = "FAKE_CUDA_KERNEL_US=0 FAKE_CUDA_LAUNCH_HOST_NS=0 ";
  const std::string share = " TESSERA_GPU_CORE_POLICY=hard TESSERA_GPU_CORE_PERCENT_0=50";
  std::vector<std::pair<std::string, std::map<std::string, double>>> runs = {
      {"no lib", tessera::bench::RunChild(fake + "LD_PRELOAD=", argc, argv)},
      {"no limit", tessera::bench::RunChild(fake + "LD_PRELOAD=" + lib, argc, argv)},
      {"share", tessera::bench::RunChild(fake + "LD_PRELOAD=" + lib + share, argc, argv)},
  };
  if (const char* base = std::getenv("TESSERA_BENCH_BASELINE_LIB"); base != nullptr && *base != '\0') {
    runs.push_back({"share, base lib", tessera::bench::RunChild(fake + "LD_PRELOAD=" + base + share, argc, argv)});
  }
  return tessera::bench::PrintRatios(runs) ? 0 : 1;
}
