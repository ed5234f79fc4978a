// The one function behind every memory query the container can make
// (cuMemGetInfo, cuDeviceTotalMem, nvmlDeviceGetMemoryInfo): what the share
// looks like, given its limit and usage and what the GPU reports. Pure.
//
//   MemView v = VirtualMemInfo(limit, used, phys_free, phys_total, TotalView::kShare);
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessera::cuda {

struct MemView {
  uint64_t free;
  uint64_t total;
  uint64_t used;  // total - free
};

// How the share's total memory is shown (TESSERA_GPU_MEM_VIEW).
enum class TotalView {
  kShare,   // total = the limit: a framework sizing itself from the total fits the share
  kDevice,  // total = the card's: code that applies a fraction of the card to
            // the total (gpushare's ALIYUN_COM_GPU_MEM_CONTAINER / _DEV)
            // gets its share, as under gpushare
};

// cap = min(limit, physical total) (physical when limit == 0);
// free = min(cap - used, physical free), saturating at 0;
// total = cap, or the physical total with TotalView::kDevice; never fails.
constexpr MemView VirtualMemInfo(uint64_t limit, uint64_t used, uint64_t phys_free, uint64_t phys_total,
                                 TotalView view = TotalView::kShare) {
  const uint64_t cap = limit == 0 ? phys_total : std::min(limit, phys_total);
  const uint64_t room = used >= cap ? 0 : cap - used;
  const uint64_t free = std::min(room, phys_free);
  const uint64_t total = view == TotalView::kDevice ? phys_total : cap;
  return MemView{free, total, total - std::min(free, total)};
}

}  // namespace tessera::cuda
