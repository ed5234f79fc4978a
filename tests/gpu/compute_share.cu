// Real-GPU check of libtessera-cuda.so's launch gate: a saturating loop of
// ~1 ms spin kernels, run alone, first without the library (the baseline),
// then preloaded with compute caps of 10, 25, 50 and 75 %. Prints each run's
// throughput against the baseline; fails when one is off its cap by more
// than 5 percentage points.
//   gpu_compute_share MODE [SECONDS]     MODE: kernel | graph | cooperative
// The parent re-runs itself once per configuration (the library reads its
// configuration once per process); TESSERA_CUDA_LIB names the library.
#include <cuda_runtime.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

__global__ void Spin(long long cycles, unsigned long long* done) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(done, 1ull);
}

#define CUDA_OK(expr)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                \
                   cudaGetErrorString(e_));                                             \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

// Kernels completed per second over `seconds` of wall time.
double Child(const std::string& mode, double seconds) {
  int sms = 0, khz = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  long long cycles = static_cast<long long>(khz);  // ~1 ms at the base clock
  unsigned long long* done = nullptr;
  CUDA_OK(cudaMalloc(&done, sizeof(*done)));
  CUDA_OK(cudaMemset(done, 0, sizeof(*done)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr int kPerGraph = 10;
  cudaGraphExec_t exec = nullptr;
  if (mode == "graph") {
    cudaGraph_t g;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kPerGraph; ++i) Spin<<<sms, 128, 0, s>>>(cycles, done);
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  }
  auto launch = [&] {
    if (mode == "graph") {
      CUDA_OK(cudaGraphLaunch(exec, s));
    } else if (mode == "cooperative") {
      void* args[] = {&cycles, &done};
      CUDA_OK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(&Spin), dim3(sms), dim3(128),
                                          args, 0, s));
    } else {
      Spin<<<sms, 128, 0, s>>>(cycles, done);
      CUDA_OK(cudaGetLastError());
    }
  };
  // Warm up, then run back to back, synchronizing every 20 launches.
  for (int i = 0; i < 20; ++i) launch();
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemset(done, 0, sizeof(*done)));
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 20; ++i) launch();
    CUDA_OK(cudaStreamSynchronize(s));
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  unsigned long long n = 0;
  CUDA_OK(cudaMemcpy(&n, done, sizeof(n), cudaMemcpyDeviceToHost));
  return static_cast<double>(n) / elapsed;
}

double RunChild(const std::string& env, const std::string& mode, const char* seconds) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  const std::string cmd = "env TESSERA_GPU_CHILD=1 " + env + " " + self + " " + mode + " " +
                          seconds;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 256> buf{};
  double rate = -1;
  while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) {
    if (std::strncmp(buf.data(), "rate ", 5) == 0) rate = std::atof(buf.data() + 5);
  }
  if (p != nullptr && pclose(p) != 0) return -1;
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "kernel";
  const char* seconds = argc > 2 ? argv[2] : "4";
  if (mode != "kernel" && mode != "graph" && mode != "cooperative") {
    std::fprintf(stderr, "usage: %s kernel|graph|cooperative [SECONDS]\n", argv[0]);
    return 2;
  }
  if (std::getenv("TESSERA_GPU_CHILD") != nullptr) {
    std::printf("rate %.3f\n", Child(mode, std::atof(seconds)));
    return 0;
  }
  const char* lib = std::getenv("TESSERA_CUDA_LIB");
  if (lib == nullptr) {
    std::fprintf(stderr, "TESSERA_CUDA_LIB must name libtessera-cuda.so\n");
    return 2;
  }
  const double base = RunChild("LD_PRELOAD=", mode, seconds);
  if (base <= 0) {
    std::fprintf(stderr, "baseline run failed\n");
    return 1;
  }
  std::printf("%s: unlimited %.1f kernels/s\n", mode.c_str(), base);
  int failures = 0;
  for (int cap : {10, 25, 50, 75}) {
    const double rate = RunChild(std::string("LD_PRELOAD=") + lib +
                                     " TESSERA_GPU_CORE_POLICY=hard TESSERA_GPU_CORE_PERCENT_0=" +
                                     std::to_string(cap),
                                 mode, seconds);
    const double ratio = rate / base;
    const bool ok = rate > 0 && ratio > cap / 100.0 - 0.05 && ratio < cap / 100.0 + 0.05;
    std::printf("%s: cap %2d%%  %.1f kernels/s  throughput / unlimited = %.3f  %s\n",
                mode.c_str(), cap, rate, ratio, ok ? "ok" : "OFF");
    failures += ok ? 0 : 1;
  }
  return failures == 0 ? 0 : 1;
}
