// What libtessera-cuda.so costs per kernel launch on a real GPU, in five
// configurations: no library, preloaded with nothing configured
// (pass-through), a memory limit only, and a compute share (50 %, hard) that
// the load never reaches (uncontended), without and with a busy-board folder
// (TESSERA_GPU_BOARD_DIR) as a node gives it.
//   gpu_launch_overhead
// Two measures per configuration, each the median over 200 bursts, with the
// GPU idle about two thirds of the time so the share is never exhausted:
//   launch_us  host time of one launch call of an empty kernel (bursts of 64)
//   burst_us   wall time of 32 launches of a ~20 us kernel and the
//              synchronize after them: what a program sees
// The configurations run twice, interleaved; each keeps its lower median.
// Fails when burst_us of any configuration is more than 2 % above no
// library's. The parent re-runs itself once per configuration;
// TESSERA_CUDA_LIB names the library.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "result_line.h"
#include "test_kernels.cuh"

namespace {

using Clock = std::chrono::steady_clock;

__global__ void Empty() {}


bool Ok(cudaError_t e) {
  if (e != cudaSuccess) std::fprintf(stderr, "CUDA error %s\n", cudaGetErrorString(e));
  return e == cudaSuccess;
}

// Prints "launch_us X burst_us Y".
int Child() {
  int khz = 0;
  cudaStream_t s;
  if (!Ok(cudaSetDevice(0)) || !Ok(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0)) ||
      !Ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) {
    return 1;
  }
  const long long cycles = khz / 50;  // ~20 us at the peak clock
  for (int i = 0; i < 50; ++i) {
    Empty<<<1, 32, 0, s>>>();
    Spin<<<1, 32, 0, s>>>(cycles, nullptr);
  }
  if (!Ok(cudaStreamSynchronize(s))) return 1;
  std::vector<double> launch, burst;
  for (int b = 0; b < 200; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 64; ++i) Empty<<<1, 32, 0, s>>>();
    const auto t1 = Clock::now();
    cudaStreamSynchronize(s);
    launch.push_back(Us(t1 - t0) / 64);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    const auto t2 = Clock::now();
    for (int i = 0; i < 32; ++i) Spin<<<1, 32, 0, s>>>(cycles, nullptr);
    cudaStreamSynchronize(s);
    burst.push_back(Us(Clock::now() - t2));
    std::this_thread::sleep_for(std::chrono::microseconds(1500));
  }
  if (!Ok(cudaGetLastError())) return 1;
  std::printf("launch_us %.4f burst_us %.3f\n", Median(launch), Median(burst));
  return 0;
}

struct Measure {
  double launch_us = -1;
  double burst_us = -1;
};

Measure RunChild(const std::string& env) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  const std::string cmd = "env TESSERA_GPU_CHILD=1 " + env + " " + self;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 256> buf{};
  Measure m;
  while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) {
    std::sscanf(buf.data(), "launch_us %lf burst_us %lf", &m.launch_us, &m.burst_us);
  }
  if (p == nullptr || pclose(p) != 0) return Measure{};
  return m;
}

}  // namespace

int main() {
  if (std::getenv("TESSERA_GPU_CHILD") != nullptr) return Child();
  const char* lib = std::getenv("TESSERA_CUDA_LIB");
  if (lib == nullptr) {
    std::fprintf(stderr, "TESSERA_CUDA_LIB must name libtessera-cuda.so\n");
    return 2;
  }
  const std::string pre = std::string("LD_PRELOAD=") + lib;
  // The share as a node gives it, busy board included (its cost is in the
  // share's per-launch overhead).
  char tmpl[] = "/tmp/tessera-overhead-board.XXXXXX";
  const char* board = mkdtemp(tmpl);
  if (board == nullptr) {
    std::printf("FAIL: no temporary folder for the busy board\n");
    return 1;
  }
  const std::string share = pre + " TESSERA_GPU_CORE_POLICY=hard TESSERA_GPU_CORE_PERCENT_0=50";
  const std::array<std::pair<const char*, std::string>, 5> configs{{
      {"none", "LD_PRELOAD="},
      {"passthrough", pre},
      {"memlimit", pre + " TESSERA_GPU_MEM_LIMIT_MIB_0=4096"},
      {"share_noboard", share},  // the board's own cost is the difference to the next
      {"share", share + " TESSERA_GPU_BOARD_DIR=" + board},
  }};
  std::array<Measure, 5> best;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < configs.size(); ++i) {
      const Measure m = RunChild(configs[i].second);
      if (m.burst_us <= 0) {
        std::printf("FAIL: configuration %s did not run\n", configs[i].first);
        return 1;
      }
      if (best[i].burst_us < 0 || m.burst_us < best[i].burst_us) best[i].burst_us = m.burst_us;
      if (best[i].launch_us < 0 || m.launch_us < best[i].launch_us) best[i].launch_us = m.launch_us;
    }
  }
  ResultLine r;
  int failures = 0;
  for (size_t i = 0; i < configs.size(); ++i) {
    const double overhead = (best[i].burst_us / best[0].burst_us - 1) * 100;
    const bool ok = overhead <= 2.0;
    std::printf("%-12s launch %.2f us  burst of 32 x 20 us kernels %.1f us  overhead %+.2f %%  %s\n",
                configs[i].first, best[i].launch_us, best[i].burst_us, overhead,
                ok ? "ok" : "OVER 2 %");
    r.Add(std::string("launch_us_") + configs[i].first, best[i].launch_us);
    r.Add(std::string("burst_us_") + configs[i].first, best[i].burst_us);
    if (i > 0) r.Add(std::string("overhead_pct_") + configs[i].first, overhead);
    failures += ok ? 0 : 1;
  }
  r.Print();
  if (std::system((std::string("rm -rf ") + board).c_str()) != 0) std::printf("could not remove %s\n", board);
  return failures == 0 ? 0 : 1;
}
