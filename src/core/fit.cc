// The shared filter and GPU picking rules (policy.h).
#include <algorithm>

#include "core/policy.h"

namespace tessera::core {

std::string_view FitFailureName(FitFailure f) {
  switch (f) {
    case FitFailure::kNone: return "fits";
    case FitFailure::kCpu: return "not enough CPU";
    case FitFailure::kMemory: return "not enough memory";
    case FitFailure::kGpuModel: return "GPU model not allowed";
    case FitFailure::kGpuMps: return "no GPU runs MPS (tessera.io/isolation: mps needs tessera-node --mps)";
    case FitFailure::kGpuCount: return "not enough free GPUs";
    case FitFailure::kGpuShare: return "no GPU with enough free share";
    case FitFailure::kGpuMemory: return "no GPU with enough free GPU memory";
  }
  return "unknown";
}

GpuLeft FreeCore(const NodeState& node) {
  GpuLeft out;
  out.n = std::min<int>(static_cast<int>(node.gpus.size()), static_cast<int>(out.left.size()));
  for (int i = 0; i < out.n; ++i) out.left[i] = node.info.gpus[i].healthy ? node.GpuCoreFree(i) : 0;
  return out;
}

namespace {

// Picks for all containers; reports the first reason it failed.
FitFailure Pick(const PodRequest& pod, const NodeState& node, GpuSelect mode, Rng* rng, GpuPick* out) {
  const int n = std::min<int>(static_cast<int>(node.gpus.size()), 64);
  std::array<int64_t, 64> core{}, mem{};
  std::array<int, 64> slots{};  // containers that may still join each GPU
  for (int i = 0; i < n; ++i) {
    const bool ok = node.info.gpus[i].healthy;
    core[i] = ok ? node.GpuCoreFree(i) : 0;
    mem[i] = ok ? node.GpuMemFree(i) : 0;
    slots[i] = ok ? node.SharerSlotsFree(i) : 0;
  }
  GpuPick pick;
  for (const ContainerRequest& c : pod.containers) {
    if (c.gpu_count == 0) continue;
    if (pick.count + c.gpu_count > kMaxPodGpus) return FitFailure::kGpuCount;
    const bool needs_mps = pod.isolation == Isolation::kMps;
    auto usable = [&](int i) {
      return node.info.gpus[i].healthy && c.models.Allows(node.info.gpus[i].model) &&
             (!needs_mps || node.info.gpus[i].mps);
    };
    const bool whole = c.core_milli_per_gpu >= kCoreMilliPerGpu;
    const int first = pick.count;
    auto taken = [&](int i) {
      for (int k = first; k < pick.count; ++k)
        if (pick.index[k] == i) return true;
      return false;
    };
    FitFailure why = FitFailure::kGpuModel;
    for (int need = c.gpu_count; need > 0; --need) {
      int chosen = -1;
      int fitting = 0;
      for (int i = 0; i < n; ++i) {
        if (!usable(i) || taken(i)) {
          // A GPU of an allowed model that only lacks MPS: say that, not "model".
          if (why == FitFailure::kGpuModel && needs_mps && node.info.gpus[i].healthy && !node.info.gpus[i].mps &&
              c.models.Allows(node.info.gpus[i].model)) {
            why = FitFailure::kGpuMps;
          }
          continue;
        }
        if (why == FitFailure::kGpuModel || why == FitFailure::kGpuMps) {
          why = whole ? FitFailure::kGpuCount : FitFailure::kGpuShare;
        }
        const bool core_ok = whole ? core[i] == kCoreMilliPerGpu : core[i] >= c.core_milli_per_gpu;
        if (!core_ok || slots[i] < 1) continue;
        // A whole GPU asked without a size takes all of its memory (ShareMemMiB).
        const int64_t need_mem = ShareMemMiB(c, node.info.gpus[i]);
        if (need_mem > 0 && mem[i] < need_mem) {
          why = FitFailure::kGpuMemory;
          continue;
        }
        if (whole) { chosen = i; break; }  // lowest-index fully free GPU
        if (mode == GpuSelect::kRandom) {
          // Reservoir sampling: uniform over the fitting GPUs.
          if (rng->Below(static_cast<uint64_t>(++fitting)) == 0) chosen = i;
        } else if (chosen < 0 || core[i] < core[chosen] ||
                   (core[i] == core[chosen] && mem[i] < mem[chosen])) {
          chosen = i;
        }
      }
      if (chosen < 0) return why;
      core[chosen] -= c.core_milli_per_gpu;
      mem[chosen] -= ShareMemMiB(c, node.info.gpus[chosen]);
      --slots[chosen];
      pick.Add(chosen);
    }
  }
  if (out) *out = pick;
  return FitFailure::kNone;
}

}  // namespace

bool PickGpus(const PodRequest& pod, const NodeState& node, GpuSelect mode, Rng* rng, GpuPick* out) {
  return Pick(pod, node, mode, rng, out) == FitFailure::kNone;
}

bool IsSingleShare(const PodRequest& pod) {
  return pod.containers.size() == 1 && pod.containers[0].gpu_count == 1 &&
         pod.containers[0].core_milli_per_gpu < kCoreMilliPerGpu;
}

std::vector<GpuPick> ShareCandidates(const PodRequest& pod, const NodeState& node) {
  std::vector<GpuPick> out;
  if (!IsSingleShare(pod)) return out;
  const ContainerRequest& c = pod.containers[0];
  for (int i = 0; i < static_cast<int>(node.gpus.size()); ++i) {
    if (!node.info.gpus[i].healthy || !c.models.Allows(node.info.gpus[i].model)) continue;
    if (node.GpuCoreFree(i) < c.core_milli_per_gpu || node.SharerSlotsFree(i) < 1) continue;
    if (c.mem_mib_per_gpu > 0 && node.GpuMemFree(i) < c.mem_mib_per_gpu) continue;
    GpuPick pick;
    pick.Add(i);
    out.push_back(pick);
  }
  return out;
}

FitFailure FitsNode(const PodRequest& pod, const NodeState& node) {
  if (pod.cpu_milli > node.CpuFree()) return FitFailure::kCpu;
  if (pod.memory_mib > node.MemFree()) return FitFailure::kMemory;
  if (!pod.UsesGpu()) return FitFailure::kNone;
  return Pick(pod, node, GpuSelect::kBestFit, nullptr, nullptr);
}

}  // namespace tessera::core
