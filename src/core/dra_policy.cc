// Placement under DRA (dra_policy.h).
#include "core/dra_policy.h"

#include "core/kube_default_policy.h"
#include "core/tessera_policy.h"

namespace tessera::core {

Candidate DraPolicy::Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) {
  GpuPick pick;
  // The node passed FitsNode, so the allocator's exhaustive first fit finds
  // GPUs too; if it did not, the node policy's own verdict stands.
  if (!AllocatorPick(pod, node, SliceDeviceOrder(node, order_), &pick)) return node_policy_->Evaluate(pod, node, rng);
  Candidate c;
  if (scoring_ == DraNodeScore::kAllocatorPick) {
    c.score = node_policy_->ScorePick(pod, node, pick, rng);
  } else {
    c = node_policy_->Evaluate(pod, node, rng);
  }
  c.pick = pick;
  return c;
}

std::vector<std::string> DraPolicyNames() {
  return {"dra-kube", "dra-kube-sorted", "dra-tessera-node", "dra-tessera", "dra-tessera-sorted"};
}

Result<std::unique_ptr<PlacementPolicy>> MakeDraPolicy(std::string_view name, const PolicyConfig& /*config*/) {
  struct Variant {
    std::string_view name;
    bool tessera;  // else kube-scheduler's default scoring
    SliceOrder order;
    DraNodeScore scoring;
  };
  static constexpr Variant kVariants[] = {
      {"dra-kube", false, SliceOrder::kGpuIndex, DraNodeScore::kOwnPick},
      {"dra-kube-sorted", false, SliceOrder::kLeastFreeFirst, DraNodeScore::kOwnPick},
      {"dra-tessera-node", true, SliceOrder::kGpuIndex, DraNodeScore::kOwnPick},
      {"dra-tessera", true, SliceOrder::kGpuIndex, DraNodeScore::kAllocatorPick},
      {"dra-tessera-sorted", true, SliceOrder::kLeastFreeFirst, DraNodeScore::kAllocatorPick},
  };
  for (const Variant& v : kVariants) {
    if (v.name != name) continue;
    std::unique_ptr<PlacementPolicy> node_policy;
    if (v.tessera) node_policy = std::make_unique<TesseraPolicy>();
    else node_policy = std::make_unique<KubeDefaultPolicy>();
    return std::unique_ptr<PlacementPolicy>(
        std::make_unique<DraPolicy>(std::string(name), std::move(node_policy), v.order, v.scoring));
  }
  std::string known;
  for (const auto& n : DraPolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown DRA placement variant \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace tessera::core
