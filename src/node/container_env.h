// What a sharing container receives from Allocate: NVIDIA_VISIBLE_DEVICES,
// its TESSERA_* limits, and the mounts of the interception library,
// /etc/ld.so.preload and its region directory; for an MPS pod also the MPS
// variables and its GPU's daemon pipe folder. Pure; thread-safe.
// docs/node-agent.md lists the variables.
//
//   TESSERA_ASSIGN_OR_RETURN(ContainerEnv env, BuildContainerEnv(pod, container, gpus, paths));
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/podspec.h"
#include "core/status.h"
#include "node/identify.h"

namespace tessera::node {

// Host paths the Allocate response mounts into containers, and the resource
// names that say which compatibility front end a container was written for
// (its extra variables, below).
struct MountPaths {
  std::string library_host = "/usr/local/lib/tessera/libtessera-cuda.so";  // the interception library
  std::string preload_host = "/usr/local/lib/tessera/ld.so.preload";      // names the library's container path
  std::string region_root_host = "/var/run/tessera/regions";              // + /<pod uid>/<container>
  // The GPUs' busy boards (region/board.h), one folder for every sharing
  // container of the node, pods' and claims' alike; "": <region root>/boards.
  std::string board_dir_host;
  // Root of the per-GPU MPS daemons' folders (MpsPipeDir, tessera-node
  // --mps-root); empty when this node runs no MPS (--mps=off, or auto
  // without the control program).
  std::string mps_root;
  // The folder the MPS daemons use as /dev/shm (tessera-node --mps-shm),
  // mounted at /dev/shm into MPS containers; empty when this node runs no MPS.
  std::string mps_shm;
  core::ResourceNames resources;  // front ends off by default (tessera-node --gpushare, --hami)
};

inline constexpr const char* kLibraryContainerPath = "/usr/local/lib/tessera/libtessera-cuda.so";
inline constexpr const char* kPreloadContainerPath = "/etc/ld.so.preload";
inline constexpr const char* kRegionContainerPath = "/var/run/tessera/region";
inline constexpr const char* kBoardContainerPath = "/var/run/tessera/boards";

// The host folder of the busy boards: paths.board_dir_host, else
// <region root>/boards (which the region clean-up leaves alone: not a pod uid).
std::string BoardHostDir(const MountPaths& paths);

// Creates the host folder of the busy boards (mode 0755: containers cannot
// add files to it) and the board of each GPU in `uuids` (<uuid>.board, mode
// 0666), so that a container's library finds its GPUs' boards made by the
// node agent, not by a neighbour. Existing boards are left as they are.
Status PrepareBoards(const std::string& dir, const std::vector<std::string>& uuids);

struct MountSpec {
  std::string container_path, host_path;
  bool read_only = true;
  bool operator==(const MountSpec&) const = default;
};

struct ContainerEnv {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  std::string region_host_dir;  // the node agent creates it; "" for an unenforced container (none)
};

// Env and mounts for `container` of `pod`. GPU i of the container (in
// assignment order) gets TESSERA_GPU_UUID_i, TESSERA_GPU_MEM_LIMIT_MIB_i
// (the share's MiB, or the whole card when the share names none) and
// TESSERA_GPU_CORE_PERCENT_i; TESSERA_GPU_BOARD_DIR names the busy boards
// folder (mounted read-write from BoardHostDir(paths), the last mount);
// TESSERA_GPU_MEM_FRACTION is the smallest
// limit/card ratio, with 4 decimals. On top of these, a container written
// for an enabled front end (the front_end of its spec in pod.specs, as the
// pod was decoded: with the node agent's resource names, paths.resources,
// which the Allocator's pod cache decodes with) gets what that project's own
// device plugin would give:
//   gpushare: ALIYUN_COM_GPU_MEM_IDX (GPU index), ALIYUN_COM_GPU_MEM_DEV (the
//     GPU's memory, whole GiB), ALIYUN_COM_GPU_MEM_CONTAINER (its GiB) and
//     ALIYUN_COM_GPU_MEM_POD (the sum over the pod's containers);
//   HAMi: CUDA_DEVICE_MEMORY_LIMIT_i ("<MiB>m") and CUDA_DEVICE_SM_LIMIT
//     (percent; 0 when the share names no compute, HAMi's "no limit").
// A container of an MPS pod (tessera.io/isolation: mps; one GPU) gets
// MpsEnv's variables, its GPU's pipe folder mounted read-write at
// kMpsPipeContainerPath and paths.mps_shm at kMpsShmContainerPath (in place
// of the pod's own /dev/shm, which the runtime then does not mount: MPS's
// client and server share memory there); MPS's thread percentage is its compute limit, so
// TESSERA_GPU_CORE_PERCENT_0 is "100" (the launch gate stands aside rather
// than cut the share twice) and no core policy is set, while the memory
// limit stays with the interception library as for any pod. A container of
// a pod with tessera.io/isolation: none (which the extender admits only in
// the namespaces its configuration names) gets its GPUs, the TESSERA_GPU_*
// numbers of its share, TESSERA_POD, TESSERA_CONTAINER and its front end's
// variables, and nothing that enforces them: no mount, no region
// (region_host_dir is empty), no board or core policy variable.
// INVALID_ARGUMENT when a GPU of the share is not in `inventory` or its
// memory is unknown. FAILED_PRECONDITION, naming the GPU and why, when an MPS
// pod's GPU runs no MPS daemon: paths.mps_root is empty (MPS is off on this
// node) or the GPU's `mps` flag in `inventory` is false (its daemon is not
// running).
Result<ContainerEnv> BuildContainerEnv(const PendingPod& pod, const PendingContainer& container,
                                       const std::vector<core::GpuInfo>& inventory, const MountPaths& paths);

// "30" for 300 core milli, "12.5" for 125.
std::string CorePercent(int64_t core_milli);

}  // namespace tessera::node
