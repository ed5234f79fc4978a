// The C++ side of every exported entry point, one declaration per line of
// hook_list.inc: exports.cc's extern "C" trampolines call these. noexcept:
// nothing is thrown across the C ABI.
#pragma once

#include "cuda/cuda_api.h"

namespace tessera::cuda::hooks {

#define TESSERA_CU_HOOK(name, params, args) CUresult name params noexcept;
#define TESSERA_NVML_HOOK(name, params, args) nvmlReturn_t name params noexcept;
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL

}  // namespace tessera::cuda::hooks

extern "C" {
// Called by the dlsym entry stub: our hook for `name` when `name` is a hooked
// CUDA or NVML symbol that exists where the caller looks, else nullptr (the
// stub then jumps to the real dlsym with the caller's return address intact).
void* tessera_cuda_dlsym_route(void* handle, const char* name);
}
