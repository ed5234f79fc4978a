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
  int refs;      // references not yet released (cuMemRelease)
  int maps = 0;  // address ranges it is mapped at (cuMemMap)
};
// A VMM mapping (cuMemMap): `bytes` at its address, backed by `handle`.
struct Mapping {
  uint64_t handle;
  uint64_t bytes;
};
struct AsyncBlock {
  Pool* pool;
  uint64_t bytes;
};
// A graph (CUgraph) and its instantiation (CUgraphExec): only what a launch
// costs matters, its kernels' summed duration and its memory nodes' bytes.
struct Graph {
  uint64_t bytes = 0;
  uint64_t kernel_ns = 0;  // simulated duration of one launch
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
  // The physical memory of a handle is freed when it is released and its
  // last mapping is gone, as the real driver does.
  std::map<uint64_t, Mapping> mappings;  // address -> mapping
  std::map<uint64_t, Block> arrays;       // CUarray / CUmipmappedArray -> size
  uint64_t graph_reserved[kMaxDevices] = {};
  // Contexts: each costs `context_bytes` of its device (FAKE_CUDA_CONTEXT_MIB,
  // default 0) while it exists. The primary context of a device exists from
  // its first retain to its last release (or a reset); created contexts
  // (cuCtxCreate) from creation to cuCtxDestroy.
  uint64_t context_bytes;
  int primary_refs[kMaxDevices] = {};
  bool primary_live[kMaxDevices] = {};
  std::map<uint64_t, int> contexts;  // created CUcontext -> device
  uint64_t next_context = 0x100000;
};

State& S();
// The calling thread's current device (-1: none) and, when it is a created
// context, that context (nullptr: the device's primary context).
extern thread_local int t_device;
extern thread_local CUcontext t_ctx;
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
// What a resolved stream is: its device, whether it synchronizes with the
// legacy default stream, and whether it is that stream.
struct StreamInfo {
  int dev;
  bool blocking;
  bool legacy;
};
StreamInfo InfoLocked(void* stream);

// Stream capture (fake_capture.cc); callers hold S().mu. `stream` is a
// resolved stream. A capture records work into its graph instead of running
// it, until cuStreamEndCapture hands the graph over.
struct Capture {
  uint64_t id;
  CUstreamCaptureMode mode;
  uint64_t thread;  // ThreadId() of the thread that began it
  void* stream;
  bool invalidated = false;
  Graph* graph;
};
// This thread's identity, for capture ownership and modes.
uint64_t ThreadId();
// Counts one call of `api` by the calling thread (tessera_fake_cuda_thread_calls).
void CountCall(const char* api);
// The capture `stream` belongs to, or nullptr.
Capture* CaptureOfLocked(void* stream);
// Whether work may be added to `c`: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
// once it is invalidated.
CUresult CaptureUsableLocked(const Capture* c);
// Work on `stream` that would depend implicitly on a capturing stream (the
// legacy default stream while a blocking stream of its device captures):
// invalidates those captures and returns CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
CUresult ImplicitLocked(void* stream);
// A potentially unsafe call (synchronize, query, cuMemAlloc): prohibited
// while this thread's capture-interaction mode is not relaxed and a global
// capture runs anywhere, or a non-relaxed one on this thread. Prohibited:
// those captures are invalidated, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
CUresult UnsafeCallLocked();
// Use of an event last recorded in capture `capture_id` (cuEventQuery,
// cuEventSynchronize, cuEventElapsedTime): invalidates that capture if it
// still runs; CUDA_ERROR_CAPTURED_EVENT.
CUresult CapturedEventLocked(uint64_t capture_id);
// `stream` is being destroyed: its capture, if any, ends unfinished.
void ForgetStreamLocked(void* stream);

}  // namespace fake
