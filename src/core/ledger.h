// Ledger: the allocation book of every node's CPU, host memory and per-GPU
// memory and compute, and of the pods holding them.
//
// A pod is first *assumed* (the scheduler decided, the API server has not yet
// shown it bound), then *confirmed* (seen bound), and *forgotten* when it ends.
// Every mutation checks capacity first and changes nothing when it fails, so
// no GPU's memory or compute and no node's CPU or memory is ever over-committed.
// Thread-safety: none; callers serialise access (the extender holds one mutex).
//
//   Ledger ledger;
//   TESSERA_RETURN_IF_ERROR(ledger.AddNode(node));
//   TESSERA_RETURN_IF_ERROR(ledger.Assume(pod, assignment));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace tessera::core {

// Use of one GPU.
struct GpuUsage {
  int64_t mem_used_mib = 0;
  int64_t core_used_milli = 0;
  int sharers = 0;  // containers holding a share of this GPU
  bool operator==(const GpuUsage&) const = default;
};

// A node's capacity and current use. Free amounts never go negative.
struct NodeState {
  NodeInfo info;
  int64_t cpu_used_milli = 0;
  int64_t mem_used_mib = 0;
  std::vector<GpuUsage> gpus;  // parallel to info.gpus
  int pods = 0;
  // GPU pods on the node by kind (see GpuPodKind): kind -> count.
  std::map<int, int> gpu_pod_kinds;
  // Changes on every mutation of this node, and is unique across the ledger,
  // so callers can cache per-node computations keyed by it.
  uint64_t version = 0;

  int64_t CpuFree() const { return info.cpu_milli - cpu_used_milli; }
  // The model of the node's GPUs (the first GPU's; "" without GPUs).
  const std::string& model() const;
  int64_t MemFree() const { return info.memory_mib - mem_used_mib; }
  int64_t GpuCoreFree(int i) const { return kCoreMilliPerGpu - gpus[i].core_used_milli; }
  int64_t GpuMemFree(int i) const { return info.gpus[i].memory_mib - gpus[i].mem_used_mib; }
  // How many more containers may share GPU i (its max_sharers less its sharers; a large number without a limit).
  int SharerSlotsFree(int i) const {
    return info.gpus[i].max_sharers > 0 ? info.gpus[i].max_sharers - gpus[i].sharers : 1 << 30;
  }
  // Sum of free core milli over healthy GPUs.
  int64_t TotalGpuCoreFree() const;
  // GPUs with no share taken at all.
  int FullyFreeGpus() const;
};

// The kind of GPU pod, as placement policies group them: 0 for a pod sharing
// one GPU (a fraction of its compute), n for a pod taking n whole GPUs, -1 for
// a pod using no GPU.
int GpuPodKind(const PodRequest& pod);

enum class HoldState { kAssumed, kConfirmed };

class Ledger {
 public:
  // Adds a node with no use. ALREADY_EXISTS if the name is taken;
  // INVALID_ARGUMENT for negative capacity or GPU indexes not 0..n-1.
  Status AddNode(NodeInfo node);
  // Replaces a node's capacity, keeping its pods. FAILED_PRECONDITION (and no
  // change) if the pods on it would no longer fit.
  Status UpdateNode(NodeInfo node);
  // Removes a node. FAILED_PRECONDITION naming the pods if any still hold it.
  Status RemoveNode(std::string_view name);
  // Gives a node a new version without changing it, for callers whose cached
  // per-node results depend on more than the ledger (predicted GPU load).
  // NOT_FOUND if unknown.
  Status Touch(std::string_view name);

  // Books `assignment` for `pod`. Checks that the assignment matches the
  // request (containers, GPU counts, shares, models, distinct GPUs) and fits
  // the node. On error nothing changes: INVALID_ARGUMENT for a mismatch,
  // NOT_FOUND for an unknown node, RESOURCE_EXHAUSTED when it does not fit,
  // ALREADY_EXISTS when the pod is already held.
  // `takes_slots` false books a holder that is not a device-plugin container
  // (a DRA claim): its shares take memory and compute but no sharer slot
  // (GpuInfo::max_sharers, the node's device-plugin slots), and are not
  // counted in GpuUsage::sharers.
  Status Assume(const PodRequest& pod, const Assignment& assignment, bool takes_slots = true);
  // Marks an assumed pod confirmed. NOT_FOUND if unknown; confirming twice is OK.
  Status Confirm(std::string_view pod_key);
  // Releases everything the pod holds. NOT_FOUND if unknown.
  Status Forget(std::string_view pod_key);

  // Checks whether `assignment` would fit without booking it (same errors as
  // Assume, except ALREADY_EXISTS).
  Status CheckFits(const PodRequest& pod, const Assignment& assignment, bool takes_slots = true) const;

  // Nodes in insertion order. Indexes are stable until RemoveNode.
  const std::vector<NodeState>& nodes() const { return nodes_; }
  // nullptr when unknown. Valid until the next AddNode/RemoveNode.
  const NodeState* FindNode(std::string_view name) const;
  int NodeIndex(std::string_view name) const;  // -1 when unknown

  // nullptr when the pod is not held.
  const Assignment* FindAssignment(std::string_view pod_key) const;
  Result<HoldState> StateOf(std::string_view pod_key) const;
  size_t pod_count() const { return pods_.size(); }
  // Pod keys held on a node, sorted.
  std::vector<std::string> PodsOn(std::string_view node) const;

  // Changes on every mutation of any node (the last node version handed
  // out), so callers can cache cluster-wide computations keyed by it.
  uint64_t version() const { return next_version_; }

  // Cluster totals.
  int64_t TotalGpus() const;
  int64_t TotalGpuCoreUsed() const;

 private:
  struct Hold {
    PodRequest request;
    Assignment assignment;
    HoldState state = HoldState::kAssumed;
    bool takes_slots = true;
  };
  void Apply(const Hold& hold, int sign);

  uint64_t next_version_ = 1;
  std::vector<NodeState> nodes_;
  std::unordered_map<std::string, int> node_index_;
  std::map<std::string, Hold, std::less<>> pods_;
};

}  // namespace tessera::core
