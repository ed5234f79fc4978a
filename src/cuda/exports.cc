// The C ABI of libtessera-cuda.so: one extern "C" trampoline per line of
// hook_list.inc into the noexcept C++ hook. Each definition is compiled
// against cuda.h / nvml.h's declaration of the same symbol, so a prototype
// that drifts from the headers does not compile; nor does a row of
// abi_list.inc whose ABI is not cudaTypedefs.h's.
#include "cuda/hooks.h"  // first: cuda_api.h's view of cuda.h

#include <cudaTypedefs.h>

#include <type_traits>

#define TESSERA_EXPORT __attribute__((visibility("default")))

#define TESSERA_CU_HOOK(name, params, args) \
  extern "C" TESSERA_EXPORT CUresult name params { return ::tessera::cuda::hooks::name args; }
#define TESSERA_NVML_HOOK(name, params, args) \
  extern "C" TESSERA_EXPORT nvmlReturn_t name params { return ::tessera::cuda::hooks::name args; }
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"

// Each row of abi_list.inc names a cudaTypedefs.h typedef, so its version
// and stream variant are the header's, of exactly the hook's type.
#define TESSERA_PFN_Legacy(base, since) PFN_##base##_v##since
#define TESSERA_PFN_Ptsz(base, since) PFN_##base##_v##since##_ptsz
#define TESSERA_PFN_Ptds(base, since) PFN_##base##_v##since##_ptds
#define TESSERA_CU_ABI(name, base, since, stream)                                   \
  static_assert(std::is_same_v<decltype(&::name), TESSERA_PFN_##stream(base, since)>, \
                #name " is not cudaTypedefs.h's " #base " ABI of " #since " (" #stream ")");
#define TESSERA_CU_ABI_PASS(base, since, stream) \
  static_assert(sizeof(TESSERA_PFN_##stream(base, since)) != 0);
#include "cuda/abi_list.inc"
