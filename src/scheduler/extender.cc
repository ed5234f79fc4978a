#include "scheduler/extender.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>
#include <spdlog/spdlog.h>

#include "core/codec.h"
#include "core/fragmentation.h"
#include "core/pod_view.h"
#include "core/podspec.h"
#include "core/preemption.h"
#include "scheduler/rejection.h"
#include "scheduler/wire.h"

namespace tessera::scheduler {
namespace {

constexpr int64_t kFgdRefreshEvery = 4096;
// Pod shapes whose verdicts are cached (one Verdict per node each; a new
// shape beyond them takes the row of the one asked longest ago), and node
// lists whose resolution is kept.
constexpr size_t kMaxShapes = 64;
constexpr size_t kMaxResolutions = 4;
// Bind chooses GPUs, then books them; a node that changed in between is
// read and chosen on again, at most this many times in all.
constexpr int kBindAttempts = 3;
// How long Filter's choice for a pod (filter_returns_best) waits for its
// Bind: kube-scheduler binds right after its scheduling cycle, so an older
// choice was dropped (the pod failed a later step or was deleted); it then
// no longer holds its GPUs for other pods' filters.
constexpr auto kChoiceTtl = std::chrono::seconds(10);

HttpReply BadRequest(const std::shared_ptr<spdlog::logger>& log, std::string_view verb, const Status& status) {
  log->warn("{}: bad request: {}", verb, status.message());
  return {400, std::string(verb) + ": " + status.message() + "\n", Decision::kBadRequest};
}

// "2024-05-01T12:34:56Z"
std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// Reserves on `node` (a copy) the nominated shares held there for other
// pods; returns their keys ("" when none is on this node).
std::string ReserveAll(const ClusterView& view, const std::vector<Nomination>& nominations, core::NodeState* node) {
  std::string holders;
  for (const Nomination& nom : nominations) {
    if (nom.node != node->info.name) continue;
    ReserveNominated(view, nom, node);
    holders += (holders.empty() ? "" : ", ") + nom.key;
  }
  return holders;
}

// Adds to `node` (a copy of a ledger node) the share of a pod that Filter
// chose it for and that is not booked yet, as the ledger would book it.
void ReserveChoice(const core::PodRequest& request, const core::Assignment& assignment, core::NodeState* node) {
  node->cpu_used_milli += request.cpu_milli;
  node->mem_used_mib += request.memory_mib;
  node->pods += 1;
  for (const auto& ca : assignment.containers) {
    for (const auto& s : ca.gpus) {
      if (s.index < 0 || static_cast<size_t>(s.index) >= node->gpus.size()) continue;
      core::GpuUsage& g = node->gpus[static_cast<size_t>(s.index)];
      g.core_used_milli += s.core_milli;
      g.mem_used_mib += s.mem_mib;
      g.sharers += 1;
    }
  }
  if (const int kind = core::GpuPodKind(request); kind >= 0) node->gpu_pod_kinds[kind] += 1;
}

// Whether a one-GPU share Filter chose (`assignment`, for `request`) is
// still free on `node` as it is now: the GPU is the same card, healthy, of a
// model the pod allows, runs MPS if the pod needs it, and has the share's
// compute, memory and a sharer slot free; the node has the pod's CPU and
// memory. False for other pods (more GPUs or containers).
bool ShareStillFits(const core::PodRequest& request, const core::Assignment& assignment, const core::NodeState& node) {
  if (!core::IsSingleShare(request) || assignment.containers.size() != 1 ||
      assignment.containers[0].gpus.size() != 1)
    return false;
  const core::GpuShare& share = assignment.containers[0].gpus[0];
  if (share.index < 0 || static_cast<size_t>(share.index) >= node.info.gpus.size()) return false;
  const int i = share.index;
  const core::GpuInfo& gpu = node.info.gpus[static_cast<size_t>(i)];
  const core::ContainerRequest& c = request.containers[0];
  return share.uuid == gpu.uuid && gpu.healthy && c.models.Allows(gpu.model) &&
         (request.isolation != core::Isolation::kMps || gpu.mps) && request.cpu_milli <= node.CpuFree() &&
         request.memory_mib <= node.MemFree() && node.GpuCoreFree(i) >= share.core_milli &&
         node.GpuMemFree(i) >= share.mem_mib && node.SharerSlotsFree(i) >= 1;
}

}  // namespace

const char* DecisionName(Decision decision) {
  switch (decision) {
    case Decision::kBadRequest: return "bad_request";
    case Decision::kFit: return "fit";
    case Decision::kNoFit: return "no_fit";
    case Decision::kUnschedulable: return "unschedulable";
    case Decision::kScored: return "scored";
    case Decision::kBound: return "bound";
    case Decision::kRefused: return "refused";
    case Decision::kConflict: return "conflict";
    case Decision::kApiError: return "api_error";
    case Decision::kError: return "error";
    case Decision::kVictims: return "victims";
  }
  return "error";
}

Result<std::unique_ptr<Extender>> Extender::Create(ClusterState& state, Binder& binder, ExtenderOptions options) {
  // NAME+kube is the simulator's model of a cluster whose extender runs
  // NAME (core/deployed_policy.h); its tie-break follows the last pod it
  // learned from, which here is not the pod being scored.
  if (options.policy.ends_with(core::kDeployedSuffix))
    return InvalidArgument("policy \"" + options.policy + "\" is the simulator's model of a cluster running \"" +
                           options.policy.substr(0, options.policy.size() - core::kDeployedSuffix.size()) +
                           "\" as the extender; give that name");
  std::unique_ptr<Extender> e(new Extender(state, binder, std::move(options)));
  MutexLock lock(e->policy_mu_);
  TESSERA_RETURN_IF_ERROR(e->MakePolicyLocked(core::TargetWorkload{}));
  return e;
}

Extender::Extender(ClusterState& state, Binder& binder, ExtenderOptions options)
    : state_(state),
      binder_(binder),
      options_(std::move(options)),
      log_(options_.logger ? options_.logger : spdlog::default_logger()),
      claims_rng_(options_.seed),
      pods_(options_.remembered_requests) {}

Status Extender::MakePolicyLocked(const core::TargetWorkload& workload) {
  TESSERA_ASSIGN_OR_RETURN(policy_, core::MakePolicy(options_.policy, core::PolicyConfig{workload, options_.interference,
                                                                                       state_.load_book()}));
  placer_ = std::make_unique<core::Placer>(*policy_, options_.seed);
  verdicts_.clear();
  shapes_.clear();
  shape_keys_.clear();
  shape_used_.clear();
  return Status();
}

// ---- filter ----

std::string UnenforcedRefusal(const core::PodView& pod, const core::PodRequest& req,
                              const std::vector<std::string>& allowed) {
  if (req.isolation != core::Isolation::kNone) return "";
  for (const std::string& ns : allowed) {
    if (ns == "*" || ns == pod.ns) return "";
  }
  return "tessera.io/isolation: none (a share placed but not enforced) is not allowed in namespace " + pod.ns +
         ": tessera-scheduler's isolationNoneNamespaces " +
         (allowed.empty() ? std::string("names none") : "does not name it") +
         "; ask your cluster operator, or remove the annotation to have the share enforced";
}

HttpReply Extender::Filter(std::string_view body) {
  Result<ExtenderArgs> args = ParseExtenderArgs(body, state_.options().resources, &pods_, &node_names_);
  if (!args.ok()) return BadRequest(log_, "filter", args.status());
  const core::PodView& pod = *args->pod;
  const std::string& key = pod.key;
  const Result<core::PodRequest>& req = pod.request;
  const size_t n = args->node_names().size();
  FilterOutcome out;
  if (!req.ok()) {
    const std::string why = req.status().message();
    log_->info("filter {}: cannot be scheduled: {}", key, why);
    for (size_t i = 0; i < n; ++i) out.unresolvable.emplace_back(i, why);
    return {200, WriteFilterResult(*args, out), Decision::kUnschedulable};
  }
  if (std::string why = UnenforcedRefusal(pod, *req, options_.isolation_none_namespaces); !why.empty()) {
    log_->info("filter {}: cannot be scheduled: {}", key, why);
    for (size_t i = 0; i < n; ++i) out.unresolvable.emplace_back(i, why);
    return {200, WriteFilterResult(*args, out), Decision::kUnschedulable};
  }
  const bool detailed = n <= options_.detailed_reasons_max_nodes;
  const SlotAsk slots = SlotsAsked(pod, state_.options().resources);
  std::string problem;
  std::deque<std::string> owned;  // reasons made for this call only
  // Shares held for preempting pods (other than this one) while their victims leave.
  const std::vector<Nomination> nominations =
      options_.preemptor != nullptr ? options_.preemptor->NominationsAgainst(key) : std::vector<Nomination>{};
  const Clock::time_point choice_now = options_.now ? options_.now() : Clock::now();
  // With filter_returns_best: the fitting nodes' scores, to answer the best.
  struct Scored {
    size_t i;
    core::Candidate candidate;
  };
  std::vector<Scored> scored;
  std::string chosen_text;
  // Held until the reply is written: `out` points into the verdict cache.
  MutexLock lock(policy_mu_);
  const bool choose = options_.filter_returns_best && !policy_->ScoresAllEqual();
  if (choose) {
    // A pod filtered again chooses again; other pods' choices not bound yet
    // hold their GPUs, as kube-scheduler's cache holds their nodes.
    choices_.erase(key);
    std::erase_if(choices_, [&](const auto& kv) { return choice_now - kv.second.at > kChoiceTtl; });
  }
  // Other pods' choices by node, so each node below looks up only its own
  // (one pass over the choices, not one per node).
  std::unordered_map<std::string_view, std::vector<std::pair<std::string_view, const Choice*>>> chosen_on;
  if (choose)
    for (const auto& [other, c] : choices_) chosen_on[c.assignment.node].emplace_back(other, &c);
  state_.Read([&](const ClusterView& view) {
    policy_mu_.AssertHeld();  // taken above, around the Read
    problem = ClusterWideProblem(*req, view.Models());
    if (!problem.empty()) return;
    if (choose) {
      LearnWorkloadLocked(view);
      policy_->SeeCluster(view.ledger());
    }
    const std::vector<int>& index = ResolveLocked(view, args->nodes);
    const int shape = ShapeIdLocked(*req);
    const auto& nodes = view.ledger().nodes();
    verdicts_[static_cast<size_t>(shape)].resize(std::max(verdicts_[static_cast<size_t>(shape)].size(), nodes.size()));
    const Clock::time_point now = Clock::now();  // the admission clock (ClusterState's)
    for (size_t i = 0; i < n; ++i) {
      if (index[i] >= 0) {
        const core::NodeState& node = nodes[static_cast<size_t>(index[i])];
        // A node still admitting an earlier pod for longer than the admission
        // wait would hold this pod's bind back: steer it elsewhere (issue 19).
        if (std::string stall = view.AdmissionStall(args->node_names()[i], now); !stall.empty()) {
          out.failed.emplace_back(i, owned.emplace_back(std::move(stall)));
          continue;
        }
        // Other pods' choices here, not bound yet (when choosing).
        const auto on = chosen_on.find(node.info.name);
        // Slots the kubelet has fewer of allocatable than the inventory
        // lists: the choices of the same resource for pods being bound take
        // some once bound, nominated pods some once their victims are gone.
        // Evicting the pods that hold slots frees them, so the node is left
        // to preemption unless the pod asks more than the kubelet has.
        if (slots.count > 0) {
          int64_t also_taken = nominations.empty() ? 0 : NominatedSlots(view, nominations, node.info.name, slots);
          if (on != chosen_on.end()) {
            for (const auto& chosen : on->second)
              if (chosen.second->slots.which == slots.which) also_taken += chosen.second->slots.count;
          }
          if (std::string shortage = view.SlotShortage(static_cast<size_t>(index[i]), slots, also_taken);
              !shortage.empty()) {
            const auto count = view.SlotsFor(static_cast<size_t>(index[i]), slots.which);
            const bool evictions_help = count && slots.count <= count->allocatable;
            (evictions_help ? out.failed : out.unresolvable).emplace_back(i, owned.emplace_back(std::move(shortage)));
            continue;
          }
        }
        // Shares others hold here beyond the ledger: nominations, and (when
        // choosing) other pods' choices not bound yet. The node is judged on a
        // copy with them taken, without the verdict cache.
        // (Copied only for such a node: most nodes have none.)
        std::string holders;
        std::optional<core::NodeState> reserved;
        if (!nominations.empty()) {
          reserved.emplace(node);
          holders = ReserveAll(view, nominations, &*reserved);
        }
        std::string chosen_for;
        if (on != chosen_on.end()) {
          for (const auto& [other, c] : on->second) {
            if (!reserved) reserved.emplace(node);
            ReserveChoice(c->request, c->assignment, &*reserved);
            chosen_for += (chosen_for.empty() ? "" : ", ") + std::string(other);
          }
        }
        if (!holders.empty() || !chosen_for.empty()) {
          // Not a ledger state: version 0 keeps policies from caching by it
          // (fgd keys its fragmentation memo on node address and version).
          reserved->version = 0;
          const core::FitFailure why = core::FitsNode(*req, *reserved);
          if (why == core::FitFailure::kNone) {
            out.passed.push_back(i);
            if (choose) scored.push_back({i, placer_->Score(*req, *reserved)});
          } else {
            Rejection r = ExplainMisfit(*req, *reserved, why, detailed);
            if (!holders.empty()) r.reason += " (share reserved for preempting pod " + holders + ")";
            if (!chosen_for.empty()) r.reason += " (shares chosen for pods being bound: " + chosen_for + ")";
            (r.unresolvable ? out.unresolvable : out.failed).emplace_back(i, owned.emplace_back(std::move(r.reason)));
          }
          continue;
        }
        Verdict& v = VerdictLocked(shape, index[i], *req, node, /*need_score=*/choose);
        if (v.why == core::FitFailure::kNone) {
          out.passed.push_back(i);
          if (choose) scored.push_back({i, v.candidate});
          continue;
        }
        if (v.reason_detail != static_cast<int>(detailed)) {
          Rejection r = ExplainMisfit(*req, node, v.why, detailed);
          v.reason = std::move(r.reason);
          v.unresolvable = r.unresolvable;
          v.reason_detail = detailed;
        }
        (v.unresolvable ? out.unresolvable : out.failed).emplace_back(i, v.reason);
        continue;
      }
      const std::string& name = args->node_names()[i];
      const std::string* reason = nullptr;
      const std::string prefix = detailed ? "node " + name + ": " : "";
      if (view.KindOf(name, &reason) == ClusterView::NodeKind::kNotGpu) {
        out.unresolvable.emplace_back(i, owned.emplace_back(prefix + *reason));
      } else {
        out.failed.emplace_back(i, owned.emplace_back(prefix + "not seen by tessera-scheduler's node watch yet"));
      }
    }
    if (scored.empty()) return;
    // The placer's choice, as Prioritize ranks: highest (score, fine), ties
    // to the first node by name. Only it is answered; it and its GPUs are
    // remembered for Bind, and other pods' filters count them as taken.
    const Scored* best = &scored[0];
    for (const Scored& c : scored) {
      if (RanksBefore({c.i, c.candidate.score, c.candidate.fine},
                      {best->i, best->candidate.score, best->candidate.fine}, args->node_names()))
        best = &c;
    }
    const core::NodeState& node = nodes[static_cast<size_t>(index[best->i])];
    Choice choice{pod.uid, *req, core::MakeAssignment(*req, node, best->candidate.pick), node.version, choice_now,
                  slots};
    chosen_text = " (answered " + node.info.name + ", GPUs " + DescribeAssignment(choice.assignment) + ")";
    if (choices_.size() >= options_.remembered_requests) choices_.clear();  // many pods never bound: start over
    choices_.insert_or_assign(key, std::move(choice));
    out.passed.assign(1, best->i);
  });
  if (!problem.empty()) {
    log_->info("filter {}: cannot be scheduled: {}", key, problem);
    for (size_t i = 0; i < n; ++i) out.unresolvable.emplace_back(i, problem);
    return {200, WriteFilterResult(*args, out), Decision::kUnschedulable};
  }
  const size_t fit = scored.empty() ? out.passed.size() : scored.size();
  log_->info("filter {}: {}/{} nodes fit{}", key, fit, n, chosen_text);
  if (out.passed.empty() && n > 0) {
    rejected_.Note(key, pod.uid, options_.now ? options_.now() : Clock::now());
    if (options_.preemptor != nullptr && options_.preemptor->enabled() && !out.failed.empty() &&
        pod.may_preempt) {
      PreemptionRequest pr;
      pr.key = key;
      pr.uid = pod.uid;
      pr.priority = pod.priority;
      pr.request = *req;
      pr.slots = slots;
      for (const auto& [i, reason] : out.failed) pr.nodes.push_back(args->node_names()[i]);
      options_.preemptor->Request(std::move(pr));
    }
  } else {
    rejected_.Forget(key);
  }
  if (log_->should_log(spdlog::level::debug)) {
    for (const auto* list : {&out.failed, &out.unresolvable})
      for (const auto& [i, reason] : *list) log_->debug("filter {}: {} rejected: {}", key, args->node_names()[i], reason);
  }
  return {200, WriteFilterResult(*args, out), out.passed.empty() ? Decision::kNoFit : Decision::kFit};
}

// ---- prioritize ----

HttpReply Extender::Prioritize(std::string_view body) {
  Result<ExtenderArgs> args = ParseExtenderArgs(body, state_.options().resources, &pods_, &node_names_);
  if (!args.ok()) return BadRequest(log_, "prioritize", args.status());
  const std::string& key = args->pod->key;
  const Result<core::PodRequest>& req = args->pod->request;
  const std::vector<std::string>& names = args->node_names();
  std::vector<int64_t> scores(names.size(), 0);
  if (!req.ok()) return {200, WriteHostPriorityList(*args, scores), Decision::kUnschedulable};

  std::vector<PolicyScore> feasible;
  bool all_equal = false;
  const std::vector<Nomination> nominations =
      options_.preemptor != nullptr ? options_.preemptor->NominationsAgainst(key) : std::vector<Nomination>{};
  {
    MutexLock lock(policy_mu_);
    all_equal = policy_->ScoresAllEqual();
    state_.Read([&](const ClusterView& view) {
      policy_mu_.AssertHeld();  // taken above, around the Read
      LearnWorkloadLocked(view);
      policy_->SeeCluster(view.ledger());
      const std::vector<int>& index = ResolveLocked(view, args->nodes);
      const int shape = ShapeIdLocked(*req);
      const auto& nodes = view.ledger().nodes();
      for (size_t i = 0; i < names.size(); ++i) {
        if (index[i] < 0) continue;
        if (!nominations.empty()) {
          core::NodeState reserved = nodes[static_cast<size_t>(index[i])];
          if (!ReserveAll(view, nominations, &reserved).empty()) {
            if (core::FitsNode(*req, reserved) == core::FitFailure::kNone) {
              const core::Candidate c = placer_->Score(*req, reserved);
              feasible.push_back({i, c.score, c.fine});
            }
            continue;
          }
        }
        const Verdict& v = VerdictLocked(shape, index[i], *req, nodes[static_cast<size_t>(index[i])], true);
        if (v.why == core::FitFailure::kNone) feasible.push_back({i, v.candidate.score, v.candidate.fine});
      }
    });
  }
  if (feasible.empty()) return {200, WriteHostPriorityList(*args, scores), Decision::kNoFit};
  const PolicyScore& best = ScaleToExtenderScores(feasible, names, all_equal, &scores);
  log_->debug("prioritize {}: {} feasible of {}, best {} (policy score {}) policy={}", key, feasible.size(),
              names.size(), names[best.i], best.score, options_.policy);
  return {200, WriteHostPriorityList(*args, scores), Decision::kScored};
}

void Extender::RememberPendingPod(std::shared_ptr<const core::PodView> pod) {
  if (pod == nullptr || !pod->node.empty() || pod->terminal() || pod->terminating || pod->resource_version.empty())
    return;
  pods_.Remember(std::move(pod));
}

// ---- bind ----

HttpReply Extender::Bind(std::string_view body) {
  Result<BindingArgs> args = ParseBindingArgs(body);
  if (!args.ok()) return BadRequest(log_, "bind", args.status());
  const std::string key = args->pod_namespace + "/" + args->pod_name;
  auto fail = [&](const std::string& message, Decision decision) {
    log_->warn("bind {} -> node {} refused: {}", key, args->node, message);
    return HttpReply{200, WriteBindingResult(message), decision};
  };
  if (options_.may_bind) {
    if (Status gate = options_.may_bind(); !gate.ok()) return fail("bind refused: " + gate.message(), Decision::kRefused);
  }
  const Clock::time_point now = options_.now ? options_.now() : Clock::now();
  state_.ExpireAssumed(now);
  Result<BindAsk> ask = RequestForBind(key, args->pod_uid);
  if (!ask.ok()) return fail(ask.status().message(), Decision::kError);

  const std::vector<Nomination> nominations =
      options_.preemptor != nullptr ? options_.preemptor->NominationsAgainst(key) : std::vector<Nomination>{};
  std::string source;  // for the log: whose GPU choice was booked
  Result<core::Assignment> assignment = PickAndAssume(*ask, args->pod_uid, args->node, nominations, now, &source);
  if (!assignment.ok()) return fail(assignment.status().message(), Decision::kConflict);
  Result<std::string> text = core::EncodeAssignment(*assignment);
  if (!text.ok()) {
    (void)state_.ForgetAssumed(key);
    return fail(text.status().message(), Decision::kError);
  }
  // The share is held (filters see it); the Binding waits for the node's
  // admission turn, without the policy lock, so other binds go on meanwhile.
  if (Status turn = state_.ClaimAdmissionTurn(key, std::chrono::steady_clock::now() + state_.admission_wait());
      !turn.ok()) {
    (void)state_.ForgetAssumed(key);
    return fail(turn.message(), Decision::kConflict);
  }
  const auto wall = options_.wall_now ? options_.wall_now() : std::chrono::system_clock::now();
  const std::map<std::string, std::string> annotations = {
      {std::string(core::kAssignmentAnnotation), *text}, {std::string(core::kAssignedAtAnnotation), Rfc3339(wall)}};
  // No lock is held here: the API call may take a while.
  const auto api_start = std::chrono::steady_clock::now();
  if (Status st = binder_.Bind(args->pod_namespace, args->pod_name, args->pod_uid, args->node, annotations);
      !st.ok()) {
    Status forgot = state_.ForgetAssumed(key);
    log_->warn("bind {} -> node {} failed: {}; {}", key, args->node, st.message(),
               forgot.ok() ? "its share is released" : forgot.message());
    return HttpReply{200, WriteBindingResult("binding pod " + key + " to node " + args->node + ": " + st.message()),
                     Decision::kApiError};
  }
  const auto api_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - api_start).count();
  log_->info("bind {} -> node {} GPUs {} policy={} api={:.1f}ms ({})", key, args->node,
             DescribeAssignment(*assignment), options_.policy, api_ms, source);
  if (options_.preemptor != nullptr) options_.preemptor->Forget(key);
  return {200, WriteBindingResult(""), Decision::kBound};
}

Result<Extender::BindPick> Extender::PickForBind(const BindAsk& ask, const std::string& uid, const std::string& node,
                                                 const std::vector<Nomination>& nominations, bool take_choice,
                                                 std::optional<Choice>& chosen) {
  const core::PodRequest& req = ask.request;
  MutexLock lock(policy_mu_);
  // Filter's choice for this pod (filter_returns_best), taken on the first
  // try: booked if it is still good, else the GPUs are chosen again.
  if (take_choice) chosen = TakeChoiceLocked(req.key, uid, node, req);
  // One read of the state: the node, the victims' shares nominations keep
  // free, and what the policy weighs (the ledger, tessera-interference's
  // load book) are all guarded by its mutex. Nothing here writes the state.
  return state_.Read([&](const ClusterView& view) -> Result<BindPick> {
    policy_mu_.AssertHeld();  // taken above, around the Read
    TESSERA_ASSIGN_OR_RETURN(const core::NodeState* target, view.BindTarget(req.key, node));
    const core::NodeState& current = *target;
    // Filter may have counted the node's slots before binds it did not
    // choose for took theirs (kube-scheduler filters the next pod while the
    // last one binds): counted again here, on the version Assume books against.
    if (std::string shortage =
            view.SlotShortage(static_cast<size_t>(target - view.ledger().nodes().data()), ask.slots,
                              NominatedSlots(view, nominations, node, ask.slots));
        !shortage.empty())
      return ResourceExhausted("pod " + req.key + " no longer fits: " + shortage);
    policy_->SeeCluster(view.ledger());
    core::NodeState reserved;
    std::string holders;
    if (!nominations.empty()) {
      reserved = current;
      holders = ReserveAll(view, nominations, &reserved);
    }
    const core::NodeState& effective = holders.empty() ? current : reserved;
    if (chosen) {
      // Unchanged node: what Filter saw. Changed (pods booked or gone since,
      // a nomination made): a one-GPU share still free on its GPU is kept.
      if ((chosen->node_version == current.version && holders.empty()) ||
          ShareStillFits(req, chosen->assignment, effective))
        return BindPick{chosen->assignment, current.version, "chosen in filter"};
    }
    const core::FitFailure why = core::FitsNode(req, effective);
    if (why != core::FitFailure::kNone)
      return ResourceExhausted("pod " + req.key + " no longer fits: " +
                               ExplainMisfit(req, effective, why, /*detailed=*/true).reason +
                               (holders.empty() ? "" : " (share reserved for preempting pod " + holders + ")"));
    return BindPick{core::MakeAssignment(req, current, placer_->Score(req, effective).pick), current.version,
                    chosen ? "filter's choice was stale, chosen again" : "chosen in bind"};
  });
}

Result<core::Assignment> Extender::PickAndAssume(const BindAsk& ask, const std::string& uid,
                                                 const std::string& node, const std::vector<Nomination>& nominations,
                                                 Clock::time_point now, std::string* source) {
  const core::PodRequest& req = ask.request;
  MutexLock serial(bind_mu_);
  std::optional<Choice> chosen;
  for (int attempt = 1;; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(BindPick pick, PickForBind(ask, uid, node, nominations, attempt == 1, chosen));
    if (options_.after_pick_for_test) options_.after_pick_for_test(req.key, pick.assignment);
    Result<core::Assignment> booked = state_.Assume(req, ask.slots, uid, pick.assignment, pick.node_version, now);
    if (source != nullptr) *source = pick.source;
    if (booked.ok() || booked.status().code() != StatusCode::kUnavailable) return booked;
    log_->debug("bind {} -> node {}: attempt {}: {}", req.key, node, attempt, booked.status().message());
    if (attempt == kBindAttempts)
      return Status(StatusCode::kUnavailable, "pod " + req.key + ": node " + node +
                     " changed between the choice of its GPUs and their booking " + std::to_string(kBindAttempts) +
                     " times in a row (pods placed or released there meanwhile); kube-scheduler will try the pod "
                     "again");
  }
}

// ---- preempt ----

HttpReply Extender::Preempt(std::string_view body) {
  Result<PreemptionArgs> args = ParsePreemptionArgs(body, state_.options().resources, &pods_);
  if (!args.ok()) return BadRequest(log_, "preempt", args.status());
  const std::string& key = args->pod->key;
  // kube-scheduler's preemption drives this pod now; ours stands aside.
  if (options_.preemptor != nullptr) options_.preemptor->NoteSchedulerPreemption(args->pod->uid);
  const Result<core::PodRequest>& req = args->pod->request;
  if (!req.ok()) {
    log_->info("preempt {}: no node: {}", key, req.status().message());
    return {200, WritePreemptionResult({}), Decision::kUnschedulable};
  }
  const int32_t priority = args->pod->priority;
  const SlotAsk slots = SlotsAsked(*args->pod, state_.options().resources);
  const std::vector<Nomination> nominations =
      options_.preemptor != nullptr ? options_.preemptor->NominationsAgainst(key) : std::vector<Nomination>{};
  core::PreemptionOptions plan_options;
  plan_options.now_unix = std::chrono::duration_cast<std::chrono::seconds>(
                              (options_.wall_now ? options_.wall_now() : std::chrono::system_clock::now())
                                  .time_since_epoch())
                              .count();
  plan_options.max_victims = options_.preemptor != nullptr ? options_.preemptor->options().max_victims : 0;
  std::vector<NodeVictims> kept;
  std::string dropped;
  // Filter's choices for other pods being bound take their slots too (as in
  // Filter), counted per node first: the planning below runs without the
  // policy lock, so Filter calls do not wait for it.
  std::unordered_map<std::string, int64_t> chosen_slots;
  if (slots.count > 0) {
    const Clock::time_point choice_now = options_.now ? options_.now() : Clock::now();
    MutexLock lock(policy_mu_);
    for (const auto& [other, c] : choices_) {
      if (other != key && c.slots.which == slots.which && choice_now - c.at <= kChoiceTtl)
        chosen_slots[c.assignment.node] += c.slots.count;
    }
  }
  state_.Read([&](const ClusterView& view) {
    for (const NodeVictims& given : args->nodes) {
      const core::NodeState* node = view.ledger().FindNode(given.node);
      if (node == nullptr) {
        dropped += " " + given.node + " (not a GPU node known to tessera-scheduler)";
        continue;
      }
      int64_t also_taken = NominatedSlots(view, nominations, given.node, slots);
      if (auto c = chosen_slots.find(given.node); c != chosen_slots.end()) also_taken += c->second;
      core::PreemptionNode pn = view.PreemptionNodeOf(static_cast<size_t>(node - view.ledger().nodes().data()),
                                                      slots, also_taken);
      (void)ReserveAll(view, nominations, &pn.node);
      // Pods without GPUs that kube-scheduler names as victims give back
      // their CPU and memory (the plan evicts only GPU pods of its own).
      for (const ClusterView::HostPod& host : view.HostPodsOn(given.node)) {
        if (std::find(given.uids.begin(), given.uids.end(), host.uid) == given.uids.end()) continue;
        pn.node.cpu_used_milli -= host.cpu_milli;
        pn.node.mem_used_mib -= host.memory_mib;
      }
      pn.forced_uids = given.uids;
      std::optional<core::PreemptionPlan> plan = core::PlanOnNode(*req, priority, pn, plan_options);
      if (!plan) {
        dropped += " " + given.node;
        continue;
      }
      NodeVictims out = given;
      for (const auto& v : plan->victims) {
        if (std::find(out.uids.begin(), out.uids.end(), v.uid) == out.uids.end()) out.uids.push_back(v.uid);
      }
      kept.push_back(std::move(out));
    }
  });
  size_t added = 0;
  for (size_t k = 0; k < kept.size(); ++k) {
    for (const auto& given : args->nodes)
      if (given.node == kept[k].node) added += kept[k].uids.size() - given.uids.size();
  }
  log_->info("preempt {} (priority {}): {}/{} candidate nodes keep room for its GPU shares, {} GPU victim(s) added{}{}",
             key, priority, kept.size(), args->nodes.size(), added, dropped.empty() ? "" : "; dropped:", dropped);
  return {200, WritePreemptionResult(kept), kept.empty() ? Decision::kNoFit : Decision::kVictims};
}

// ---- policy, verdict cache, workload ----

void Extender::LearnWorkloadLocked(const ClusterView& view) {
  const std::vector<core::PodRequest> fresh = view.NewHoldsSince(&holds_cursor_);
  if (fresh.empty()) return;
  for (const auto& pod : fresh) policy_->OnArrival(pod);
  learned_ += static_cast<int64_t>(fresh.size());
  if (options_.policy == "fgd" && learned_ >= next_rebuild_) {
    // FGD is given a fixed target workload: rebuild it from the live pods.
    const core::TargetWorkload workload = core::TypicalWorkload(view.HeldRequests(), 0.95);
    if (Status st = MakePolicyLocked(workload); !st.ok()) log_->error("fgd: {}", st.message());
    next_rebuild_ = std::min(learned_ * 2, learned_ + kFgdRefreshEvery);
    log_->info("fgd: target workload rebuilt from {} live pods: {} classes", view.ledger().pod_count(),
               workload.classes.size());
  }
}

int Extender::ShapeIdLocked(const core::PodRequest& pod) {
  std::string key = core::ShapeKey(pod, *policy_);
  ++shape_clock_;
  if (auto it = shapes_.find(key); it != shapes_.end()) {
    shape_used_[static_cast<size_t>(it->second)] = shape_clock_;
    return it->second;
  }
  // A new shape: a new row, or, at kMaxShapes, the row of the shape used
  // longest ago (pods without GPUs bring many shapes; the GPU pods' rows
  // stay while they are asked for).
  size_t id = verdicts_.size();
  if (id < kMaxShapes) {
    verdicts_.emplace_back();
    shape_keys_.emplace_back();
    shape_used_.push_back(0);
  } else {
    id = static_cast<size_t>(std::min_element(shape_used_.begin(), shape_used_.end()) - shape_used_.begin());
    shapes_.erase(shape_keys_[id]);
    verdicts_[id].clear();
  }
  shape_keys_[id] = key;
  shape_used_[id] = shape_clock_;
  shapes_.emplace(std::move(key), static_cast<int>(id));
  return static_cast<int>(id);
}

Extender::Verdict& Extender::VerdictLocked(int shape, int node_index, const core::PodRequest& pod,
                                           const core::NodeState& node, bool need_score) {
  std::vector<Verdict>& row = verdicts_[static_cast<size_t>(shape)];
  if (row.size() <= static_cast<size_t>(node_index)) row.resize(static_cast<size_t>(node_index) + 1);
  Verdict& v = row[static_cast<size_t>(node_index)];
  if (v.version != node.version + 1) {  // another state of the node, or another node at this index
    v.version = node.version + 1;
    v.epoch = 0;
    v.why = core::FitsNode(pod, node);
    v.reason_detail = -1;
  }
  const uint64_t epoch = policy_->epoch() + 1;
  if (need_score && v.why == core::FitFailure::kNone && (v.epoch != epoch || !policy_->Cacheable())) {
    v.candidate = placer_->Score(pod, node);
    v.epoch = epoch;
  }
  return v;
}

const std::vector<int>& Extender::ResolveLocked(const ClusterView& view,
                                                const std::shared_ptr<const NodeNamesCache::List>& nodes) {
  const uint64_t topology = view.topology_version();
  for (auto it = resolutions_.begin(); it != resolutions_.end(); ++it) {
    // The same shared list (NodeNamesCache) needs no comparison of names.
    if (it->topology != topology || (it->nodes != nodes && it->nodes->names != nodes->names)) continue;
    std::rotate(it, it + 1, resolutions_.end());  // most recently used last
    return resolutions_.back().index;
  }
  if (resolutions_.size() >= kMaxResolutions) resolutions_.erase(resolutions_.begin());
  Resolution r;
  r.topology = topology;
  r.nodes = nodes;
  r.index.reserve(nodes->names.size());
  for (const auto& name : nodes->names) r.index.push_back(view.ledger().NodeIndex(name));
  resolutions_.push_back(std::move(r));
  return resolutions_.back().index;
}

// ---- filter's choices ----

std::optional<Extender::Choice> Extender::TakeChoiceLocked(const std::string& key, const std::string& uid,
                                                           const std::string& node, const core::PodRequest& req) {
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  Choice choice = std::move(it->second);
  choices_.erase(it);
  // Another pod of the same name, another node than Filter answered, or a
  // request that changed since: not this bind's choice.
  if ((!uid.empty() && !choice.uid.empty() && uid != choice.uid) || choice.assignment.node != node ||
      !(choice.request == req))
    return std::nullopt;
  return choice;
}

// ---- pod requests ----

Result<BindAsk> Extender::RequestForBind(const std::string& key, const std::string& uid) {
  Result<BindAsk> from_watch = state_.PendingRequest(key, uid);
  if (from_watch.ok() || from_watch.status().code() != StatusCode::kNotFound) return from_watch;
  if (std::shared_ptr<const core::PodView> pod = pods_.Latest(uid); pod != nullptr && pod->key == key) {
    if (!pod->request.ok()) return pod->request.status();
    return BindAsk{*pod->request, SlotsAsked(*pod, state_.options().resources)};
  }
  return NotFound("pod " + key + (uid.empty() ? "" : " (uid " + uid + ")") +
                  " is unknown: not seen by the pod watch nor in a filter call");
}

}  // namespace tessera::scheduler
