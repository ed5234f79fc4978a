// DeployedPolicy: a placement policy as a cluster runs it when it is
// kube-scheduler's extender for GPU pods only, for the simulator: without
// the second extenders entry or with tessera-scheduler's
// placePodsWithoutGpus off, the policy places the GPU pods and
// kube-scheduler's own scoring (KubeDefaultPolicy) places the pods without
// GPUs; the policy still learns from every pod, as the extender's pod watch
// shows it every bound pod (scheduler/cluster_state.h, "Pods without
// GPUs"). The simulator's plain policies place every pod themselves (the
// FGD protocol), as the extender does with placePodsWithoutGpus on.
// Named "<policy>+kube" in MakePolicy ("tessera+kube", "fgd+kube"). For the
// simulator's placer only, which calls OnArrival with each pod right before
// scoring it: the tie-break and cacheability follow the last arrival. The
// extender refuses such names (it learns from other pods than it scores).
//
// Thread-safety: as every PlacementPolicy, used by one thread at a time.
//
//   auto inner = MakePolicy("tessera", config);
//   DeployedPolicy p(std::move(*inner));
#pragma once

#include <memory>
#include <string>

#include "core/kube_default_policy.h"
#include "core/policy.h"

namespace tessera::core {

class DeployedPolicy final : public PlacementPolicy {
 public:
  // `gpu` places the pods that use GPUs; must not be null.
  explicit DeployedPolicy(std::unique_ptr<PlacementPolicy> gpu)
      : gpu_(std::move(gpu)), name_(std::string(gpu_->name()) + "+kube") {}
  std::string_view name() const override { return name_; }
  // Every pod reaches the GPU policy; the pod's kind decides, until the next
  // arrival, which policy's tie-break and cacheability apply (the placer
  // asks right after OnArrival).
  void OnArrival(const PodRequest& pod) override {
    gpu_->OnArrival(pod);
    gpu_pod_ = pod.UsesGpu();
  }
  void SeeCluster(const Ledger& ledger) override { gpu_->SeeCluster(ledger); }
  Candidate Evaluate(const PodRequest& pod, const NodeState& node, Rng& rng) override {
    return pod.UsesGpu() ? gpu_->Evaluate(pod, node, rng) : kube_.Evaluate(pod, node, rng);
  }
  int64_t ScorePick(const PodRequest& pod, const NodeState& node, const GpuPick& pick, Rng& rng) override {
    return pod.UsesGpu() ? gpu_->ScorePick(pod, node, pick, rng) : kube_.ScorePick(pod, node, pick, rng);
  }
  bool Cacheable() const override { return gpu_pod_ ? gpu_->Cacheable() : kube_.Cacheable(); }
  bool ScoresAllEqual() const override { return gpu_pod_ ? gpu_->ScoresAllEqual() : kube_.ScoresAllEqual(); }
  uint64_t epoch() const override { return gpu_->epoch(); }
  TieBreak tie_break() const override { return gpu_pod_ ? gpu_->tie_break() : kube_.tie_break(); }
  std::string CacheKey(const PodRequest& pod) const override {
    return pod.UsesGpu() ? gpu_->CacheKey(pod) : kube_.CacheKey(pod);
  }

 private:
  std::unique_ptr<PlacementPolicy> gpu_;
  KubeDefaultPolicy kube_;
  std::string name_;
  bool gpu_pod_ = true;  // the last arrival uses GPUs
};

}  // namespace tessera::core
