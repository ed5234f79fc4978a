// What libtessera-cuda.so enforces, read once from the environment the node
// agent gives the container (see docs/interception.md for the variables).
// Parsing is separate from getenv so tests can feed any environment.
//
//   Config c = ParseConfig([](const char* n) { return secure_getenv(n); }, &problems);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/gpu_uuid.h"
#include "region/region.h"

namespace tessera::cuda {

// The default context charge: 256 MiB, the low end of what a CUDA 12/13
// context (lazy module loading, the default since 12.2) is reported to take
// on the data-center GPUs Tessera shares, so that a process is not charged
// more than its context costs there while most of it is counted. The node
// agent, which knows the GPU model, may set the measured figure.
inline constexpr uint64_t kDefaultContextMiB = 256;

struct Config {
  // TESSERA_CUDA_DISABLE=1: pass every call through, whatever else is set.
  bool disabled = false;
  // TESSERA_REGION_DIR: the container's region directory (shared by all its
  // processes). Empty: a region private to this process and its forks.
  std::string region_dir;
  // TESSERA_GPU_UUID_<i>: the UUID of the i-th GPU of the container's
  // assignment ("GPU-" + 36 characters, as NVML writes it). Index i (of every
  // per-GPU variable below, and of the region's per-GPU slots) then means the
  // device with this UUID, whatever its CUDA ordinal or NVML index
  // (ShareIndexOf). has_uuid[i]: whether uuid[i] was given.
  GpuUuid uuid[region::kMaxGpus] = {};
  bool has_uuid[region::kMaxGpus] = {};
  // TESSERA_GPU_MEM_LIMIT_MIB_<i> (the container's GPU i, see `uuid`), else
  // TESSERA_GPU_MEM_LIMIT_MIB for every device. 0 = no limit.
  uint64_t limit_bytes[region::kMaxGpus] = {};
  // TESSERA_GPU_CONTEXT_MIB_<i>, else TESSERA_GPU_CONTEXT_MIB, else
  // kDefaultContextMiB: what each process's contexts on the container's GPU
  // i are charged to its share, together, while it has one there (the
  // driver reports no size for a context). 0: contexts are not charged.
  uint64_t context_bytes[region::kMaxGpus] = {};
  // TESSERA_MANAGED_MEMORY=count (default) | ignore: whether
  // cuMemAllocManaged counts against the limit.
  bool count_managed = true;
  // TESSERA_GPU_MEM_VIEW=share (default) | device: whether memory queries
  // show the share or the card as the total (memory_view.h). The limit is
  // enforced either way; the node agent sets `device` for gpushare-style
  // containers.
  bool device_total = false;
  // TESSERA_LOG_LEVEL: 0 error, 1 warning (default), 2 info, 3 debug.
  int log_level = 1;
  // TESSERA_GPU_CORE_PERCENT_<i>, else TESSERA_GPU_CORE_PERCENT: compute
  // share of the container's GPU i in parts per million ("12.5" -> 125000).
  // 0 or 100 %: no compute limit, launches pass through.
  uint32_t core_ppm[region::kMaxGpus] = {};
  // TESSERA_GPU_CORE_POLICY=share (default) | hard. `hard` caps the
  // container at its share. `share` is work-conserving: the node agent's
  // arbiter grants it more when others are idle; until an arbiter has
  // written to the region it is not gated at all, and once one has, a dead
  // arbiter means the static share (compute_gate.h).
  bool core_hard = false;
  // TESSERA_GPU_CORE_WINDOW_MS: refill period of the compute bucket
  // (default 100, 10-1000).
  uint32_t core_window_us = 100'000;
  // TESSERA_GPU_BOARD_DIR: a folder shared by every container on the node
  // (or at least on the same GPUs), holding one busy board per physical GPU
  // (region/board.h): `<uuid>.board` for the container's GPU i with a
  // TESSERA_GPU_UUID_<i>, else `gpu<i>.board`. Where set, a launch's
  // measured time is charged only this process's share of it while other
  // contexts are busy on the GPU (contention.h). Empty: charged as measured.
  std::string board_dir;
  // TESSERA_TEST_CLOCK=fake_cuda (tests only): the launch gate takes its
  // clock from the fake driver's virtual one (tests/fake_cuda/fake_control.h).
  bool fake_clock = false;

  bool AnyLimit() const;
  bool AnyComputeLimit() const;
  bool AnyUuid() const;

  // The index (0 to kMaxGpus - 1) of the device whose UUID is `uuid` and
  // whose CUDA ordinal or NVML index is `fallback`, or -1 when it is not part
  // of the share (no limit applies to it). With UUIDs configured, the i
  // whose uuid[i] equals `uuid` (nullptr, the UUID being unknown: -1). With
  // none (limits set by hand), `fallback` itself when it is in range.
  int ShareIndexOf(int fallback, const GpuUuid* uuid) const;
};

// Reads the TESSERA_* variables through `env` (nullptr = unset). A value that
// does not parse is left at its default and described in `problems`.
Config ParseConfig(const std::function<const char*(const char*)>& env,
                   std::vector<std::string>* problems);

}  // namespace tessera::cuda
