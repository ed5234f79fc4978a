// PlacementPolicy: how a placement policy scores one node for one pod and
// which GPUs it would give the pod there. The Placer (placer.h) runs the
// filter, calls a policy on every feasible node and picks the winner; the
// scheduler extender and the simulator share both.
//
// Thread-safety: a policy object is used by one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/fragmentation.h"
#include "core/ledger.h"
#include "core/load.h"
#include "core/model.h"
#include "core/random.h"

namespace tessera::core {

inline constexpr int kMaxPodGpus = 32;   // GPUs one pod may take, all containers together
inline constexpr int64_t kMaxNodeScore = 100;

// The GPUs a pod would take on a node, flattened in container order
// (container 0's gpu_count indexes first, then container 1's, ...).
struct GpuPick {
  int count = 0;
  std::array<uint8_t, kMaxPodGpus> index{};
  void Add(int i) { index[count++] = static_cast<uint8_t>(i); }
};

// One node's verdict. Higher (score, fine) wins; `fine` refines ties within
// an integer score (the artifact baselines leave it 0).
struct Candidate {
  int64_t score = 0;
  double fine = 0;
  GpuPick pick;
};

// How GPUs are chosen for a fractional (sharing) container.
enum class GpuSelect {
  kBestFit,  // the fitting GPU with the least free share, lowest index on ties
  kRandom,   // a uniformly random fitting GPU
};

// Picks GPUs for every GPU container of `pod` on `node`: whole-GPU containers
// take the lowest-index fully free GPUs, sharing containers use `mode`.
// Returns false when the pod's GPUs do not fit (model, share, memory). CPU and
// host memory are not checked here (see FitsNode).
bool PickGpus(const PodRequest& pod, const NodeState& node, GpuSelect mode, Rng* rng, GpuPick* out);

// True when the pod is one container sharing one GPU (a fraction of it).
bool IsSingleShare(const PodRequest& pod);
// For such a pod: the GPUs of `node` it fits on, as one-GPU picks, lowest
// index first. Empty for other pods.
std::vector<GpuPick> ShareCandidates(const PodRequest& pod, const NodeState& node);

// Why a node cannot host a pod.
enum class FitFailure { kNone, kCpu, kMemory, kGpuModel, kGpuMps, kGpuCount, kGpuShare, kGpuMemory };
std::string_view FitFailureName(FitFailure f);

// The filter every policy shares: CPU, host memory, and whether the pod's
// GPUs fit (best fit). kNone when the node fits.
FitFailure FitsNode(const PodRequest& pod, const NodeState& node);

// Per-GPU free core milli of a node, as a fixed array (nodes have at most 64 GPUs).
struct GpuLeft {
  int n = 0;
  std::array<int64_t, 64> left{};
  std::span<const int64_t> span() const { return {left.data(), static_cast<size_t>(n)}; }
};
GpuLeft FreeCore(const NodeState& node);

// How the placer chooses among nodes with equal scores. The FGD artifact's
// results are only reproduced with kNodeOrder (its node names carry a random
// prefix, so "first by name" is a fixed random order per run): with integer
// scores the many ties then fill the same nodes first.
enum class TieBreak {
  kRandom,     // uniform among the best nodes
  kNodeOrder,  // the best node that comes first in the placer's node order
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;

  // Called once per pod before any node is scored; learning policies update
  // their view of the workload here.
  virtual void OnArrival(const PodRequest& /*pod*/) {}
  // Called before a pod's nodes are scored, with the ledger they come from;
  // policies that weigh cluster-wide state read it here. A change that alters
  // scores must change epoch().
  virtual void SeeCluster(const Ledger& /*ledger*/) {}

  // Scores placing `pod` on `node`, which passed FitsNode, and fills the
  // GPUs it would take. Scores are in [0, kMaxNodeScore].
  virtual Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) = 0;

  // The score Evaluate would give `node` if the pod took the GPUs in `pick`
  // there instead of the policy's own choice: under DRA kube-scheduler's
  // allocator picks the device (dra_policy.h), and a steering extender must
  // score each node by that pick. `pick` must fit the node. The default, for
  // policies whose node score does not depend on the GPU choice: Evaluate's.
  virtual int64_t ScorePick(const PodRequest& pod, const NodeState& node, const GpuPick& /*pick*/, Rng& rng) {
    return Evaluate(pod, node, rng).score;
  }

  // True when Evaluate depends only on the pod's shape, the node's state and
  // epoch(), so the placer may cache it.
  virtual bool Cacheable() const { return true; }
  // True when every feasible node scores the same (random placement): the
  // placer then picks a uniform feasible node and evaluates only that one.
  virtual bool ScoresAllEqual() const { return false; }
  // Changes when the policy's own state changes in a way that alters scores.
  virtual uint64_t epoch() const { return 0; }
  virtual TieBreak tie_break() const { return TieBreak::kNodeOrder; }
  // What Evaluate depends on in the pod beyond its shape (requests and
  // models), e.g. a predicted load; the placer caches scores per shape and
  // this key. Empty for policies that look at the shape only.
  virtual std::string CacheKey(const PodRequest& /*pod*/) const { return {}; }
};

// The built-in policy names: random, dotprod, clustering, packing, bestfit,
// fgd, tessera, tessera-interference, tessera-v3 (tessera before the
// CPU-pressure boost), tessera-v2 (before the expected-waste term),
// tessera-v1 (before the dead-capacity term). MakePolicy also takes each as
// "NAME+kube" (kDeployedSuffix): NAME places the GPU pods and kube-scheduler's
// default scoring the pods without GPUs, as in a cluster where NAME is the
// extender for GPU pods only (placePodsWithoutGpus off; deployed_policy.h).
std::vector<std::string> PolicyNames();
inline constexpr std::string_view kDeployedSuffix = "+kube";

// Settings for policies that need them. `workload` is FGD's target workload
// (the typical pods of the trace); tessera learns its own.
struct PolicyConfig {
  TargetWorkload workload;
  // tessera-interference: its knobs, and the predicted loads of placed pods
  // (may be null: loads then follow the ledger's core allocation).
  InterferenceOptions interference = {};
  const GpuLoadBook* load = nullptr;
};

// INVALID_ARGUMENT naming the known policies when `name` is unknown.
Result<std::unique_ptr<PlacementPolicy>> MakePolicy(std::string_view name, const PolicyConfig& config);

}  // namespace tessera::core
