#include "nvml/xid.h"

#include <nvml.h>

#include <algorithm>
#include <array>

namespace tessera::nvml {
namespace {

// Facts from NVIDIA's XID catalogue: each of these needs a GPU reset (or a
// node reboot) before the GPU serves work again.
constexpr std::array<LostXid, 8> kLost = {{
    {48, "double-bit ECC error"},
    {62, "internal micro-controller halt"},
    {64, "ECC page retirement or row remapping failed"},
    {74, "NVLink error"},
    {79, "GPU has fallen off the bus"},
    {95, "uncontained ECC error"},
    {119, "GSP RPC timeout"},
    {120, "GSP error"},
}};

}  // namespace

std::span<const LostXid> GpuLostXids() { return kLost; }

bool IsGpuLostXid(uint64_t xid) {
  return std::any_of(kLost.begin(), kLost.end(), [&](const LostXid& l) { return l.xid == xid; });
}

std::string_view XidReason(uint64_t xid) {
  for (const LostXid& l : kLost) {
    if (l.xid == xid) return l.reason;
  }
  return "application or recoverable error";
}

std::optional<std::string> LostReason(unsigned long long event_type, unsigned long long event_data) {
  if (event_type & nvmlEventTypeDoubleBitEccError) return std::string("double-bit ECC error");
  if ((event_type & nvmlEventTypeXidCriticalError) && IsGpuLostXid(event_data)) {
    return "XID " + std::to_string(event_data) + " (" + std::string(XidReason(event_data)) + ")";
  }
  return std::nullopt;
}

}  // namespace tessera::nvml
