#include "node/container_env.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "node/mps.h"
#include "region/board.h"

namespace tessera::node {

std::string CorePercent(int64_t core_milli) {
  std::string out = std::to_string(core_milli / 10);
  if (core_milli % 10 != 0) out += "." + std::to_string(core_milli % 10);
  return out;
}

namespace {

constexpr int64_t kMiBPerGiB = 1024;

// What gpushare's or HAMi's device plugin would have set, for a container
// written in their names (as decoded into pod.specs). `names` only names
// the resources in messages. Precondition: every GPU of `container` is in
// `inventory` (BuildContainerEnv checked).
Status AddFrontEndEnv(const PendingPod& pod, const PendingContainer& container,
                      const std::vector<core::GpuInfo>& inventory, const core::ResourceNames& names,
                      std::map<std::string, std::string>& envs) {
  const auto spec = pod.specs.find(container.name);
  if (spec == pod.specs.end()) return Status::Ok();
  auto gpu_of = [&](const core::GpuShare& share) {
    return *std::find_if(inventory.begin(), inventory.end(),
                         [&](const core::GpuInfo& g) { return g.uuid == share.uuid; });
  };
  switch (spec->second.front_end) {
    case core::FrontEnd::kGpushare: {
      if (container.gpus.size() != 1) {
        return InvalidArgument(pod.Key() + " container " + container.name + " asks with " + names.gpushare.mem +
                               " but is assigned " + std::to_string(container.gpus.size()) +
                               " GPUs; gpushare gives one");
      }
      int64_t pod_gib = 0;
      for (const auto& [name, c] : pod.specs) {
        if (c.front_end == core::FrontEnd::kGpushare) pod_gib += c.gpushare_gib;
      }
      const core::GpuInfo gpu = gpu_of(container.gpus[0]);
      envs["ALIYUN_COM_GPU_MEM_IDX"] = std::to_string(gpu.index);
      envs["ALIYUN_COM_GPU_MEM_DEV"] = std::to_string(gpu.memory_mib / kMiBPerGiB);
      envs["ALIYUN_COM_GPU_MEM_CONTAINER"] = std::to_string(spec->second.gpushare_gib);
      envs["ALIYUN_COM_GPU_MEM_POD"] = std::to_string(pod_gib);
      // Code written for gpushare applies CONTAINER / DEV to the total the
      // driver reports: show it the card's total, as gpushare did, so that
      // fraction is its share (the limit is enforced either way).
      envs["TESSERA_GPU_MEM_VIEW"] = "device";
      break;
    }
    case core::FrontEnd::kHami: {
      for (size_t i = 0; i < container.gpus.size(); ++i) {
        // The same limit as TESSERA_GPU_MEM_LIMIT_MIB_i, in HAMi-core's unit syntax.
        envs["CUDA_DEVICE_MEMORY_LIMIT_" + std::to_string(i)] = envs["TESSERA_GPU_MEM_LIMIT_MIB_" + std::to_string(i)] + "m";
      }
      envs["CUDA_DEVICE_SM_LIMIT"] = std::to_string(container.gpus[0].core_milli / 10);
      break;
    }
    case core::FrontEnd::kTessera:
    case core::FrontEnd::kNone:
      break;
  }
  return Status::Ok();
}

// MPS's limits for a container of an MPS pod, its GPU's pipe folder and the
// daemons' /dev/shm.
// Precondition: every GPU of `container` is in `inventory`.
Status AddMps(const PendingPod& pod, const PendingContainer& container, const std::vector<core::GpuInfo>& inventory,
              const MountPaths& paths, ContainerEnv& out) {
  const std::string who = pod.Key() + " container " + container.name + " asks for tessera.io/isolation: mps";
  if (container.gpus.size() != 1) {
    return InvalidArgument(who + " with " + std::to_string(container.gpus.size()) +
                           " GPUs; MPS gives a container one GPU");
  }
  const core::GpuShare& share = container.gpus[0];
  if (paths.mps_root.empty()) {
    return FailedPrecondition(who + ", but tessera-node on this node runs no MPS (--mps=off, or --mps=auto found "
                              "no control program), so GPU " + share.uuid + " cannot be shared through MPS here");
  }
  const auto gpu = std::find_if(inventory.begin(), inventory.end(),
                                [&](const core::GpuInfo& g) { return g.uuid == share.uuid; });
  if (!gpu->mps) {
    return FailedPrecondition(who + ", but the MPS control daemon of GPU " + share.uuid +
                              " is not running (it exited and has not been started again; see tessera-node's log "
                              "and " + paths.mps_root + "/" + share.uuid + "/log)");
  }
  for (const auto& [name, value] : MpsEnv(share)) out.envs[name] = value;
  // MPS's thread percentage limits the container's compute; the launch gate must not cut it again.
  out.envs["TESSERA_GPU_CORE_PERCENT_0"] = "100";
  out.envs.erase("TESSERA_GPU_CORE_POLICY");
  out.mounts.push_back({kMpsPipeContainerPath, MpsPipeDir(paths.mps_root, share.uuid), false});
  if (!paths.mps_shm.empty()) out.mounts.push_back({kMpsShmContainerPath, paths.mps_shm, false});
  return Status::Ok();
}

}  // namespace

Result<ContainerEnv> BuildContainerEnv(const PendingPod& pod, const PendingContainer& container,
                                       const std::vector<core::GpuInfo>& inventory, const MountPaths& paths) {
  if (container.gpus.empty()) return InvalidArgument(pod.Key() + " container " + container.name + " has no GPU");
  ContainerEnv out;
  std::string visible;
  double fraction = 1.0;
  for (size_t i = 0; i < container.gpus.size(); ++i) {
    const core::GpuShare& share = container.gpus[i];
    auto gpu = std::find_if(inventory.begin(), inventory.end(),
                            [&](const core::GpuInfo& g) { return g.uuid == share.uuid; });
    if (gpu == inventory.end()) {
      return InvalidArgument(pod.Key() + " container " + container.name + " is assigned GPU " + share.uuid +
                             ", which this node does not have");
    }
    if (gpu->memory_mib <= 0) return InvalidArgument("GPU " + share.uuid + " reports no memory size");
    const int64_t limit = share.mem_mib > 0 ? std::min(share.mem_mib, gpu->memory_mib) : gpu->memory_mib;
    const std::string n = std::to_string(i);
    out.envs["TESSERA_GPU_UUID_" + n] = share.uuid;
    out.envs["TESSERA_GPU_MEM_LIMIT_MIB_" + n] = std::to_string(limit);
    out.envs["TESSERA_GPU_CORE_PERCENT_" + n] = CorePercent(share.core_milli);
    fraction = std::min(fraction, static_cast<double>(limit) / static_cast<double>(gpu->memory_mib));
    visible += (visible.empty() ? "" : ",") + share.uuid;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", fraction);
  out.envs["NVIDIA_VISIBLE_DEVICES"] = visible;
  out.envs["TESSERA_GPU_COUNT"] = std::to_string(container.gpus.size());
  out.envs["TESSERA_GPU_MEM_FRACTION"] = buf;
  out.envs["TESSERA_POD"] = pod.Key();
  out.envs["TESSERA_CONTAINER"] = container.name;
  TESSERA_RETURN_IF_ERROR(AddFrontEndEnv(pod, container, inventory, paths.resources, out.envs));
  // Unenforced: its GPUs and, for its own use, the share's numbers; no
  // library, so nothing that only the library reads and no mount.
  if (pod.isolation == core::Isolation::kNone) return out;
  out.envs["TESSERA_REGION_DIR"] = kRegionContainerPath;
  out.envs["TESSERA_GPU_BOARD_DIR"] = kBoardContainerPath;
  if (pod.core_hard) out.envs["TESSERA_GPU_CORE_POLICY"] = "hard";

  out.region_host_dir = paths.region_root_host + "/" + pod.uid + "/" + container.name;
  out.mounts = {{kLibraryContainerPath, paths.library_host, true},
                {kPreloadContainerPath, paths.preload_host, true},
                {kRegionContainerPath, out.region_host_dir, false}};
  if (pod.isolation == core::Isolation::kMps) TESSERA_RETURN_IF_ERROR(AddMps(pod, container, inventory, paths, out));
  out.mounts.push_back({kBoardContainerPath, BoardHostDir(paths), false});
  return out;
}

std::string BoardHostDir(const MountPaths& paths) {
  return paths.board_dir_host.empty() ? paths.region_root_host + "/boards" : paths.board_dir_host;
}

Status PrepareBoards(const std::string& dir, const std::vector<std::string>& uuids) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("creating the busy boards' folder " + dir + ": " + ec.message());
  std::filesystem::permissions(dir, std::filesystem::perms(0755), ec);
  if (ec) return Internal("setting the mode of " + dir + ": " + ec.message());
  for (const std::string& uuid : uuids) {
    if (uuid.empty() || uuid.find('/') != std::string::npos || uuid[0] == '.') {
      return InvalidArgument("GPU uuid \"" + uuid + "\" cannot name a board file");
    }
    TESSERA_RETURN_IF_ERROR(region::CreateBoardFile(dir + "/" + uuid + ".board"));
  }
  return Status::Ok();
}

}  // namespace tessera::node
