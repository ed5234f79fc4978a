// Shared state of the fake driver (fake_cuda.cc and its siblings). Every
// entry point takes State::mu; nothing here is fast, only faithful enough.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace fake {

inline constexpr int kMaxDevices = 16;
inline constexpr uint64_t kPoolStep = 2ull << 20;
inline constexpr uint64_t kArrayPage = 64ull << 10;
inline constexpr uint64_t kVmmGranularity = 2ull << 20;

inline uint64_t RoundUp(uint64_t v, uint64_t step) { return (v + step - 1) / step * step; }

struct Block {
  int dev;
  uint64_t bytes;
};
struct Pool {
  int dev;  // -1: host-located
  uint64_t reserved = 0;
  uint64_t used = 0;
};
struct Handle {
  int dev;  // -1: host-located
  uint64_t bytes;
  int refs;
};
struct AsyncBlock {
  Pool* pool;
  uint64_t bytes;
};

struct State {
  State();
  std::mutex mu;
  int devices;                        // visible to CUDA in this process
  int physical_devices;               // on the "node" (NVML sees them all)
  int physical[kMaxDevices] = {};     // CUDA ordinal -> physical (PCI) index
  uint64_t mem_bytes;
  int driver_version;
  uint64_t used[kMaxDevices] = {};
  uint64_t next_address = 0x10000000;
  std::map<uint64_t, Block> linear;
  std::map<uint64_t, AsyncBlock> async;
  Pool* default_pool[kMaxDevices] = {};
  std::map<uint64_t, Handle> handles;
  uint64_t next_handle = 1;
  std::map<uint64_t, uint64_t> mappings;  // address -> handle
  std::map<uint64_t, Block> arrays;       // CUarray / CUmipmappedArray -> size
  uint64_t graph_reserved[kMaxDevices] = {};
};

State& S();
extern thread_local int t_device;
// Device memory bookkeeping; callers hold S().mu.
CUresult Take(int dev, uint64_t bytes);
void Give(int dev, uint64_t bytes);
uint64_t NewAddress(uint64_t bytes);
uint64_t EnvU(const char* name, uint64_t def);

// Simulated time (fake_launch.cc); callers hold S().mu. The stream a handle
// names (nullptr: none; `ptsz`: NULL is the per-thread default stream), and
// work of `duration_ns` queued on it; returns when it ends.
void* ResolveStreamLocked(CUstream s, bool ptsz);
uint64_t EnqueueLocked(void* stream, uint64_t duration_ns);

}  // namespace fake
