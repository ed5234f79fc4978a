// The CUDA driver and NVML declarations every file of the interception
// library sees: exported names literal (cuMemAlloc_v2 and cuMemAlloc, not a
// macro mapping one to the other), so each hook is checked by the compiler
// against the header's own prototype of the symbol it replaces.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <cuda.h>
#include <nvml.h>
