// The table of real driver and NVML functions behind the hooks, indexed by
// an enum generated from hook_list.inc, plus the two lookups symbol routing
// needs: hook by exported name (dlsym) and hook by the name, cudaVersion and
// flags of a cuGetProcAddress request (abi_list.inc). The real functions are
// filled once at init and read-only afterwards, so reads need no lock once
// init has been published (see runtime.h); the lookups are constant tables.
//
//   CUresult r = TESSERA_REAL(cuMemAlloc_v2)(&ptr, bytes);
#pragma once

#include <cstddef>

#include "cuda/cuda_api.h"

namespace tessera::cuda {

enum class Fn : int {
#define TESSERA_CU_HOOK(name, params, args) name,
#define TESSERA_NVML_HOOK(name, params, args) name,
#define TESSERA_CU_CALL(name) name,
#define TESSERA_NVML_CALL(name) name,
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
  kCount
};
inline constexpr int kFnCount = static_cast<int>(Fn::kCount);

// Real function addresses; a missing symbol holds a stub of the same type that
// returns CUDA_ERROR_NOT_FOUND / NVML_ERROR_FUNCTION_NOT_FOUND.
extern void* g_real[kFnCount];

template <Fn F>
struct FnType;
#define TESSERA_FN_TYPE_(name) \
  template <>                  \
  struct FnType<Fn::name> {    \
    using Type = decltype(&::name); \
  };
#define TESSERA_CU_HOOK(name, params, args) TESSERA_FN_TYPE_(name)
#define TESSERA_NVML_HOOK(name, params, args) TESSERA_FN_TYPE_(name)
#define TESSERA_CU_CALL(name) TESSERA_FN_TYPE_(name)
#define TESSERA_NVML_CALL(name) TESSERA_FN_TYPE_(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
#undef TESSERA_FN_TYPE_

template <Fn F>
inline typename FnType<F>::Type Real() {
  return reinterpret_cast<typename FnType<F>::Type>(g_real[static_cast<int>(F)]);
}
#define TESSERA_REAL(name) ::tessera::cuda::Real<::tessera::cuda::Fn::name>()
// A callable that reads the real function when called, not when created:
// for helpers that run init first (the table is empty before init).
#define TESSERA_LAZY(name) [](auto... a) { return TESSERA_REAL(name)(a...); }

// Resolves every driver entry of the table from `libcuda` with `lookup` (the
// real dlsym). Returns how many were missing (and got stubs).
int ResolveDriver(void* libcuda, void* (*lookup)(void*, const char*));
// The same for NVML entries.
int ResolveNvml(void* libnvml, void* (*lookup)(void*, const char*));

// Our exported hook named `name`, or nullptr when we export no such symbol.
void* HookByName(const char* name);
// Our hook for cuGetProcAddress(symbol, cuda_version, flags), by name, never
// by the address the driver returned: of the ABIs of `symbol` in
// abi_list.inc, the one the driver hands out for that request (the newest
// introduced at or before `cuda_version`; its _ptsz/_ptds variant where
// `flags` has CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM and one exists).
// A hooked exported name (cuMemAlloc_v2) is that ABI. Returns nullptr when we
// do not hook `symbol`, and also sets *unhooked_abi when we hook the name but
// not that ABI (or know none as old as `cuda_version`). Any time, any thread.
void* HookForProcAddress(const char* symbol, int cuda_version, cuuint64_t flags,
                         bool* unhooked_abi);
// Every exported name (for tests and the export-map check).
const char* HookName(int index);
int HookCount();

}  // namespace tessera::cuda
