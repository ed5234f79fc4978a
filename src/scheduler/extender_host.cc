// The Extender's prioritize for pods that ask for no GPU (extender.h,
// "place_pods_without_gpus"): kube-scheduler's second extenders entry asks
// about every pod, and a pod without GPUs (and without placement
// preferences of its own) is scored here by the placement policy, as the
// simulator places it. Such a pod takes no GPU, but the CPU
// and memory it takes on a GPU node can leave that node's free GPUs without
// the CPU a GPU pod needs; the policy's score says how much it strands.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "scheduler/extender.h"
#include "scheduler/wire.h"

namespace tessera::scheduler {

HttpReply Extender::PrioritizeWithoutGpus(const ExtenderArgs& args) {
  const core::PodView& pod = *args.pod;
  const std::vector<std::string>& names = args.node_names();
  core::PodRequest req;
  req.key = HostLedgerKey(pod.key);
  req.cpu_milli = pod.host.cpu_milli;
  req.memory_mib = pod.host.memory_mib;
  // Asked again (kube-scheduler retries): scored without its own booking.
  const bool counted = state_.DropHostAssumption(pod.key, pod.uid);

  std::vector<PolicyScore> feasible;
  std::vector<size_t> without_gpus;  // nodes that are not GPU nodes: nothing to strand
  {
    MutexLock lock(policy_mu_);
    state_.Read([&](const ClusterView& view) {
      policy_mu_.AssertHeld();  // taken above, around the Read
      LearnWorkloadLocked(view);
      policy_->SeeCluster(view.ledger());
      const std::vector<int>& index = ResolveLocked(view, args.nodes);
      const int shape = ShapeIdLocked(req);
      const auto& nodes = view.ledger().nodes();
      for (size_t i = 0; i < names.size(); ++i) {
        if (index[i] < 0) {
          if (view.KindOf(names[i]) == ClusterView::NodeKind::kNotGpu) without_gpus.push_back(i);
          continue;  // a node the node watch has not shown yet: 0
        }
        const Verdict& v = VerdictLocked(shape, index[i], req, nodes[static_cast<size_t>(index[i])], true);
        if (v.why == core::FitFailure::kNone) feasible.push_back({i, v.candidate.score, v.candidate.fine});
      }
    });
  }
  std::vector<int64_t> scores(names.size(), 0);
  for (size_t i : without_gpus) scores[i] = kMaxExtenderScore;
  if (feasible.empty()) {
    log_->debug("prioritize (no GPU) {}: {} of {} nodes without GPUs, no GPU node with room in the book", pod.key,
                without_gpus.size(), names.size());
    return {200, WriteHostPriorityList(args, scores), without_gpus.empty() ? Decision::kNoFit : Decision::kScored};
  }
  // As Prioritize: the policy's choice (highest (score, fine), ties to the
  // first name) gets 10, the other GPU nodes 0..9 by their policy score.
  const PolicyScore& best = ScaleToExtenderScores(feasible, names, /*all_equal=*/false, &scores);
  // kube-scheduler binds the pod where this score puts it (weight 100: one
  // step outweighs its own scores) and may score the next pods before the
  // pod watch shows that: booked there now (ClusterState::AssumeHostPod).
  // Not when nodes without GPUs tie with it: kube-scheduler's scores choose.
  if (without_gpus.empty()) {
    state_.AssumeHostPod(pod, names[best.i], options_.now ? options_.now() : Clock::now(), counted);
  }
  log_->debug("prioritize (no GPU) {}: {} GPU nodes with room, best {} (policy score {}), {} nodes without GPUs",
              pod.key, feasible.size(), names[best.i], best.score, without_gpus.size());
  return {200, WriteHostPriorityList(args, scores), Decision::kScored};
}

}  // namespace tessera::scheduler
