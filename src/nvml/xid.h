// Which XID errors mean a GPU is lost to its workloads until it is reset, so
// the node agent reports it unhealthy. Application faults (XID 13, 31, 43, 45,
// 68, ...) hurt only the process that caused them and are not counted.
// Pure; thread-safe. The set and its reasons are listed in docs/node-agent.md.
//
//   if (IsGpuLostXid(event.eventData)) MarkUnhealthy(uuid, XidReason(xid));
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tessera::nvml {

struct LostXid {
  uint64_t xid;
  std::string_view reason;  // why it means the GPU is lost, for log lines
};

// The XIDs that mark a GPU unhealthy, ascending.
std::span<const LostXid> GpuLostXids();

// True when `xid` is in GpuLostXids().
bool IsGpuLostXid(uint64_t xid);

// The reason for a lost XID, or "application or recoverable error" otherwise.
std::string_view XidReason(uint64_t xid);

// What one NVML event (nvmlEventData_t's eventType and eventData) means for
// its GPU: "XID 79 (GPU has fallen off the bus)" or "double-bit ECC error"
// when it is lost, nullopt when the event leaves it healthy.
std::optional<std::string> LostReason(unsigned long long event_type, unsigned long long event_data);

}  // namespace tessera::nvml
