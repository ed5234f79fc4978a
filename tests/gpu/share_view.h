// The container's share of GPU 0 as the GPU test programs read it: the limit
// they were started with and what the share has charged, as cuMemGetInfo
// (through the library) reports it. Needs a current context.
//
//   if (ChargedBytes() > LimitBytes()) ...
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdlib>

inline constexpr size_t kMiB = size_t{1} << 20;

// TESSERA_GPU_MEM_LIMIT_MIB_0 in bytes, or 0 when unset.
inline size_t LimitBytes() {
  const char* v = std::getenv("TESSERA_GPU_MEM_LIMIT_MIB_0");
  return v != nullptr ? std::strtoull(v, nullptr, 10) * kMiB : 0;
}

// What the library charges the share for one process's CUDA context:
// TESSERA_GPU_CONTEXT_MIB_0, else TESSERA_GPU_CONTEXT_MIB, else its default
// (256 MiB, src/cuda/config.h).
inline size_t ContextBytes() {
  const char* v = std::getenv("TESSERA_GPU_CONTEXT_MIB_0");
  if (v == nullptr) v = std::getenv("TESSERA_GPU_CONTEXT_MIB");
  return (v != nullptr ? std::strtoull(v, nullptr, 10) : 256) * kMiB;
}

// Charged bytes on the current device: total - free.
inline size_t Used() {
  size_t f = 0, t = 0;
  cuMemGetInfo(&f, &t);
  return t - f;
}
