// `kubectl tessera inspect pod NAME`: one pod's GPU assignment per container
// and GPU, its node, whether the node agent has answered each container's
// Allocate (tessera.io/allocated), and the Events that explain trouble.
// Pure; thread-safe.
//
//   PodDetail d = BuildPodDetail(pod, node_or_null, events["items"]);
//   std::cout << RenderPodDetail(d, options, std::chrono::system_clock::now());
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/podspec.h"
#include "core/timestamp.h"
#include "kubectl/format.h"

namespace tessera::kubectl {

// Pod annotation the node agent writes: containers whose Allocate it answered ("a,b").
inline constexpr std::string_view kAllocatedAnnotation = "tessera.io/allocated";
// Event reasons shown by inspect pod: the node agent's, and kube-scheduler's
// FailedScheduling (which carries the extender's reason) while unbound.
inline constexpr std::string_view kAllocateFailedReason = "TesseraAllocateFailed";
inline constexpr std::string_view kAssignmentRefusedReason = "TesseraAssignmentRefused";
inline constexpr std::string_view kMismatchReason = "TesseraAllocationMismatch";
inline constexpr std::string_view kFailedSchedulingReason = "FailedScheduling";

struct EventView {
  std::string type, reason, message;
  int count = 1;
  std::optional<core::WallTime> last;  // lastTimestamp, eventTime or creation
};

struct PodDetail {
  std::string ns, name, node, phase;
  bool terminating = false;
  bool wants_gpu = false;                 // asks for Tessera resources
  std::string assigned_at;                // tessera.io/assigned-at; "" when absent
  std::string isolation = "hook";         // tessera.io/isolation as written; "hook" when absent
  std::optional<core::Assignment> assignment;
  std::string assignment_error;           // the annotation is present but unusable
  std::optional<std::vector<std::string>> allocated;  // absent: no tessera.io/allocated
  std::vector<core::GpuInfo> node_gpus;   // the node's inventory, when known
  std::vector<EventView> events;          // the reasons above, oldest first
};

// `node`: the pod's Node object, or nullptr; `events`: items of the pod's
// Events (any reason; the ones shown are picked here).
PodDetail BuildPodDetail(const nlohmann::json& pod, const nlohmann::json* node, const nlohmann::json& events,
                         const core::ResourceNames& names = {});

std::string RenderPodDetail(const PodDetail& pod, const ViewOptions& options, core::WallTime now);
nlohmann::ordered_json PodDetailToJson(const PodDetail& pod);

// "45s", "12m", "3h", "5d"; "-" for a time in the future.
std::string FormatAge(core::WallTime then, core::WallTime now);

}  // namespace tessera::kubectl
