// Hooks of context creation and destruction. The driver reports no size for
// a context, so each process's contexts on one of the container's GPUs are
// charged Config::context_bytes (TESSERA_GPU_CONTEXT_MIB) of that GPU's
// share, once: from its first context there (a primary-context retain or a
// cuCtxCreate) to its last (the last release, or cuCtxDestroy). A context the
// share cannot hold is refused with CUDA_ERROR_OUT_OF_MEMORY before the
// driver is asked, as the driver itself refuses one on a full GPU.
//
// cuDevicePrimaryCtxReset is not hooked: a reset does not release the
// primary context (cuda.h), the driver re-creates its resources at its next
// use, so the charge stays until the last release.
#include <cstdint>

#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

// The accountant and device `dev` as the share knows it; gpu.Shared() only
// when enforcing and `dev` is one of the container's GPUs.
struct Target {
  Accountant* acct = nullptr;
  Gpu gpu;
};

Target TargetOf(CUdevice dev) {
  Target t;
  t.acct = EnsureInit() == kEnforce ? CurrentAccountant() : nullptr;
  if (t.acct != nullptr) t.gpu = GpuOfOrdinal(dev);
  return t;
}

// Opens a context reference on `dev` (charging the process's first there),
// runs `make` (the driver call), and undoes the reference if it fails;
// `made(acct, gpu)` records a success and gives the result.
template <typename Make, typename Made>
CUresult Open(CUdevice dev, const char* api, Make make, Made made) {
  const Target t = TargetOf(dev);
  if (!t.gpu.Shared()) return make();
  const uint64_t bytes = CurrentConfig().context_bytes[t.gpu.index];
  if (CUresult r = AdmitContext(*t.acct, t.gpu, bytes, api); r != CUDA_SUCCESS) return r;
  if (CUresult r = make(); r != CUDA_SUCCESS) {
    t.acct->CloseContext(t.gpu.index);
    return r;
  }
  return made(*t.acct, t.gpu);
}

[[gnu::cold, gnu::noinline]] CUresult RetainPrimary(CUcontext* pctx, CUdevice dev) {
  return Open(
      dev, "cuDevicePrimaryCtxRetain",
      [&] { return TESSERA_REAL(cuDevicePrimaryCtxRetain)(pctx, dev); },
      [](Accountant& acct, Gpu gpu) {
        acct.PrimaryRetained(gpu.index);
        return CUDA_SUCCESS;
      });
}

template <typename Real>
[[gnu::cold, gnu::noinline]] CUresult CreateContext(CUcontext* pctx, CUdevice dev, Real real,
                                                    const char* api) {
  return Open(dev, api, real, [pctx](Accountant& acct, Gpu gpu) {
    const uint64_t ctx = reinterpret_cast<uint64_t>(*pctx);
    if (acct.ContextCreated(ctx, gpu.index)) return CUDA_SUCCESS;
    TESSERA_REAL(cuCtxDestroy_v2)(*pctx);
    acct.CloseContext(gpu.index);
    return CUDA_ERROR_OUT_OF_MEMORY;
  });
}

// Releases: the driver first; only a release it accepted closes a reference.
template <typename Real>
[[gnu::cold, gnu::noinline]] CUresult ReleasePrimary(CUdevice dev, Real real) {
  EnsureInit();
  const CUresult r = real(dev);
  if (r != CUDA_SUCCESS) return r;
  if (const Target t = TargetOf(dev); t.gpu.Shared()) t.acct->PrimaryReleased(t.gpu.index);
  return r;
}

template <typename Real>
[[gnu::cold, gnu::noinline]] CUresult DestroyContext(CUcontext ctx, Real real) {
  EnsureInit();
  const CUresult r = real(ctx);
  if (Accountant* acct = CurrentAccountant(); acct != nullptr && r == CUDA_SUCCESS)
    acct->ContextDestroyed(reinterpret_cast<uint64_t>(ctx));
  return r;
}

}  // namespace

namespace hooks {

// Fast path in each hook below: one acquire load and one branch when no limit
// applies (see runtime.h); everything else is in the cold helpers.

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
  return RetainPrimary(pctx, dev);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuDevicePrimaryCtxRelease)(dev);
  return ReleasePrimary(dev, TESSERA_LAZY(cuDevicePrimaryCtxRelease));
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuDevicePrimaryCtxRelease_v2)(dev);
  return ReleasePrimary(dev, TESSERA_LAZY(cuDevicePrimaryCtxRelease_v2));
}

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuCtxCreate)(pctx, flags, dev);
  return CreateContext(
      pctx, dev, [=] { return TESSERA_REAL(cuCtxCreate)(pctx, flags, dev); }, "cuCtxCreate");
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuCtxCreate_v2)(pctx, flags, dev);
  return CreateContext(
      pctx, dev, [=] { return TESSERA_REAL(cuCtxCreate_v2)(pctx, flags, dev); }, "cuCtxCreate_v2");
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int num_params,
                        unsigned int flags, CUdevice dev) noexcept {
  if (PassThrough()) [[likely]]
    return TESSERA_REAL(cuCtxCreate_v3)(pctx, params, num_params, flags, dev);
  return CreateContext(
      pctx, dev,
      [=] { return TESSERA_REAL(cuCtxCreate_v3)(pctx, params, num_params, flags, dev); },
      "cuCtxCreate_v3");
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                        CUdevice dev) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuCtxCreate_v4)(pctx, params, flags, dev);
  return CreateContext(
      pctx, dev, [=] { return TESSERA_REAL(cuCtxCreate_v4)(pctx, params, flags, dev); },
      "cuCtxCreate_v4");
}

CUresult cuCtxDestroy(CUcontext ctx) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuCtxDestroy)(ctx);
  return DestroyContext(ctx, TESSERA_LAZY(cuCtxDestroy));
}

CUresult cuCtxDestroy_v2(CUcontext ctx) noexcept {
  if (PassThrough()) [[likely]] return TESSERA_REAL(cuCtxDestroy_v2)(ctx);
  return DestroyContext(ctx, TESSERA_LAZY(cuCtxDestroy_v2));
}

}  // namespace hooks
}  // namespace tessera::cuda
