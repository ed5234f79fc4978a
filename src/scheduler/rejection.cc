#include "scheduler/rejection.h"

#include <algorithm>
#include <set>

#include "core/codec.h"
#include "core/podspec.h"

namespace tessera::scheduler {
namespace {

using core::ContainerRequest;
using core::FitFailure;
using core::NodeState;
using core::PodRequest;

// Percent of one GPU for core milli: "30", "30.5".
std::string PercentNumber(int64_t milli) {
  std::string out = std::to_string(milli / 10);
  if (milli % 10 != 0) out += "." + std::to_string(milli % 10);
  return out;
}

// In reasons: "30 percent". Never a '%': kube-scheduler passes the reasons
// it gets as the format string of the FailedScheduling Event, so "10% free"
// would reach `kubectl describe` as "10%!f(MISSING)ree".
std::string Percent(int64_t milli) { return PercentNumber(milli) + " percent"; }

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string Join(const std::map<std::string, int64_t, std::less<>>& models) {
  std::string out;
  for (const auto& [m, mem] : models) out += (out.empty() ? "" : ", ") + (m.empty() ? "\"\"" : m);
  return out;
}

// GPUs of `node` that `c` may use at all: allowed model (and healthy, when asked).
std::vector<int> Allowed(const ContainerRequest& c, const NodeState& node, bool healthy_only) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(node.info.gpus.size()); ++i) {
    const auto& g = node.info.gpus[i];
    if (c.models.Allows(g.model) && (!healthy_only || g.healthy)) out.push_back(i);
  }
  return out;
}

bool Whole(const ContainerRequest& c) { return c.core_milli_per_gpu >= core::kCoreMilliPerGpu; }

// A GPU shared by as many containers as its slots allow takes no more
// (NodeState::SharerSlotsFree; whole GPUs need none of the sharers' slots).
bool HasSlot(const ContainerRequest& c, const NodeState& node, int i) {
  return Whole(c) || node.SharerSlotsFree(i) > 0;
}

bool FitsGpu(const ContainerRequest& c, const NodeState& node, int i) {
  if (Whole(c)) return node.gpus[i].core_used_milli == 0 && (c.mem_mib_per_gpu == 0 || node.GpuMemFree(i) >= c.mem_mib_per_gpu);
  return node.GpuCoreFree(i) >= c.core_milli_per_gpu &&
         (c.mem_mib_per_gpu == 0 || node.GpuMemFree(i) >= c.mem_mib_per_gpu);
}

std::string ModelMismatch(const ContainerRequest& c, const NodeState& node) {
  std::set<std::string> present;
  for (const auto& g : node.info.gpus) present.insert(g.model.empty() ? "\"\"" : g.model);
  std::string have = Join(std::vector<std::string>(present.begin(), present.end()), ", ");
  if (!c.models.allowed.empty())
    return "GPU model " + have + " not allowed (wants " + Join(c.models.allowed, "|") + ")";
  return "GPU model " + have + " avoided (" + std::string(core::kModelAvoidAnnotation) + ": " +
         Join(c.models.avoided, "|") + ")";
}

// Why one GPU container does not fit `node` on its own.
Rejection ExplainContainer(const ContainerRequest& c, const NodeState& node, FitFailure why, bool detailed,
                           bool needs_mps) {
  Rejection r;
  if (node.info.gpus.empty()) return {"its " + std::string(core::kInventoryAnnotation) + " lists no GPUs", true};
  const std::vector<int> allowed = Allowed(c, node, /*healthy_only=*/false);
  if (allowed.empty()) return {ModelMismatch(c, node), true};
  std::vector<int> usable = Allowed(c, node, /*healthy_only=*/true);
  if (usable.empty()) return {"its allowed GPUs are unhealthy", true};
  if (needs_mps) {
    std::erase_if(usable, [&](int i) { return !node.info.gpus[i].mps; });
    if (usable.empty()) {
      return {"none of its GPUs runs MPS, which " + std::string(core::kIsolationAnnotation) +
                  ": mps needs (tessera-node --mps on a node with the MPS control daemon)",
              true};
    }
  }
  int64_t largest_mem = 0;
  for (int i : allowed) largest_mem = std::max(largest_mem, node.info.gpus[i].memory_mib);
  r.unresolvable = static_cast<int>(allowed.size()) < c.gpu_count || c.mem_mib_per_gpu > largest_mem;
  int fitting = 0, slotted = 0;
  for (int i : usable) {
    fitting += FitsGpu(c, node, i);
    slotted += FitsGpu(c, node, i) && HasSlot(c, node, i);
  }
  // Enough free share, but every such GPU already has as many containers as
  // it has slots: say that, not "no GPU with the share free".
  if (fitting >= c.gpu_count && slotted < c.gpu_count) {
    int full = -1;
    for (int i : usable)
      if (full < 0 && FitsGpu(c, node, i) && !HasSlot(c, node, i)) full = i;
    r.reason = "no free sharing slot on a GPU with " + DescribeShare(c) +
               " free (each GPU takes at most as many containers as tessera-node's slots per GPU)";
    if (detailed && full >= 0) {
      r.reason += "; GPU " + std::to_string(full) + " (" + node.info.gpus[full].model + ") has " +
                  std::to_string(node.GpuMemFree(full)) + " MiB and " + Percent(node.GpuCoreFree(full)) +
                  " free but all " + std::to_string(node.info.gpus[full].max_sharers) + " slots taken";
    }
    return r;
  }
  if (Whole(c) && why == FitFailure::kGpuCount) {
    r.reason = "needs " + std::to_string(c.gpu_count) + " whole GPU" + (c.gpu_count > 1 ? "s" : "");
    if (detailed) r.reason += ", " + std::to_string(fitting) + " of " + std::to_string(allowed.size()) + " fully free";
    else r.reason += ", not enough fully free";
    return r;
  }
  if (c.gpu_count == 1) r.reason = "no GPU with " + DescribeShare(c) + " free";
  else r.reason = "needs " + std::to_string(c.gpu_count) + " GPUs with " + DescribeShare(c) + " free each";
  if (!detailed) return r;
  if (c.gpu_count > 1) r.reason += ", found " + std::to_string(fitting);
  // The GPU that comes closest: the largest part of the share it could give.
  auto closeness = [&](int i) {
    double part = 1e18;
    if (c.mem_mib_per_gpu > 0)
      part = std::min(part, static_cast<double>(node.GpuMemFree(i)) / static_cast<double>(c.mem_mib_per_gpu));
    if (c.core_milli_per_gpu > 0)
      part = std::min(part, static_cast<double>(node.GpuCoreFree(i)) / static_cast<double>(c.core_milli_per_gpu));
    return part;
  };
  int best = usable[0];
  for (int i : usable)
    if (closeness(i) > closeness(best)) best = i;
  r.reason += "; largest free share is " + std::to_string(node.GpuMemFree(best)) + " MiB and " +
              Percent(node.GpuCoreFree(best)) + " on GPU " + std::to_string(best) + " (" +
              node.info.gpus[best].model + ")";
  if (r.unresolvable && c.mem_mib_per_gpu > largest_mem)
    r.reason += "; its largest GPU has " + std::to_string(largest_mem) + " MiB";
  return r;
}

// The first GPU container that does not fit on its own, explained; or, when
// each fits alone, why they do not fit together.
Rejection ExplainGpus(const PodRequest& pod, const NodeState& node, bool detailed) {
  int gpu_containers = 0;
  for (const auto& c : pod.containers) gpu_containers += c.gpu_count > 0;
  for (const auto& c : pod.containers) {
    if (c.gpu_count == 0) continue;
    PodRequest single;
    single.key = pod.key;
    single.isolation = pod.isolation;
    single.containers = {c};
    const FitFailure f = core::FitsNode(single, node);
    if (f == FitFailure::kNone) continue;
    Rejection r = ExplainContainer(c, node, f, detailed, pod.isolation == core::Isolation::kMps);
    if (gpu_containers > 1) r.reason = "container \"" + c.name + "\": " + r.reason;
    return r;
  }
  std::vector<std::string> shares;
  int whole_needed = 0;
  bool sharing = false;
  for (const auto& c : pod.containers) {
    if (c.gpu_count == 0) continue;
    shares.push_back(c.name + " " + (c.gpu_count > 1 ? std::to_string(c.gpu_count) + "x " : "") + DescribeShare(c));
    if (Whole(c)) whole_needed += c.gpu_count;
    else sharing = true;
  }
  Rejection r{"its containers fit one by one but not together (" + Join(shares, ", ") + ")", false};
  // Whole GPUs are not shared, so the node needs at least this many GPUs.
  r.unresolvable = whole_needed + (sharing ? 1 : 0) > static_cast<int>(node.info.gpus.size());
  return r;
}

}  // namespace

Rejection ExplainMisfit(const PodRequest& pod, const NodeState& node, FitFailure why, bool detailed) {
  Rejection r;
  switch (why) {
    case FitFailure::kNone:
      r.reason = "fits";
      break;
    case FitFailure::kCpu:
      r.reason = "not enough CPU for " + std::to_string(pod.cpu_milli) + "m";
      if (detailed)
        r.reason += " (" + std::to_string(node.CpuFree()) + "m of " + std::to_string(node.info.cpu_milli) +
                    "m left after GPU pods)";
      r.unresolvable = pod.cpu_milli > node.info.cpu_milli;
      break;
    case FitFailure::kMemory:
      r.reason = "not enough memory for " + std::to_string(pod.memory_mib) + " MiB";
      if (detailed)
        r.reason += " (" + std::to_string(node.MemFree()) + " of " + std::to_string(node.info.memory_mib) +
                    " MiB left after GPU pods)";
      r.unresolvable = pod.memory_mib > node.info.memory_mib;
      break;
    default:
      r = ExplainGpus(pod, node, detailed);
      break;
  }
  if (detailed) r.reason = "node " + node.info.name + ": " + r.reason;
  return r;
}

std::string ClusterWideProblem(const PodRequest& pod, const std::map<std::string, int64_t, std::less<>>& models) {
  if (models.empty()) return "";
  for (const auto& c : pod.containers) {
    if (c.gpu_count == 0) continue;
    int64_t largest = -1;
    for (const auto& [model, mem] : models)
      if (c.models.Allows(model)) largest = std::max(largest, mem);
    if (largest < 0) {
      if (!c.models.allowed.empty())
        return "GPU model " + Join(c.models.allowed, "|") + " (" + std::string(core::kModelAnnotation) +
               ") is not on any node in the cluster; its GPU models are " + Join(models);
      return "every GPU model in the cluster is avoided (" + std::string(core::kModelAvoidAnnotation) + ": " +
             Join(c.models.avoided, "|") + "); its GPU models are " + Join(models);
    }
    if (c.mem_mib_per_gpu > largest) {
      return "container \"" + c.name + "\": asks for " + std::to_string(c.mem_mib_per_gpu) +
             " MiB per GPU, more than any " + (c.models.Unconstrained() ? "" : "allowed ") +
             "GPU in the cluster has (largest: " + std::to_string(largest) + " MiB)";
    }
  }
  return "";
}

std::string DescribeShare(const ContainerRequest& c) {
  if (Whole(c) && c.mem_mib_per_gpu == 0) return "a whole GPU";
  std::string out;
  if (c.mem_mib_per_gpu > 0) out = std::to_string(c.mem_mib_per_gpu) + " MiB";
  if (c.core_milli_per_gpu > 0) out += (out.empty() ? "" : " and ") + Percent(c.core_milli_per_gpu);
  return out.empty() ? "any share" : out;
}

std::string DescribeAssignment(const core::Assignment& a) {
  std::string out = "[";
  const bool named = a.containers.size() > 1;
  bool first_container = true;
  for (const auto& c : a.containers) {
    if (named) {
      if (!first_container) out += "; ";
      out += c.name;
      if (c.gpus.empty()) out += " -";
    }
    first_container = false;
    bool first = true;
    for (const auto& g : c.gpus) {
      if (named || !first) out += ' ';
      first = false;
      out += std::to_string(g.index) + ":";
      if (g.core_milli >= core::kCoreMilliPerGpu && g.mem_mib == 0) {
        out += "whole";
      } else {
        out += std::to_string(g.mem_mib) + "MiB/" + PercentNumber(g.core_milli) + "%";
      }
    }
  }
  return out + "]";
}

}  // namespace tessera::scheduler
