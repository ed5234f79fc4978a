#include "node/slots.h"

#include <cctype>

namespace tessera::node {

std::string SlotId(std::string_view uuid, int k) { return std::string(uuid) + "-" + std::to_string(k); }

Result<std::string> SlotGpu(std::string_view id) {
  const size_t dash = id.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) {
    return InvalidArgument("device ID \"" + std::string(id) + "\" is not <gpu-uuid>-<slot>");
  }
  for (size_t i = dash + 1; i < id.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(id[i]))) {
      return InvalidArgument("device ID \"" + std::string(id) + "\" does not end in a slot number");
    }
  }
  return std::string(id.substr(0, dash));
}

Result<std::vector<Slot>> SlotsFor(const std::vector<core::GpuInfo>& gpus, int slots_per_gpu) {
  if (slots_per_gpu < 1 || slots_per_gpu > 1000) {
    return InvalidArgument("slotsPerGpu must be in 1..1000, got " + std::to_string(slots_per_gpu));
  }
  std::vector<Slot> slots;
  slots.reserve(gpus.size() * static_cast<size_t>(slots_per_gpu));
  for (const auto& gpu : gpus) {
    if (gpu.uuid.empty()) return InvalidArgument("GPU " + std::to_string(gpu.index) + " has no uuid");
    for (int k = 0; k < slots_per_gpu; ++k) {
      Slot s{SlotId(gpu.uuid, k), gpu.uuid, k, gpu.numa_node, gpu.healthy};
      if (s.id.size() > kMaxDeviceIdLength) {
        return InvalidArgument("device ID \"" + s.id + "\" is longer than 63 characters");
      }
      slots.push_back(std::move(s));
    }
  }
  return slots;
}

}  // namespace tessera::node
