#include "node/handout.h"

#include <map>
#include <set>

#include "core/codec.h"
#include "node/identify.h"

namespace tessera::node {
namespace {

// What one GPU has handed out.
struct Booked {
  int64_t mem_mib = 0;
  int64_t core_milli = 0;
  int sharers = 0;
};

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

// Part 2's tally: the shares of every other handed-out pod of `node`, per GPU index.
std::map<int, Booked> HandedOut(const PodViews& node_pods, const std::string& node, const std::string& uid) {
  std::map<int, Booked> booked;
  for (const auto& p : node_pods) {
    if (p->node != node || p->uid == uid) continue;
    if (p->terminal() || AllocatedContainers(*p).empty()) continue;
    Result<core::Assignment> a = AssignmentOf(*p);
    if (!a.ok() || a->node != node) continue;  // never handed out by this agent
    for (const core::ContainerAssignment& c : a->containers) {
      for (const core::GpuShare& s : c.gpus) {
        Booked& b = booked[s.index];
        b.mem_mib += s.mem_mib;
        b.core_milli += s.core_milli;
        b.sharers += 1;
      }
    }
  }
  return booked;
}

// Part 3: the first container of `pod` whose spec sets a reserved variable,
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

Status CheckHandOut(const core::PodView& pod, const PodViews& node_pods, const std::string& node,
                    const std::vector<core::GpuInfo>& gpus) {
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
  std::map<int, Booked> adding;
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
      Booked& b = adding[s.index];
      b.mem_mib += s.mem_mib;
      b.core_milli += s.core_milli;
      b.sharers += 1;
    }
  }

  // 2. What the node has not handed out yet.
  const std::map<int, Booked> booked = HandedOut(node_pods, node, pod.uid);
  for (const auto& [index, add] : adding) {
    const core::GpuInfo& info = gpus[static_cast<size_t>(index)];
    auto it = booked.find(index);
    const Booked held = it != booked.end() ? it->second : Booked{};
    const std::string gpu = "GPU " + std::to_string(index) + " (" + info.uuid + ")";
    const std::string already = " already handed to " + std::to_string(held.sharers) + " container(s)";
    if (held.core_milli + add.core_milli > core::kCoreMilliPerGpu) {
      return PermissionDenied(refused + "it wants " + Percent(add.core_milli) + " of " + gpu + "'s compute, " +
                              Percent(held.core_milli) + " of it" + already + ": together over 100 percent");
    }
    if (info.memory_mib > 0 && held.mem_mib + add.mem_mib > info.memory_mib) {
      return PermissionDenied(refused + "it wants " + std::to_string(add.mem_mib) + " MiB of " + gpu + ", " +
                              std::to_string(held.mem_mib) + " MiB of its " + std::to_string(info.memory_mib) +
                              " MiB" + already);
    }
    if (info.max_sharers > 0 && held.sharers + add.sharers > info.max_sharers) {
      return PermissionDenied(refused + gpu + " is" + already + ", its limit is " +
                              std::to_string(info.max_sharers) + " at once");
    }
  }
  return Status::Ok();
}

}  // namespace tessera::node
