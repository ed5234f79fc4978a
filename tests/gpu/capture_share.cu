// Stream capture under a compute share: a CUDA graph captured while
// libtessera-cuda.so gates launches must capture, launch and compute right.
//   gpu_capture_share MODE        MODE: global | threadlocal | relaxed
// Run with the library preloaded, TESSERA_GPU_CORE_PERCENT_0=50 and
// TESSERA_GPU_CORE_POLICY=hard. The capture holds kernels never launched
// before (the gate has no measurement of them), a cudaMallocAsync and its
// cudaFreeAsync; meanwhile another thread keeps launching short kernels on
// another stream, so the gate is busy (and its helper thread polling
// events) during the capture. The graph is launched twice and the result
// checked. A watchdog ends the program (exit 3) if a step hangs for 20 s.
// Exit 0 pass, 1 wrong result or a CUDA error.
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "result_line.h"

namespace {

__global__ void AddOne(int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

__global__ void Double(const int* a, int* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = 2 * a[i];
}

__global__ void Busy(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

std::atomic<const char*> g_step{"start"};

void Watchdog() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::printf("HANG: no progress for 20 s at step '%s'\n", g_step.load());
    std::fflush(stdout);
    _exit(3);
  }).detach();
}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("FAIL: %s: %s (%d)\n", what, cudaGetErrorString(e), static_cast<int>(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  cudaStreamCaptureMode capture_mode;
  if (mode == "global") {
    capture_mode = cudaStreamCaptureModeGlobal;
  } else if (mode == "threadlocal") {
    capture_mode = cudaStreamCaptureModeThreadLocal;
  } else if (mode == "relaxed") {
    capture_mode = cudaStreamCaptureModeRelaxed;
  } else {
    std::fprintf(stderr, "usage: %s global|threadlocal|relaxed\n", argv[0]);
    return 2;
  }
  Watchdog();
  constexpr int kN = 1 << 20;
  constexpr int kThreads = 256;
  constexpr int kBlocks = (kN + kThreads - 1) / kThreads;
  g_step = "init";
  int* x = nullptr;
  int* out = nullptr;
  cudaStream_t s, s2;
  int khz = 0;
  if (!Ok(cudaSetDevice(0), "cudaSetDevice") || !Ok(cudaMalloc(&x, kN * sizeof(int)), "cudaMalloc") ||
      !Ok(cudaMalloc(&out, kN * sizeof(int)), "cudaMalloc") ||
      !Ok(cudaMemset(x, 0, kN * sizeof(int)), "cudaMemset") ||
      !Ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !Ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !Ok(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate") ||
      !Ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) {
    return 1;
  }
  // Load the kernels' module now (lazy loading would load it inside the
  // capture) without launching them: the gate must still meet them first in
  // the capture.
  cudaFuncAttributes attr;
  if (!Ok(cudaFuncGetAttributes(&attr, AddOne), "cudaFuncGetAttributes") ||
      !Ok(cudaFuncGetAttributes(&attr, Double), "cudaFuncGetAttributes")) {
    return 1;
  }

  // The neighbour thread: ~50 us kernels on s2 without pause; it synchronizes
  // s2 only while no capture is in progress (mu held by the capture).
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::atomic<long> neighbour_launches{0};
  std::atomic<int> neighbour_error{0};
  std::thread neighbour([&] {
    cudaSetDevice(0);
    const long long cycles = khz / 20;
    while (!stop.load()) {
      Busy<<<1, 32, 0, s2>>>(cycles);
      const cudaError_t e = cudaPeekAtLastError();
      if (e != cudaSuccess) neighbour_error = static_cast<int>(e);
      if (++neighbour_launches % 20 == 0 && mu.try_lock()) {
        cudaStreamSynchronize(s2);
        mu.unlock();
      }
    }
    cudaStreamSynchronize(s2);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  // x = 0. One graph launch: x += 1; tmp = 2x; tmp += 1; out = 2 tmp; x += 1.
  g_step = "capture";
  cudaGraph_t graph = nullptr;
  bool ok = true;
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    ok = Ok(cudaStreamBeginCapture(s, capture_mode), "cudaStreamBeginCapture");
    if (ok) {
      int* tmp = nullptr;
      AddOne<<<kBlocks, kThreads, 0, s>>>(x, kN);
      ok = Ok(cudaPeekAtLastError(), "launch AddOne in capture") &&
           Ok(cudaMallocAsync(&tmp, kN * sizeof(int), s), "cudaMallocAsync in capture");
      if (ok) {
        Double<<<kBlocks, kThreads, 0, s>>>(x, tmp, kN);
        AddOne<<<kBlocks, kThreads, 0, s>>>(tmp, kN);
        Double<<<kBlocks, kThreads, 0, s>>>(tmp, out, kN);
        ok = Ok(cudaPeekAtLastError(), "launch in capture") &&
             Ok(cudaFreeAsync(tmp, s), "cudaFreeAsync in capture");
        AddOne<<<kBlocks, kThreads, 0, s>>>(x, kN);
        ok = ok && Ok(cudaPeekAtLastError(), "launch AddOne in capture");
      }
      g_step = "end capture";
      ok = Ok(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture") && ok;
    }
  }
  const double capture_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  g_step = "instantiate and launch";
  cudaGraphExec_t exec = nullptr;
  ok = ok && Ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  ok = ok && Ok(cudaGraphLaunch(exec, s), "cudaGraphLaunch 1");
  ok = ok && Ok(cudaGraphLaunch(exec, s), "cudaGraphLaunch 2");
  ok = ok && Ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  g_step = "stop neighbour";
  stop = true;
  neighbour.join();
  long wrong = -1;
  if (ok) {
    // Two launches: x = 2 after the first, 4 after the second; the second
    // computes out = 2 * (2 * 3 + 1) = 14.
    std::vector<int> hx(kN), hout(kN);
    g_step = "copy back";
    ok = Ok(cudaMemcpy(hx.data(), x, kN * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy") &&
         Ok(cudaMemcpy(hout.data(), out, kN * sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
    wrong = 0;
    for (int i = 0; i < kN; ++i) wrong += (hx[i] != 4 || hout[i] != 14) ? 1 : 0;
    if (wrong != 0) std::printf("FAIL: %ld wrong elements (x[0]=%d out[0]=%d)\n", wrong, hx[0], hout[0]);
  }
  if (neighbour_error != 0) {
    std::printf("FAIL: neighbour thread's launch error %d\n", neighbour_error.load());
  }
  std::printf("%s: capture %.1f ms, neighbour launched %ld kernels, %s\n", mode.c_str(), capture_ms,
              neighbour_launches.load(), ok && wrong == 0 ? "graph right" : "FAILED");
  ResultLine r;
  r.Add("capture_ms", capture_ms);
  r.Add("neighbour_launches", static_cast<double>(neighbour_launches.load()));
  r.Add("wrong_elements", static_cast<double>(wrong));
  r.Print();
  return ok && wrong == 0 && neighbour_error == 0 ? 0 : 1;
}
