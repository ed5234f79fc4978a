// Real-GPU check of libtessera-cuda.so's launch gate: a saturating loop of
// ~1 ms spin kernels, first without the library (the baseline), then
// preloaded with hard compute caps.
//   gpu_compute_share MODE [SECONDS]   MODE: kernel | graph | cooperative | ratio
// kernel, graph, cooperative: alone on GPU 0 with caps of 10, 25, 50 and
// 75 %; each run's throughput against the baseline must be within 3
// percentage points of its cap. ratio: two saturating processes at once,
// capped 10 / 90 and then 30 / 70; the ratio of their throughputs must be
// within 10 % of the asked ratio (two with no library run first, as the
// control: what time-slicing alone gives); the capped two share a busy-board
// folder (TESSERA_GPU_BOARD_DIR). Prints a RESULT line with every number.
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
#include <thread>
#include <utility>

#include "result_line.h"
#include "test_kernels.cuh"

namespace {

// Kernels completed per second over `seconds` of wall time.
double Child(const std::string& mode, double seconds) {
  int sms = 0, khz = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  long long cycles = static_cast<long long>(khz);  // ~1 ms at the base clock
  const long long work_iters = khz / 4;             // ~1 ms: a multiply-add's latency is ~4 cycles
  unsigned long long* done = nullptr;
  float* sink = nullptr;
  CUDA_OK(cudaMalloc(&done, sizeof(*done)));
  CUDA_OK(cudaMalloc(&sink, sizeof(*sink)));
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
      if (mode == "work") {
        Chain<<<sms, 128, 0, s>>>(work_iters, done, sink);
      } else {
        Spin<<<sms, 128, 0, s>>>(cycles, done);
      }
      CUDA_OK(cudaGetLastError());
    }
  };
  // Warm up, then run back to back, synchronizing every 20 launches. Two
  // processes measured together start at the same moment (TESSERA_GPU_START_AT,
  // seconds on CLOCK_REALTIME).
  for (int i = 0; i < 20; ++i) launch();
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemset(done, 0, sizeof(*done)));
  if (const char* at = std::getenv("TESSERA_GPU_START_AT")) {
    const auto start = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(std::atof(at))));
    std::this_thread::sleep_until(start);
  }
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

FILE* StartChild(const std::string& env, const std::string& mode, const char* seconds) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  const std::string cmd = "env TESSERA_GPU_CHILD=1 " + env + " " + self + " " + mode + " " +
                          seconds;
  return popen(cmd.c_str(), "r");
}

// The rate a child printed, or -1 when it failed.
double FinishChild(FILE* p) {
  std::array<char, 256> buf{};
  double rate = -1;
  while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) {
    if (std::strncmp(buf.data(), "rate ", 5) == 0) rate = std::atof(buf.data() + 5);
  }
  if (p == nullptr || pclose(p) != 0) return -1;
  return rate;
}

double RunChild(const std::string& env, const std::string& mode, const char* seconds) {
  return FinishChild(StartChild(env, mode, seconds));
}

std::string Capped(const char* lib, int cap) {
  return std::string("LD_PRELOAD=") + lib +
         " TESSERA_GPU_CORE_POLICY=hard TESSERA_GPU_CORE_PERCENT_0=" + std::to_string(cap);
}

// Runs two children with environments `ea` and `eb` at the same moment;
// their rates.
std::pair<double, double> RunTogether(const std::string& ea, const std::string& eb, const char* seconds) {
  const double at = std::chrono::duration<double>(
                        std::chrono::system_clock::now().time_since_epoch()).count() + 3.0;
  const std::string start = " TESSERA_GPU_START_AT=" + std::to_string(at);
  FILE* pa = StartChild(ea + start, "work", seconds);
  FILE* pb = StartChild(eb + start, "work", seconds);
  const double ra = FinishChild(pa), rb = FinishChild(pb);
  return {ra, rb};
}

// Two saturating processes at once (fixed-work kernels), capped a and b.
// First, as the control,
// two with no library: what the GPU's own time-slicing between two contexts
// gives each and loses in all (reported, not judged).
int Ratios(const char* lib, double base, const char* seconds, ResultLine& r) {
  int failures = 0;
  // One busy-board folder for both, as every container on a node shares:
  // each charges only its own share of the spans the driver time-slices.
  char tmpl[] = "/tmp/tessera-ratio-board.XXXXXX";
  const char* board = mkdtemp(tmpl);
  if (board == nullptr) {
    std::printf("FAIL: no temporary folder for the busy board\n");
    return 1;
  }
  const std::string board_env = std::string(" TESSERA_GPU_BOARD_DIR=") + board;
  {
    const auto [ra, rb] = RunTogether("LD_PRELOAD=", "LD_PRELOAD=", seconds);
    std::printf("no library, together: %.3f and %.3f of unlimited (sum %.3f)\n", ra / base, rb / base,
                (ra + rb) / base);
    r.Add("nolib_share_a", ra / base);
    r.Add("nolib_share_b", rb / base);
  }
  for (auto [a, b] : {std::pair{10, 90}, std::pair{30, 70}}) {
    const auto [ra, rb] = RunTogether(Capped(lib, a) + board_env, Capped(lib, b) + board_env, seconds);
    const double asked = static_cast<double>(a) / b;
    const double got = rb > 0 ? ra / rb : -1;
    const bool ok = ra > 0 && rb > 0 && got > asked * 0.9 && got < asked * 1.1;
    std::printf("ratio %d/%d: %.3f and %.3f of unlimited, ratio %.3f (asked %.3f)  %s\n", a, b,
                ra / base, rb / base, got, asked, ok ? "ok" : "OFF");
    const std::string tag = std::to_string(a) + "_" + std::to_string(b);
    r.Add("share_a_" + tag, ra / base);
    r.Add("share_b_" + tag, rb / base);
    r.Add("ratio_" + tag, got);
    failures += ok ? 0 : 1;
  }
  if (std::system((std::string("rm -rf ") + board).c_str()) != 0) std::printf("could not remove %s\n", board);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "kernel";
  const char* seconds = argc > 2 ? argv[2] : "4";
  if (mode != "kernel" && mode != "graph" && mode != "cooperative" && mode != "ratio" &&
      !(mode == "work" && std::getenv("TESSERA_GPU_CHILD") != nullptr)) {
    std::fprintf(stderr, "usage: %s kernel|graph|cooperative|ratio [SECONDS]\n", argv[0]);
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
  const std::string launch_mode = mode == "ratio" ? "work" : mode;
  const double base = RunChild("LD_PRELOAD=", launch_mode, seconds);
  if (base <= 0) {
    std::fprintf(stderr, "baseline run failed\n");
    return 1;
  }
  std::printf("%s: unlimited %.1f kernels/s\n", launch_mode.c_str(), base);
  ResultLine r;
  r.Add("unlimited_kernels_per_s", base);
  int failures = 0;
  if (mode == "ratio") {
    failures = Ratios(lib, base, seconds, r);
  } else {
    for (int cap : {10, 25, 50, 75}) {
      const double rate = RunChild(Capped(lib, cap), mode, seconds);
      const double ratio = rate / base;
      const bool ok = rate > 0 && ratio > cap / 100.0 - 0.03 && ratio < cap / 100.0 + 0.03;
      std::printf("%s: cap %2d%%  %.1f kernels/s  throughput / unlimited = %.3f  %s\n",
                  mode.c_str(), cap, rate, ratio, ok ? "ok" : "OFF");
      r.Add("cap" + std::to_string(cap) + "_ratio", ratio);
      failures += ok ? 0 : 1;
    }
  }
  r.Print();
  return failures == 0 ? 0 : 1;
}
