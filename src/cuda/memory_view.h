// The one function behind every memory query the container can make
// (cuMemGetInfo, cuDeviceTotalMem, nvmlDeviceGetMemoryInfo): what the share
// looks like, given its limit and usage and what the GPU reports. Pure.
//
//   MemView v = VirtualMemInfo(limit, used, phys_free, phys_total);
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessera::cuda {

struct MemView {
  uint64_t free;
  uint64_t total;
  uint64_t used;  // total - free
};

// total = min(limit, physical total) (physical when limit == 0);
// free = min(total - used, physical free), saturating at 0; never fails.
constexpr MemView VirtualMemInfo(uint64_t limit, uint64_t used, uint64_t phys_free,
                                 uint64_t phys_total) {
  const uint64_t total = limit == 0 ? phys_total : std::min(limit, phys_total);
  const uint64_t room = used >= total ? 0 : total - used;
  const uint64_t free = std::min(room, phys_free);
  return MemView{free, total, total - free};
}

}  // namespace tessera::cuda
