// The kernels the GPU test programs time, and the helpers they share. Each
// program is one translation unit that includes this once.
//
//   Spin: spins for `cycles` of the SM's clock. A fixed time alone, but not
//     a fixed amount of work beside another context: the clock runs on
//     while the GPU time-slices to the other one, so a spin preempted
//     mid-way finishes early (two uncapped spin loops each "got" 0.64 of an
//     H200). For a process alone on the GPU.
//   Chain: a fixed amount of work, a dependent chain of `iters`
//     multiply-adds per thread (~4 cycles each: iters = clock kHz / 4 is
//     about 1 ms). Kernels completed measure GPU time received even while
//     contexts time-slice. For processes that share the GPU.
// Both count themselves in `*done` when `done` is not null.
//
//   CUDA_OK(cudaSetDevice(0));   // prints the call and exits 2 on an error
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_OK(expr)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                \
                   cudaGetErrorString(e_));                                             \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

static __global__ void Spin(long long cycles, unsigned long long* done) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (done != nullptr && threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(done, 1ull);
}

static __global__ void Chain(long long iters, unsigned long long* done, float* sink) {
  float x = static_cast<float>(threadIdx.x);
  for (long long i = 0; i < iters; ++i) x = fmaf(x, 0.999999f, 0.5f);
  if (x == -1.0f) *sink = x;  // never true; keeps the chain
  if (done != nullptr && threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(done, 1ull);
}

// Microseconds of a steady_clock duration.
inline double Us(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// The middle element (the upper one of an even count); -1 when empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}
