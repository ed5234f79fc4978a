// The C ABI of libtessera-cuda.so: one extern "C" trampoline per line of
// hook_list.inc into the noexcept C++ hook. Each definition is compiled
// against cuda.h / nvml.h's declaration of the same symbol, so a prototype
// that drifts from the headers does not compile.
#include "cuda/hooks.h"

#define TESSERA_EXPORT __attribute__((visibility("default")))

#define TESSERA_CU_HOOK(name, params, args) \
  extern "C" TESSERA_EXPORT CUresult name params { return ::tessera::cuda::hooks::name args; }
#define TESSERA_NVML_HOOK(name, params, args) \
  extern "C" TESSERA_EXPORT nvmlReturn_t name params { return ::tessera::cuda::hooks::name args; }
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
