// Hooks of every kernel launch entry point: the compute gate (launch_gate.h)
// admits each launch as one unit, then measures it. Graph launches are gated
// in pool_hooks.cc, beside their graph-memory accounting.
//
// Fast path (no compute limit on any GPU, or TESSERA_CUDA_DISABLE): one
// acquire load of g_launch_mode (a plain load on x86-64), one predictable
// branch, the driver's function. No getenv, syscall, lock or driver call
// before the branch; before init the slow path runs init once.
#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/launch_gate.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

// Gates `launch` (which calls the real driver function) on `stream`.
template <typename Launch>
[[gnu::cold, gnu::noinline]] CUresult Gated(CUfunction f, CUstream stream, bool ptsz,
                                            Launch launch) {
  EnsureInit();
  LaunchGate* gate = CurrentGate();
  if (gate == nullptr) return launch();
  LaunchGate::Ticket t = gate->Before(f, stream, ptsz);
  CUresult r = launch();
  gate->After(t, r);
  return r;
}

}  // namespace

namespace hooks {

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                        CUstream stream, void** params, void** extra) noexcept {
  if (LaunchPassThrough()) [[likely]]
    return TESSERA_REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
  return Gated(f, stream, false, [&] {
    return TESSERA_REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
  });
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                             CUstream stream, void** params, void** extra) noexcept {
  if (LaunchPassThrough()) [[likely]]
    return TESSERA_REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, stream, params,
                                             extra);
  return Gated(f, stream, true, [&] {
    return TESSERA_REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, stream, params,
                                             extra);
  });
}

// A cooperative launch through cuLaunchKernelEx (CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
// is one launch like any other: admitted whole, never split.
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                          void** extra) noexcept {
  if (LaunchPassThrough()) [[likely]] return TESSERA_REAL(cuLaunchKernelEx)(config, f, params, extra);
  return Gated(f, config != nullptr ? config->hStream : nullptr, false,
               [&] { return TESSERA_REAL(cuLaunchKernelEx)(config, f, params, extra); });
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) noexcept {
  if (LaunchPassThrough()) [[likely]]
    return TESSERA_REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra);
  return Gated(f, config != nullptr ? config->hStream : nullptr, true,
               [&] { return TESSERA_REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra); });
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                   unsigned int gz, unsigned int bx, unsigned int by,
                                   unsigned int bz, unsigned int shmem, CUstream stream,
                                   void** params) noexcept {
  if (LaunchPassThrough()) [[likely]]
    return TESSERA_REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shmem, stream,
                                                   params);
  return Gated(f, stream, false, [&] {
    return TESSERA_REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shmem, stream,
                                                   params);
  });
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream stream,
                                        void** params) noexcept {
  if (LaunchPassThrough()) [[likely]]
    return TESSERA_REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, stream,
                                                        params);
  return Gated(f, stream, true, [&] {
    return TESSERA_REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, stream,
                                                        params);
  });
}

// Legacy launches run on the legacy default stream (cuLaunchGridAsync: on
// its stream).
CUresult cuLaunch(CUfunction f) noexcept {
  if (LaunchPassThrough()) [[likely]] return TESSERA_REAL(cuLaunch)(f);
  return Gated(f, nullptr, false, [&] { return TESSERA_REAL(cuLaunch)(f); });
}

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) noexcept {
  if (LaunchPassThrough()) [[likely]] return TESSERA_REAL(cuLaunchGrid)(f, grid_width, grid_height);
  return Gated(f, nullptr, false,
               [&] { return TESSERA_REAL(cuLaunchGrid)(f, grid_width, grid_height); });
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height,
                           CUstream stream) noexcept {
  if (LaunchPassThrough()) [[likely]]
    return TESSERA_REAL(cuLaunchGridAsync)(f, grid_width, grid_height, stream);
  return Gated(f, stream, false, [&] {
    return TESSERA_REAL(cuLaunchGridAsync)(f, grid_width, grid_height, stream);
  });
}

}  // namespace hooks
}  // namespace tessera::cuda
