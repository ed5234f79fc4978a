// Placement under DRA: a node-choosing policy combined with kube-scheduler's
// DRA allocator choosing the GPU. Under DRA the extender (or kube-scheduler
// alone) picks the node, but the GPUs on it are the allocator's first fit in
// the order the node's ResourceSlice lists them (dra_allocator.h). These
// variants measure in the simulator what that costs and what the node agent's
// slice order wins back (docs/notes/dra.md, "Placement under DRA"). The
// simulator runs them; the extender does not offer them as policies.
//
//   name                node chosen by                       GPU chosen by
//   dra-kube            kube-scheduler's default scoring      first fit, slice in GPU index order
//   dra-kube-sorted     kube-scheduler's default scoring      first fit, slice least-free-first (= best fit)
//   dra-tessera-node    tessera, scored by its own GPU pick   first fit, slice in GPU index order
//   dra-tessera         tessera, scored by the allocator's    first fit, slice in GPU index order
//   dra-tessera-sorted  tessera, scored by the allocator's    first fit, slice least-free-first (= best fit)
//
// Thread-safety: as every PlacementPolicy, used by one thread at a time.
//
//   auto p = MakeDraPolicy("dra-tessera-sorted", PolicyConfig{});
//   Placer placer(**p, 42);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/dra_allocator.h"
#include "core/policy.h"

namespace tessera::core {

// How the node-choosing policy scores a node.
enum class DraNodeScore {
  // By its own GPU choice there, as an extender that ignores the allocator
  // would (the GPU the pod gets may differ).
  kOwnPick,
  // By the GPU the allocator will take there (PlacementPolicy::ScorePick),
  // as an extender that predicts the allocator's first fit would.
  kAllocatorPick,
};

class DraPolicy final : public PlacementPolicy {
 public:
  // `node_policy` chooses the node; the pod's GPUs are AllocatorPick's over
  // the node's GPUs listed in `order`.
  DraPolicy(std::string name, std::unique_ptr<PlacementPolicy> node_policy, SliceOrder order, DraNodeScore scoring)
      : name_(std::move(name)), node_policy_(std::move(node_policy)), order_(order), scoring_(scoring) {}

  std::string_view name() const override { return name_; }
  void OnArrival(const PodRequest& pod) override { node_policy_->OnArrival(pod); }
  void SeeCluster(const Ledger& ledger) override { node_policy_->SeeCluster(ledger); }
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override;
  bool Cacheable() const override { return node_policy_->Cacheable(); }
  uint64_t epoch() const override { return node_policy_->epoch(); }
  TieBreak tie_break() const override { return node_policy_->tie_break(); }
  std::string CacheKey(const PodRequest& pod) const override { return node_policy_->CacheKey(pod); }

 private:
  std::string name_;
  std::unique_ptr<PlacementPolicy> node_policy_;
  SliceOrder order_;
  DraNodeScore scoring_;
};

// The DRA variants in the table above.
std::vector<std::string> DraPolicyNames();

// One of DraPolicyNames(). INVALID_ARGUMENT naming them when `name` is not one.
Result<std::unique_ptr<PlacementPolicy>> MakeDraPolicy(std::string_view name, const PolicyConfig& config);

}  // namespace tessera::core
