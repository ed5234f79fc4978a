// Process-wide state of libtessera-cuda.so: the mode (pass-through or
// enforcing), set once by a lazy init on the first hooked call; the region
// and this process's slot, re-registered after fork and raw clone; logging.
// Nothing runs in static constructors: every global is constant-initialized.
//
// Fast-path contract (every hook):
//   if (PassThrough()) [[likely]] return TESSERA_REAL(cuX)(args...);
//   return XSlow(args...);   // [[gnu::cold]]: EnsureInit(), then accounting
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda/accountant.h"
#include "cuda/config.h"
#include "cuda/cuda_api.h"
#include "cuda/device_map.h"

namespace tessera::cuda {

enum Mode : int { kUninit = 0, kPassThrough = 1, kEnforce = 2 };

extern std::atomic<int> g_mode;
// The launch hooks' own mode (kUninit, kPassThrough, kEnforce): enforcing
// only where some GPU has a compute limit, so a memory limit alone leaves
// launches at one load and one branch.
extern std::atomic<int> g_launch_mode;
extern int g_log_level;

// True once init has published pass-through mode: the real table is then
// complete (release store in init, acquire load here).
inline bool PassThrough() { return g_mode.load(std::memory_order_acquire) == kPassThrough; }

// True once init has published that launches pass through.
inline bool LaunchPassThrough() {
  return g_launch_mode.load(std::memory_order_acquire) == kPassThrough;
}

// Runs init once (thread-safe, never recursive) and returns the mode.
int EnsureInit();
// Resolves the NVML half of the real table once; false when NVML is absent.
bool EnsureNvml();

// This process's accountant when enforcing, else nullptr. Registers a new
// slot first when the pid changed (fork, raw clone).
Accountant* CurrentAccountant();
const Config& CurrentConfig();
// The launch gate when some GPU has a compute limit, else nullptr.
class LaunchGate;
LaunchGate* CurrentGate();

// The calling thread's current CUDA ordinal, or -1 without a context. For
// the region and the limits, use CurrentGpu() (device_map.h).
int CurrentDevice();
// Whether work on `stream` (NULL: the legacy stream, or with `ptsz` the
// per-thread default stream) is being captured into a graph, not run: true
// while it captures (active or invalidated) and when the driver cannot say
// (the legacy stream beside a capturing blocking stream answers
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). Hooks pass such work through,
// neither gated nor charged, and touch nothing on the stream; the graph is
// gated and charged when launched. A driver without cuStreamIsCapturing
// has no capture: false. One driver call; no lock.
bool StreamCapturing(CUstream stream, bool ptsz);
// Whether `index` names one of the container's GPUs (a Gpu::index in range).
inline bool ValidGpu(int index) { return index >= 0 && index < region::kMaxGpus; }

// Admission on `gpu` (Shared()) with one retry: on refusal, reaps dead
// processes of the container and re-reads pool reserves (the driver may have
// released memory), then tries again. CUDA_SUCCESS (charged) or
// CUDA_ERROR_OUT_OF_MEMORY.
CUresult Admit(Accountant& acct, Gpu gpu, uint64_t bytes, const char* api);
// A context reference on `gpu` (Accountant::OpenContext), charging `bytes`
// if it is this process's first context there, with the same retry as
// Admit. CUDA_SUCCESS (open) or CUDA_ERROR_OUT_OF_MEMORY (nothing changed;
// logged as a warning, since the process then has no context there).
CUresult AdmitContext(Accountant& acct, Gpu gpu, uint64_t bytes, const char* api);
// Re-reads a pool's reserved bytes and sets its charge to them.
void RefreshPool(Accountant& acct, uint64_t pool);
// Re-reads the graph pool reserve of `gpu` (by its ordinal) and sets the
// charge of its index to it; nothing when either is unknown.
void RefreshGraph(Accountant& acct, Gpu gpu);
// Re-reads the reserves of every pool and of the graph pool of `gpu`.
void RefreshReserves(Accountant& acct, Gpu gpu);

// The real dlsym (bootstrapped through dlvsym, never our own).
void* RealDlsym(void* handle, const char* name);
using DlsymFn = void* (*)(void*, const char*);
DlsymFn RealDlsymFn();

// printf-style line to stderr: "tessera-cuda[pid]: ...". Level checked first.
void LogWrite(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#define TESSERA_LOG(level, ...)                                                    \
  do {                                                                             \
    if (__builtin_expect((level) <= ::tessera::cuda::g_log_level, 0))              \
      ::tessera::cuda::LogWrite((level), __VA_ARGS__);                             \
  } while (0)
inline constexpr int kLogError = 0, kLogWarn = 1, kLogInfo = 2, kLogDebug = 3;

}  // namespace tessera::cuda
