#include "kubectl/inventory.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/codec.h"
#include "kubectl/claims.h"
#include "kubectl/object_fields.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;


struct Candidate {
  bool handed_out = false;  // its node agent allocated a container (tessera.io/allocated)
  std::string assigned_at, created_at, key;
  std::string isolation;  // tessera.io/isolation unless hook (ShareView::isolation)
  core::PodRequest request;
  core::Assignment assignment;
};

}  // namespace

std::string ShareView::Holder() const {
  if (claim.empty()) return ns + "/" + pod + "[" + container + "]";
  return pod.empty() ? ns + "/" + ClaimLabel(claim) : ns + "/" + pod + "[" + ClaimLabel(claim) + "]";
}

std::string ShareView::HolderAndIsolation() const {
  if (isolation.empty()) return Holder();
  if (isolation == core::IsolationName(core::Isolation::kMps)) return Holder() + " (MPS)";
  if (isolation == core::IsolationName(core::Isolation::kNone)) return Holder() + " (not enforced)";
  return Holder() + " (isolation " + isolation + ")";
}

void Totals::Add(const GpuView& gpu) {
  ++gpus;
  mem_total_mib += gpu.info.memory_mib;
  mem_used_mib += gpu.used.mem_used_mib;
  core_total_milli += core::kCoreMilliPerGpu;
  core_used_milli += gpu.used.core_used_milli;
}

std::string NodeView::Model() const {
  if (!model_label.empty()) return model_label;
  std::string out;
  std::set<std::string> seen;
  for (const auto& g : gpus) {
    if (g.info.model.empty() || !seen.insert(g.info.model).second) continue;
    out += (out.empty() ? "" : ",") + g.info.model;
  }
  return out;
}

const NodeView* Inventory::FindNode(std::string_view name) const {
  for (const auto& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

Inventory BuildInventory(const Json& nodes, const Json& pods, const core::ResourceNames& names) {
  return BuildInventory(nodes, pods, Json::array(), names);
}

Inventory BuildInventory(const Json& nodes, const Json& pods, const Json& claims, const core::ResourceNames& names) {
  Inventory inv;
  ClaimShares dra = ClaimSharesFrom(claims);
  inv.problems = std::move(dra.problems);
  std::map<std::string, std::vector<const ClaimShare*>> claims_on;  // by node
  for (const ClaimShare& c : dra.shares) claims_on[c.node].push_back(&c);
  core::Ledger ledger;
  std::map<std::string, std::string> labels;
  if (nodes.is_array()) {
    for (const Json& node : nodes) {
      const std::string name = StringAt(node, {"metadata", "name"});
      Result<core::NodeInfo> info = core::NodeInfoFromJson(node);
      if (!info.ok()) {
        if (info.status().code() == StatusCode::kNotFound) ++inv.other_nodes;
        else inv.problems.push_back({"node " + name, info.status().message()});
        continue;
      }
      if (Status s = ledger.AddNode(*info); !s.ok()) {
        inv.problems.push_back({"node " + name, s.message()});
        continue;
      }
      // Fewer slots registered than listed: tessera-scheduler turns away
      // the pods that would need more (its Filter's reason says the same).
      if (const int64_t listed = core::ListedSlots(*info); listed >= 0) {
        for (const std::string& r : core::SlotResources(names)) {
          if (const int64_t have = core::AllocatableCount(node, r); have < listed) {
            inv.problems.push_back({"node " + name, "its kubelet reports " + std::to_string(have) + " of the " +
                                                        std::to_string(listed) + " " + r +
                                                        " slots its inventory lists allocatable; GPU pods that need "
                                                        "more wait (the node agent is starting or restarting, or "
                                                        "some GPUs' slots are unhealthy)"});
          }
        }
      }
      labels[name] = StringAt(node, {"metadata", "labels", std::string(kModelLabel)});
    }
  }

  std::vector<Candidate> candidates;
  if (pods.is_array()) {
    for (const Json& pod : pods) {
      Result<std::string> key = core::PodKey(pod);
      if (!key.ok()) continue;  // not a pod object; nothing to name it by
      const std::string phase = StringAt(pod, {"status", "phase"});
      if (phase == "Succeeded" || phase == "Failed") continue;
      const std::string node = StringAt(pod, {"spec", "nodeName"});
      if (node.empty()) {
        if (core::WantsGpu(pod, names)) inv.pending.push_back(*key);
        continue;
      }
      const Json* text = Annotation(pod, core::kAssignmentAnnotation);
      if (text == nullptr || !text->is_string()) continue;  // not placed by Tessera
      Result<core::Assignment> assignment = core::DecodeAssignment(text->get<std::string>());
      if (!assignment.ok()) {
        inv.problems.push_back({"pod " + *key, assignment.status().message()});
        continue;
      }
      if (assignment->node != node) {
        inv.problems.push_back({"pod " + *key, "assignment names node " + assignment->node +
                                                   " but the pod is bound to " + node});
        continue;
      }
      Result<core::PodRequest> request = core::HeldRequest(pod, *key, *assignment);
      if (!request.ok()) {
        inv.problems.push_back({"pod " + *key, "tessera.io/assignment: " + request.status().message()});
        continue;
      }
      const Json* at = Annotation(pod, core::kAssignedAtAnnotation);
      const Json* allocated = Annotation(pod, core::kAllocatedAnnotation);
      const bool handed_out = allocated != nullptr && allocated->is_string() && !allocated->get<std::string>().empty();
      std::string isolation = StringAt(pod, {"metadata", "annotations", std::string(core::kIsolationAnnotation)});
      if (isolation == core::IsolationName(core::Isolation::kHook)) isolation.clear();
      candidates.push_back({handed_out, at && at->is_string() ? at->get<std::string>() : std::string(),
                            StringAt(pod, {"metadata", "creationTimestamp"}), *key, std::move(isolation),
                            std::move(request).value(), std::move(assignment).value()});
    }
  }
  // What the node agents handed out first (a pod can write any assigned-at,
  // but only the agent writes tessera.io/allocated), then by time: RFC 3339
  // times in UTC with whole seconds, as Kubernetes writes them, sort as text.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    const bool a_later = !a.handed_out, b_later = !b.handed_out;
    return std::tie(a_later, a.assigned_at, a.created_at, a.key) < std::tie(b_later, b.assigned_at, b.created_at, b.key);
  });
  std::map<std::string, std::string> isolation_of;  // by pod key, when not hook
  for (const Candidate& c : candidates) {
    if (ledger.FindNode(c.assignment.node) == nullptr) {
      inv.problems.push_back({"pod " + c.key, "placed on node " + c.assignment.node +
                                                  ", which is not a GPU node this view knows"});
      continue;
    }
    if (Status s = ledger.Assume(c.request, c.assignment); !s.ok()) {
      // Said as what it is: with a node agent's share handed out beyond the
      // GPU the GPU is over-committed; otherwise the pod's assignment (not
      // handed out yet) no longer fits beside what is.
      inv.problems.push_back(
          {"pod " + c.key, c.handed_out ? "over-committed: its node agent handed it a share that does not fit "
                                          "beside the shares counted before it (shown): " + s.message()
                                        : "its assignment does not fit beside the shares handed out (not "
                                          "allocated yet; it will be refused at the node): " + s.message()});
      continue;
    }
    (void)ledger.Confirm(c.key);
    if (!c.isolation.empty()) isolation_of[c.key] = c.isolation;
  }

  for (const core::NodeState& state : ledger.nodes()) {
    NodeView view;
    view.name = state.info.name;
    view.model_label = labels[view.name];
    view.cpu_milli = state.info.cpu_milli;
    view.cpu_used_milli = state.cpu_used_milli;
    view.memory_mib = state.info.memory_mib;
    view.memory_used_mib = state.mem_used_mib;
    for (size_t i = 0; i < state.info.gpus.size(); ++i) {
      view.gpus.push_back({state.info.gpus[i], state.gpus[i], {}, 0, 0});
    }
    const std::vector<std::string> keys = ledger.PodsOn(view.name);
    for (const std::string& key : keys) {
      const core::Assignment* a = ledger.FindAssignment(key);
      const size_t slash = key.find('/');
      for (const auto& c : a->containers) {
        for (const auto& g : c.gpus) {
          if (g.index < 0 || static_cast<size_t>(g.index) >= view.gpus.size()) continue;
          const auto isolation = isolation_of.find(key);
          view.gpus[g.index].shares.push_back({key.substr(0, slash), key.substr(slash + 1), c.name, g.mem_mib,
                                               g.core_milli, "",
                                               isolation == isolation_of.end() ? "" : isolation->second});
        }
      }
    }
    for (GpuView& gpu : view.gpus) {
      std::sort(gpu.shares.begin(), gpu.shares.end(), [](const ShareView& a, const ShareView& b) {
        return std::tie(a.ns, a.pod, a.container) < std::tie(b.ns, b.pod, b.container);
      });
    }
    for (const ClaimShare* c : claims_on[view.name]) {
      const std::string who = "claim " + c->ns + "/" + c->claim;
      if (c->index < 0 || static_cast<size_t>(c->index) >= view.gpus.size()) {
        inv.problems.push_back({who, "allocated GPU " + std::to_string(c->index) + " of node " + view.name +
                                         ", which has no such GPU in its inventory"});
        continue;
      }
      GpuView& gpu = view.gpus[static_cast<size_t>(c->index)];
      const int64_t mem = c->mem_mib > 0 ? c->mem_mib : gpu.info.memory_mib;
      gpu.used.mem_used_mib += mem;
      gpu.used.core_used_milli += c->core_milli;
      if (gpu.used.mem_used_mib > gpu.info.memory_mib || gpu.used.core_used_milli > core::kCoreMilliPerGpu) {
        inv.problems.push_back({who, "over-committed: with the shares counted before it GPU " +
                                         std::to_string(c->index) + " of node " + view.name + " holds " +
                                         std::to_string(gpu.used.mem_used_mib) + " of " +
                                         std::to_string(gpu.info.memory_mib) + " MiB and " +
                                         std::to_string(gpu.used.core_used_milli / 10) +
                                         " % of compute (the node agent refuses whichever reached it second)"});
      }
      gpu.shares.push_back({c->ns, c->pod, "", mem, c->core_milli, c->claim, ""});
      ++gpu.claims;
    }
    std::set<std::string> node_pods;
    for (GpuView& gpu : view.gpus) {
      std::set<std::string> gpu_pods;
      for (const auto& s : gpu.shares) {
        const std::string holder = s.claim.empty() || !s.pod.empty() ? s.ns + "/" + s.pod : s.Holder();
        gpu_pods.insert(holder);
        node_pods.insert(holder);
      }
      gpu.pods = static_cast<int>(gpu_pods.size());
      view.totals.Add(gpu);
      inv.totals.Add(gpu);
    }
    view.totals.pods = static_cast<int>(node_pods.size());
    inv.totals.pods += view.totals.pods;
    inv.nodes.push_back(std::move(view));
  }
  for (const auto& [node, on] : claims_on) {
    if (inv.FindNode(node) != nullptr || ledger.FindNode(node) != nullptr) continue;
    for (const ClaimShare* c : on) {
      inv.problems.push_back({"claim " + c->ns + "/" + c->claim,
                              "allocated on node " + node + ", which is not a GPU node this view knows"});
    }
  }
  std::sort(inv.nodes.begin(), inv.nodes.end(), [](const NodeView& a, const NodeView& b) { return a.name < b.name; });
  std::sort(inv.pending.begin(), inv.pending.end());
  std::stable_sort(inv.problems.begin(), inv.problems.end(),
                   [](const Problem& a, const Problem& b) { return a.object < b.object; });
  return inv;
}

}  // namespace tessera::kubectl
