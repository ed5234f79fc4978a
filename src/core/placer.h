// Placer: picks a node and GPUs for one pod with a placement policy — the
// filter, the per-node scores, the winner and its tie-break. The simulator
// and the scheduler extender both place pods through it.
//
// Scores of cacheable policies are cached per (pod shape, node version), so
// replaying thousands of similar pods over thousands of nodes stays cheap.
// Thread-safety: none; one placer per thread.
//
//   Placer placer(*policy, /*seed=*/42);
//   Result<Assignment> a = placer.Place(pod, ledger);
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/ledger.h"
#include "core/policy.h"
#include "core/random.h"

namespace tessera::core {

class Placer {
 public:
  // `policy` must outlive the placer. `seed` drives random tie-breaks and
  // random GPU choice.
  Placer(PlacementPolicy& policy, uint64_t seed);

  // The best node and GPUs for `pod` in `ledger` (not booked: call
  // ledger.Assume with the result). RESOURCE_EXHAUSTED with a summary of why
  // nodes were rejected ("0/12 nodes fit: 8 no GPU with enough free share,
  // 4 not enough CPU") when no node fits.
  Result<Assignment> Place(const PodRequest& pod, const Ledger& ledger);

  // With TieBreak::kNodeOrder, the rank of each node index (lower first).
  // Defaults to the ledger's order.
  void SetNodeRank(std::vector<int> rank) { rank_ = std::move(rank); }

  // Evaluates one node as Place would (for the extender's prioritize verb).
  // Precondition: FitsNode(pod, node) == kNone.
  Candidate Score(const PodRequest& pod, const NodeState& node);

 private:
  struct CacheEntry {
    uint64_t version = 0;  // node version + 1 the entry was computed for; 0 = empty
    uint64_t epoch = 0;    // policy epoch `candidate` was computed in
    bool fits = false;
    FitFailure why = FitFailure::kNone;
    Candidate candidate;
  };
  int ShapeId(const PodRequest& pod);

  PlacementPolicy& policy_;
  Rng rng_;
  std::vector<int> rank_;
  std::unordered_map<std::string, int> shapes_;
  std::vector<std::vector<CacheEntry>> cache_;  // [shape][node index]
};

// The key pods share cached filter verdicts and scores under: everything of
// `pod` that FitsNode and `policy`'s Evaluate read (CPU, memory, per
// container GPU count, memory, core and models, isolation, and the policy's
// CacheKey). Two pods with one key get the same verdict on any node.
std::string ShapeKey(const PodRequest& pod, const PlacementPolicy& policy);

// Turns a node and its pick into the Assignment for `pod`.
Assignment MakeAssignment(const PodRequest& pod, const NodeState& node, const GpuPick& pick);

}  // namespace tessera::core
