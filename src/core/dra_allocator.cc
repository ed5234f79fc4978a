// The model of kube-scheduler's DRA allocator (dra_allocator.h).
#include "core/dra_allocator.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace tessera::core {

std::string_view SliceOrderName(SliceOrder order) {
  switch (order) {
    case SliceOrder::kGpuIndex: return "gpu-index";
    case SliceOrder::kLeastFreeFirst: return "least-free-first";
  }
  return "unknown";
}

std::vector<int> SliceDeviceOrder(const NodeState& node, SliceOrder order) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(node.gpus.size()); ++i)
    if (node.info.gpus[i].healthy) out.push_back(i);
  if (order == SliceOrder::kLeastFreeFirst) {
    std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
      return std::tuple(node.GpuCoreFree(a), node.GpuMemFree(a)) < std::tuple(node.GpuCoreFree(b), node.GpuMemFree(b));
    });
  }
  return out;
}

namespace {

// The allocator's search: containers in turn, each container's devices at
// increasing positions of the order, the first position that fits first,
// backtracking when what follows does not fit.
class FirstFit {
 public:
  FirstFit(const PodRequest& pod, const NodeState& node, const std::vector<int>& order)
      : pod_(pod), node_(node), order_(order) {
    const int n = std::min<int>(static_cast<int>(node.gpus.size()), static_cast<int>(core_.size()));
    for (int i = 0; i < n; ++i) {
      core_[i] = node.GpuCoreFree(i);
      mem_[i] = node.GpuMemFree(i);
      slots_[i] = node.SharerSlotsFree(i);
    }
  }

  bool Run(GpuPick* out) {
    if (!Container(0)) return false;
    if (out) *out = pick_;
    return true;
  }

 private:
  bool Container(size_t ci) {
    while (ci < pod_.containers.size() && pod_.containers[ci].gpu_count == 0) ++ci;
    if (ci == pod_.containers.size()) return true;
    if (pick_.count + pod_.containers[ci].gpu_count > kMaxPodGpus) return false;
    return Device(ci, 0, 0);
  }

  bool Device(size_t ci, int k, size_t from) {
    const ContainerRequest& c = pod_.containers[ci];
    if (k == c.gpu_count) return Container(ci + 1);
    for (size_t pos = from; pos < order_.size(); ++pos) {
      const int i = order_[pos];
      if (i < 0 || i >= static_cast<int>(node_.gpus.size()) || i >= static_cast<int>(core_.size())) continue;
      const GpuInfo& gpu = node_.info.gpus[i];
      if (!gpu.healthy || !c.models.Allows(gpu.model)) continue;
      if (pod_.isolation == Isolation::kMps && !gpu.mps) continue;
      const bool whole = c.core_milli_per_gpu >= kCoreMilliPerGpu;
      if (whole ? core_[i] != kCoreMilliPerGpu : core_[i] < c.core_milli_per_gpu) continue;
      const int64_t mem = ShareMemMiB(c, gpu);
      if ((mem > 0 && mem_[i] < mem) || slots_[i] < 1) continue;
      core_[i] -= c.core_milli_per_gpu;
      mem_[i] -= mem;
      --slots_[i];
      pick_.Add(i);
      if (Device(ci, k + 1, pos + 1)) return true;
      --pick_.count;
      ++slots_[i];
      mem_[i] += mem;
      core_[i] += c.core_milli_per_gpu;
    }
    return false;
  }

  const PodRequest& pod_;
  const NodeState& node_;
  const std::vector<int>& order_;
  std::array<int64_t, 64> core_{}, mem_{};
  std::array<int, 64> slots_{};
  GpuPick pick_;
};

}  // namespace

bool AllocatorPick(const PodRequest& pod, const NodeState& node, const std::vector<int>& order, GpuPick* out) {
  return FirstFit(pod, node, order).Run(out);
}

}  // namespace tessera::core
