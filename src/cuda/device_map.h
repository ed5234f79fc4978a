// Which of the container's GPUs a device is: the index of its per-GPU
// variables (TESSERA_GPU_*_<i>) and region slots, which is its place in the
// node agent's assignment, not its CUDA ordinal (CUDA orders devices fastest
// first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and CUDA_VISIBLE_DEVICES set in
// the container selects and reorders them) nor its NVML index (PCI order).
//
// With TESSERA_GPU_UUID_<i> configured, a device is matched by UUID:
// cuDeviceGetUuid_v2 (else cuDeviceGetUuid) for a CUDA ordinal,
// nvmlDeviceGetUUID for an NVML device. A device matching none is not part of
// the share: it is logged once, at error level, and left unlimited. With no
// UUID configured (limits set by hand), the index is the CUDA ordinal, and
// for NVML the NVML index, as before UUIDs were read.
//
// Each CUDA ordinal and NVML index below 64 is resolved once and cached:
// after that a lookup is one acquire load. Higher ones are resolved at each
// call. No lock is held across the driver calls; nothing is constructed
// statically. Thread-safe; call only after init (EnsureInit).
//
//   const Gpu gpu = CurrentGpu();
//   if (gpu.Shared()) Admit(*acct, gpu, bytes, "cuMemAlloc_v2");
#pragma once

#include "cuda/cuda_api.h"

namespace tessera::cuda {

// A CUDA device as the hooks need it: the ordinal for driver calls, the
// index for the region and the configuration.
struct Gpu {
  int ordinal = -1;  // CUDA ordinal in this process; -1: unknown
  int index = -1;    // the container's GPU index; -1: not part of the share
  bool Shared() const { return index >= 0; }
};

// The device of the calling thread's current context; {-1, -1} without one.
Gpu CurrentGpu();
// CUDA ordinal `ordinal` (as given to cuMemCreate, cuDeviceTotalMem, ...).
// An ordinal the driver does not know is {ordinal, -1}.
Gpu GpuOfOrdinal(int ordinal);
// The CUDA ordinal already resolved to `index` in this process, or -1.
int OrdinalOfIndex(int index);
// The index of NVML device `device`, or -1 when it is not part of the share
// or NVML cannot say which device it is.
int NvmlShareIndex(nvmlDevice_t device);

}  // namespace tessera::cuda
