#include "core/ledger.h"

#include <algorithm>
#include <set>

namespace tessera::core {
namespace {

Status ValidateNode(const NodeInfo& node) {
  if (node.name.empty()) return InvalidArgument("node has an empty name");
  if (node.cpu_milli < 0 || node.memory_mib < 0)
    return InvalidArgument("node " + node.name + ": negative CPU or memory capacity");
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (node.gpus[i].index != static_cast<int>(i))
      return InvalidArgument("node " + node.name + ": GPU indexes must be 0.." +
                             std::to_string(node.gpus.size() - 1) + " in order");
    if (node.gpus[i].memory_mib < 0)
      return InvalidArgument("node " + node.name + ": GPU " + std::to_string(i) +
                             " has negative memory");
  }
  return Status();
}

std::string Mib(int64_t v) { return std::to_string(v) + " MiB"; }

}  // namespace

int GpuPodKind(const PodRequest& pod) {
  int whole = 0;
  for (const auto& c : pod.containers) {
    if (c.gpu_count == 0) continue;
    if (c.gpu_count == 1 && c.core_milli_per_gpu < kCoreMilliPerGpu) return 0;
    whole += c.gpu_count;
  }
  return whole == 0 ? -1 : whole;
}

const std::string& NodeState::model() const {
  static const std::string kNone;
  return info.gpus.empty() ? kNone : info.gpus[0].model;
}

int64_t NodeState::TotalGpuCoreFree() const {
  int64_t total = 0;
  for (size_t i = 0; i < gpus.size(); ++i)
    if (info.gpus[i].healthy) total += GpuCoreFree(static_cast<int>(i));
  return total;
}

int NodeState::FullyFreeGpus() const {
  int n = 0;
  for (const auto& g : gpus) n += (g.sharers == 0 && g.core_used_milli == 0 && g.mem_used_mib == 0);
  return n;
}

Status Ledger::AddNode(NodeInfo node) {
  TESSERA_RETURN_IF_ERROR(ValidateNode(node));
  if (node_index_.count(node.name)) return AlreadyExists("node " + node.name + " is already known");
  NodeState state;
  state.gpus.resize(node.gpus.size());
  state.info = std::move(node);
  state.version = next_version_++;
  node_index_.emplace(state.info.name, static_cast<int>(nodes_.size()));
  nodes_.push_back(std::move(state));
  return Status();
}

Status Ledger::UpdateNode(NodeInfo node) {
  TESSERA_RETURN_IF_ERROR(ValidateNode(node));
  const int idx = NodeIndex(node.name);
  if (idx < 0) return NotFound("node " + node.name + " is not known");
  NodeState& st = nodes_[idx];
  if (node.cpu_milli < st.cpu_used_milli || node.memory_mib < st.mem_used_mib)
    return FailedPrecondition("node " + node.name + ": new CPU/memory capacity is below what its pods hold");
  for (size_t i = 0; i < st.gpus.size(); ++i) {
    const bool used = st.gpus[i].sharers > 0 || st.gpus[i].mem_used_mib > 0 || st.gpus[i].core_used_milli > 0;
    if (i >= node.gpus.size() && used)
      return FailedPrecondition("node " + node.name + ": GPU " + std::to_string(i) +
                                " disappeared while pods hold it");
    if (i < node.gpus.size() && node.gpus[i].memory_mib < st.gpus[i].mem_used_mib)
      return FailedPrecondition("node " + node.name + ": GPU " + std::to_string(i) + " memory " +
                                Mib(node.gpus[i].memory_mib) + " is below the " +
                                Mib(st.gpus[i].mem_used_mib) + " its pods hold");
  }
  st.gpus.resize(node.gpus.size());
  st.info = std::move(node);
  st.version = next_version_++;
  return Status();
}

Status Ledger::Touch(std::string_view name) {
  const int idx = NodeIndex(name);
  if (idx < 0) return NotFound("node " + std::string(name) + " is not known");
  nodes_[idx].version = next_version_++;
  return Status();
}

Status Ledger::RemoveNode(std::string_view name) {
  const int idx = NodeIndex(name);
  if (idx < 0) return NotFound("node " + std::string(name) + " is not known");
  if (nodes_[idx].pods > 0) {
    std::string list;
    for (const auto& k : PodsOn(name)) list += (list.empty() ? "" : ", ") + k;
    return FailedPrecondition("node " + std::string(name) + " still holds pods: " + list);
  }
  nodes_.erase(nodes_.begin() + idx);
  node_index_.clear();
  for (size_t i = 0; i < nodes_.size(); ++i) node_index_.emplace(nodes_[i].info.name, static_cast<int>(i));
  return Status();
}

int Ledger::NodeIndex(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  return it == node_index_.end() ? -1 : it->second;
}

const NodeState* Ledger::FindNode(std::string_view name) const {
  const int idx = NodeIndex(name);
  return idx < 0 ? nullptr : &nodes_[idx];
}

Status Ledger::CheckFits(const PodRequest& pod, const Assignment& a, bool takes_slots) const {
  const NodeState* node = FindNode(a.node);
  if (node == nullptr) return NotFound(pod.key + ": node " + a.node + " is not known");
  if (a.containers.size() != pod.containers.size())
    return InvalidArgument(pod.key + ": assignment has " + std::to_string(a.containers.size()) +
                           " containers, the pod " + std::to_string(pod.containers.size()));
  const int ngpu = static_cast<int>(node->gpus.size());
  std::vector<int64_t> add_core(ngpu, 0), add_mem(ngpu, 0);
  std::vector<int> add_sharers(ngpu, 0);
  for (size_t c = 0; c < pod.containers.size(); ++c) {
    const ContainerRequest& req = pod.containers[c];
    const ContainerAssignment& ca = a.containers[c];
    const std::string where = pod.key + " container \"" + req.name + "\"";
    if (ca.name != req.name)
      return InvalidArgument(where + ": assignment names container \"" + ca.name + "\"");
    if (static_cast<int>(ca.gpus.size()) != req.gpu_count)
      return InvalidArgument(where + ": assigned " + std::to_string(ca.gpus.size()) +
                             " GPUs, asked for " + std::to_string(req.gpu_count));
    std::set<int> seen;
    for (const GpuShare& s : ca.gpus) {
      if (s.index < 0 || s.index >= ngpu)
        return InvalidArgument(where + ": GPU index " + std::to_string(s.index) + " is not on node " +
                               a.node + " (" + std::to_string(ngpu) + " GPUs)");
      if (!seen.insert(s.index).second)
        return InvalidArgument(where + ": GPU " + std::to_string(s.index) + " assigned twice");
      const GpuInfo& gi = node->info.gpus[s.index];
      if (!s.uuid.empty() && !gi.uuid.empty() && s.uuid != gi.uuid)
        return InvalidArgument(where + ": GPU " + std::to_string(s.index) + " is " + gi.uuid +
                               ", not " + s.uuid);
      if ((s.mem_mib != req.mem_mib_per_gpu && s.mem_mib != ShareMemMiB(req, gi)) ||
          s.core_milli != req.core_milli_per_gpu)
        return InvalidArgument(where + ": share on GPU " + std::to_string(s.index) +
                               " differs from the request");
      if (!req.models.Allows(gi.model))
        return InvalidArgument(where + ": GPU model " + gi.model + " is not allowed");
      add_core[s.index] += s.core_milli;
      add_mem[s.index] += s.mem_mib;
      add_sharers[s.index] += takes_slots ? 1 : 0;
    }
  }
  if (pod.cpu_milli > node->CpuFree())
    return ResourceExhausted(pod.key + ": needs " + std::to_string(pod.cpu_milli) + "m CPU, node " +
                             a.node + " has " + std::to_string(node->CpuFree()) + "m free");
  if (pod.memory_mib > node->MemFree())
    return ResourceExhausted(pod.key + ": needs " + Mib(pod.memory_mib) + " memory, node " + a.node +
                             " has " + Mib(node->MemFree()) + " free");
  for (int i = 0; i < ngpu; ++i) {
    if (add_core[i] > node->GpuCoreFree(i))
      return ResourceExhausted(pod.key + ": GPU " + std::to_string(i) + " on " + a.node + " has " +
                               std::to_string(node->GpuCoreFree(i)) + " core milli free, needs " +
                               std::to_string(add_core[i]));
    if (add_sharers[i] > node->SharerSlotsFree(i))
      return ResourceExhausted(pod.key + ": GPU " + std::to_string(i) + " on " + a.node + " is shared by " +
                               std::to_string(node->gpus[i].sharers) + " containers, its limit is " +
                               std::to_string(node->info.gpus[i].max_sharers));
    if (add_mem[i] > 0 && add_mem[i] > node->GpuMemFree(i))
      return ResourceExhausted(pod.key + ": GPU " + std::to_string(i) + " on " + a.node + " has " +
                               Mib(node->GpuMemFree(i)) + " free, needs " + Mib(add_mem[i]));
  }
  return Status();
}

void Ledger::Apply(const Hold& hold, int sign) {
  NodeState& node = nodes_[NodeIndex(hold.assignment.node)];
  node.cpu_used_milli += sign * hold.request.cpu_milli;
  node.mem_used_mib += sign * hold.request.memory_mib;
  node.pods += sign;
  for (const auto& ca : hold.assignment.containers) {
    for (const auto& s : ca.gpus) {
      GpuUsage& g = node.gpus[s.index];
      g.core_used_milli += sign * s.core_milli;
      g.mem_used_mib += sign * s.mem_mib;
      if (hold.takes_slots) g.sharers += sign;
    }
  }
  const int kind = GpuPodKind(hold.request);
  if (kind >= 0) {
    int& n = node.gpu_pod_kinds[kind];
    n += sign;
    if (n == 0) node.gpu_pod_kinds.erase(kind);
  }
  node.version = next_version_++;
}

Status Ledger::Assume(const PodRequest& pod, const Assignment& assignment, bool takes_slots) {
  if (pods_.count(pod.key)) return AlreadyExists("pod " + pod.key + " is already placed");
  TESSERA_RETURN_IF_ERROR(CheckFits(pod, assignment, takes_slots));
  auto it = pods_.emplace(pod.key, Hold{pod, assignment, HoldState::kAssumed, takes_slots}).first;
  Apply(it->second, +1);
  return Status();
}

Status Ledger::Confirm(std::string_view pod_key) {
  auto it = pods_.find(pod_key);
  if (it == pods_.end()) return NotFound("pod " + std::string(pod_key) + " is not held");
  it->second.state = HoldState::kConfirmed;
  return Status();
}

Status Ledger::Forget(std::string_view pod_key) {
  auto it = pods_.find(pod_key);
  if (it == pods_.end()) return NotFound("pod " + std::string(pod_key) + " is not held");
  Apply(it->second, -1);
  pods_.erase(it);
  return Status();
}

const Assignment* Ledger::FindAssignment(std::string_view pod_key) const {
  auto it = pods_.find(pod_key);
  return it == pods_.end() ? nullptr : &it->second.assignment;
}

Result<HoldState> Ledger::StateOf(std::string_view pod_key) const {
  auto it = pods_.find(pod_key);
  if (it == pods_.end()) return NotFound("pod " + std::string(pod_key) + " is not held");
  return it->second.state;
}

std::vector<std::string> Ledger::PodsOn(std::string_view node) const {
  std::vector<std::string> out;
  for (const auto& [key, hold] : pods_)
    if (hold.assignment.node == node) out.push_back(key);
  return out;
}

int64_t Ledger::TotalGpus() const {
  int64_t n = 0;
  for (const auto& node : nodes_) n += static_cast<int64_t>(node.gpus.size());
  return n;
}

int64_t Ledger::TotalGpuCoreUsed() const {
  int64_t n = 0;
  for (const auto& node : nodes_)
    for (const auto& g : node.gpus) n += g.core_used_milli;
  return n;
}

}  // namespace tessera::core
