// The Extender's verbs for DRA claim pods (extender.h, "PrioritizeClaims"):
// kube-scheduler's second extenders entry, without managedResources (so it
// is asked about every pod) and without bind. Pods without GPUs are scored
// in extender_host.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "core/dra_allocator.h"
#include "scheduler/dra_objects.h"
#include "scheduler/extender.h"
#include "scheduler/wire.h"

namespace tessera::scheduler {
namespace {

// Whether kube-scheduler's body may hold a pod with claims: its spec names
// "resourceClaims". Pods without claims (most) are answered from this scan,
// without decoding the body; a false positive only costs the decoding.
bool MayHaveClaims(std::string_view body) { return body.find("\"resourceClaims\"") != std::string_view::npos; }

HttpReply BadClaimsRequest(const std::shared_ptr<spdlog::logger>& log, std::string_view verb, const Status& status) {
  log->warn("{} (claims): bad request: {}", verb, status.message());
  return {400, std::string(verb) + ": " + status.message() + "\n", Decision::kBadRequest};
}

}  // namespace

HttpReply Extender::FilterClaims(std::string_view body) {
  Result<ExtenderArgs> args = ParseExtenderArgs(body, state_.options().resources, &pods_, &node_names_);
  if (!args.ok()) return BadClaimsRequest(log_, "filter", args.status());
  FilterOutcome out;
  for (size_t i = 0; i < args->node_names().size(); ++i) out.passed.push_back(i);
  return {200, WriteFilterResult(*args, out), Decision::kFit};
}

HttpReply Extender::PrioritizeClaims(std::string_view body) {
  const bool may_have_claims = MayHaveClaims(body);
  if (!may_have_claims && !options_.place_pods_without_gpus) return {200, "[]", Decision::kScored};
  Result<ExtenderArgs> args = ParseExtenderArgs(body, state_.options().resources, &pods_, &node_names_);
  if (!args.ok()) return BadClaimsRequest(log_, "prioritize", args.status());
  const core::PodView& pod = *args->pod;
  // The scan can be wrong the other way only (the word in an annotation,
  // say): the decoded pod decides.
  if (pod.claims.empty()) {
    if (!options_.place_pods_without_gpus) return {200, "[]", Decision::kScored};
    // A GPU pod is the first entry's (with filterReturnsBest kube-scheduler
    // does not even score it); the others are scored as pods without GPUs.
    if (pod.wants_gpu) return {200, "[]", Decision::kScored};
    // A pod with placement preferences of its own (soft affinity, spreading
    // that may be broken) keeps them: kube-scheduler's scores decide.
    if (pod.prefers_placement) return {200, "[]", Decision::kScored};
    // A pod that asks for no CPU and no memory (BestEffort) strands nothing
    // anywhere: every node would tie, and the first name would take them all.
    if (pod.host.cpu_milli == 0 && pod.host.memory_mib == 0) return {200, "[]", Decision::kScored};
    return PrioritizeWithoutGpus(*args);
  }
  const std::vector<std::string>& names = args->node_names();

  std::vector<PolicyScore> feasible;
  Status asked_status;
  {
    MutexLock lock(policy_mu_);
    state_.Read([&](const ClusterView& view) {
      policy_mu_.AssertHeld();  // taken above, around the Read
      Result<DraPodRequest> asked =
          DraPodRequestOf(pod, [&](const std::string& key) { return view.Claim(key); });
      if (!asked.ok()) {
        asked_status = asked.status();
        return;
      }
      LearnWorkloadLocked(view);
      policy_->SeeCluster(view.ledger());
      const std::vector<int>& index = ResolveLocked(view, args->nodes);
      const auto& nodes = view.ledger().nodes();
      for (size_t i = 0; i < names.size(); ++i) {
        if (index[i] < 0) continue;
        const std::vector<int>* order = view.DraDeviceOrder(names[i]);
        if (order == nullptr) continue;
        const core::NodeState& node = nodes[static_cast<size_t>(index[i])];
        const core::PodRequest req = asked->On(node);
        core::GpuPick pick;
        if (!core::AllocatorPick(req, node, *order, &pick)) continue;
        feasible.push_back({i, policy_->ScorePick(req, node, pick, claims_rng_), 0});
      }
    });
  }
  // No opinion: no claim of the driver to place, or one not modelled.
  if (!asked_status.ok()) {
    log_->debug("prioritize (claims) {}: no opinion: {}", pod.key, asked_status.message());
    return {200, "[]", Decision::kScored};
  }
  std::vector<int64_t> scores(names.size(), 0);
  if (feasible.empty()) {
    log_->info("prioritize (claims) {}: none of the {} nodes has room for its claims in the ledger", pod.key,
               names.size());
    return {200, WriteHostPriorityList(*args, scores), Decision::kNoFit};
  }
  // As Prioritize: the best (ties to the first name) gets 10, the others 0..9.
  const PolicyScore& best = ScaleToExtenderScores(feasible, names, /*all_equal=*/false, &scores);
  log_->info("prioritize (claims) {}: {} of {} nodes have room, best {} (policy score {})", pod.key, feasible.size(),
             names.size(), names[best.i], best.score);
  return {200, WriteHostPriorityList(*args, scores), Decision::kScored};
}

}  // namespace tessera::scheduler
