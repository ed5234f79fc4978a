#include "node/handout.h"

#include <map>
#include <set>

#include "core/codec.h"

namespace tessera::node {
namespace {

// The pod's assignment, or why it has none the agent can read.
Result<core::Assignment> AssignmentOf(const core::PodView& pod) {
  if (!pod.assignment.has_value()) return InvalidArgument("no readable assignment annotation");
  return core::DecodeAssignment(*pod.assignment);
}

std::string Percent(int64_t core_milli) {
  const int64_t whole = core_milli / 10, tenth = core_milli % 10;
  return std::to_string(whole) + (tenth != 0 ? "." + std::to_string(tenth) : "") + " percent";
}

std::string ShareText(int64_t mem_mib, int64_t core_milli) {
  return std::to_string(mem_mib) + " MiB and " + Percent(core_milli);
}

// Part 2: the first container of `pod` whose spec sets a reserved variable,
// as "container \"c\" sets NAME", or "" when none does.
std::string ReservedVariableSetBy(const core::PodView& pod) {
  for (const core::PodView::EnvVar& e : pod.spec_env) {
    if (IsReservedVariable(e.name)) return "container \"" + e.container + "\" sets " + e.name;
  }
  return "";
}

}  // namespace

bool IsReservedVariable(std::string_view name) {
  for (std::string_view exact : {"NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_SM_LIMIT"}) {
    if (name == exact) return true;
  }
  if (name == "TESSERA_LOG_LEVEL") return false;
  for (std::string_view prefix : {"TESSERA_", "ALIYUN_COM_GPU_MEM_", "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_MPS_"}) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

Status CheckHandOut(const core::PodView& pod, const std::vector<core::GpuInfo>& gpus) {
  const std::string& key = pod.key;
  const std::string refused = "pod " + key + ": its tessera.io/assignment is not handed out: ";
  Result<core::Assignment> assignment = AssignmentOf(pod);
  if (!assignment.ok()) return PermissionDenied(refused + assignment.status().message());
  const Result<core::PodRequest>& request = pod.request;
  if (!request.ok()) {
    return PermissionDenied(refused + "the pod's own GPU request is unreadable (" + request.status().message() +
                            "), so no assignment can match it");
  }
  if (const std::string set = ReservedVariableSetBy(pod); !set.empty()) {
    return PermissionDenied("pod " + key + ": no GPU share is handed out: its " + set +
                            " in its spec, a variable only tessera-node may give a sharing container; remove it (it could "
                            "override or switch off the share's limits)");
  }
  std::map<std::string, const core::ContainerRequest*> asked;
  for (const core::ContainerRequest& c : request->containers) asked[c.name] = &c;

  // 1. What the pod asks for.
  for (const core::ContainerAssignment& c : assignment->containers) {
    if (c.gpus.empty()) continue;
    const std::string where = "container \"" + c.name + "\" ";
    auto it = asked.find(c.name);
    if (it == asked.end() || it->second->gpu_count == 0) {
      return PermissionDenied(refused + where + "is given " + std::to_string(c.gpus.size()) +
                              " GPU(s) but asks for none");
    }
    const core::ContainerRequest& req = *it->second;
    if (static_cast<int>(c.gpus.size()) != req.gpu_count) {
      return PermissionDenied(refused + where + "is given " + std::to_string(c.gpus.size()) + " GPU(s), asks for " +
                              std::to_string(req.gpu_count));
    }
    std::set<int> seen;
    for (const core::GpuShare& s : c.gpus) {
      const std::string gpu = "GPU " + std::to_string(s.index);
      if (s.index < 0 || static_cast<size_t>(s.index) >= gpus.size()) {
        return PermissionDenied(refused + where + "is given " + gpu + ", which this node does not have (" +
                                std::to_string(gpus.size()) + " GPUs)");
      }
      const core::GpuInfo& info = gpus[static_cast<size_t>(s.index)];
      if (!s.uuid.empty() && s.uuid != info.uuid) {
        return PermissionDenied(refused + where + "is given " + gpu + " as " + s.uuid + ", but " + gpu + " is " +
                                info.uuid);
      }
      if (!seen.insert(s.index).second) return PermissionDenied(refused + where + "is given " + gpu + " twice");
      const int64_t mem_asked = core::ShareMemMiB(req, info);
      if ((s.mem_mib != req.mem_mib_per_gpu && s.mem_mib != mem_asked) || s.core_milli != req.core_milli_per_gpu) {
        return PermissionDenied(refused + where + "is given " + ShareText(s.mem_mib, s.core_milli) + " of " + gpu +
                                ", but asks for " + ShareText(mem_asked, req.core_milli_per_gpu));
      }
      if (!req.models.Allows(info.model)) {
        return PermissionDenied(refused + where + "is given " + gpu + ", a " + info.model +
                                ", a model its request does not allow");
      }
    }
  }
  return Status::Ok();
}

}  // namespace tessera::node
