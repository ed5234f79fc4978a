// Cost of libtessera-cuda.so on the hooked path, against the fake driver:
// alloc/free pairs and a kernel-launch loop, each measured three ways in one
// run: without the library, preloaded with no limit (pass-through), and
// preloaded with a limit (enforcing). The parent re-runs itself once per way
// (the library reads its configuration once per process) and prints ratios.
//   build/bench/cuda_hook_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#define __CUDA_API_VERSION_INTERNAL 1
#include <benchmark/benchmark.h>
#include <cuda.h>

#include <string>

#include "bench/child_runs.h"

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

}  // namespace

int main(int argc, char** argv) {
  if (tessera::bench::RunBenchmarksIfChild(&argc, argv)) return 0;
  const std::string lib = TESSERA_CUDA_LIB;
  const bool ok = tessera::bench::PrintRatios({
      {"no lib", tessera::bench::RunChild("LD_PRELOAD=", argc, argv)},
      {"no limit", tessera::bench::RunChild("LD_PRELOAD=" + lib, argc, argv)},
      {"limit", tessera::bench::RunChild("LD_PRELOAD=" + lib + " TESSERA_GPU_MEM_LIMIT_MIB_0=1024", argc, argv)},
  });
  return ok ? 0 : 1;
}
