// Extender: kube-scheduler's filter, prioritize and bind verbs, answered from
// a ClusterState and independent of HTTP (server.h serves them). Bodies and
// replies use the extender wire format (wire.h).
//
//  - Filter keeps the nodes where the pod's GPU shares fit and gives every
//    other node a reason a person can act on. A pod the user got wrong (150 %
//    core, an unknown model, more memory than any GPU) is answered 200 with
//    every node unresolvable under that message, so the pod's
//    FailedScheduling event shows it; only a body that is not an
//    ExtenderArgs is answered 400.
//  - With filter_returns_best, Filter answers only the fitting node the
//    policy would choose (as Prioritize ranks them) and remembers the GPUs it
//    would take there, so kube-scheduler, given one feasible node, neither
//    scores nodes nor calls prioritize. Until its Bind (or kChoiceTtl, 10 s),
//    other pods' filters count that choice as taken.
//  - Prioritize scores the feasible nodes 0..10 with the placement policy:
//    the node the policy's placer would choose (best score, ties to the first
//    name, so equal nodes fill in a fixed order) gets 10, the others are
//    scaled into 0..9 by their policy score, infeasible nodes get 0. Policies
//    that score all nodes alike (random) give every feasible node 10.
//    Verdicts are cached per (pod shape, node version), so a cycle over
//    thousands of nodes recomputes only the nodes that changed.
//  - Preempt (kube-scheduler's preempt verb, called when its own dry run
//    found victims, e.g. for CPU) adds to each candidate node's victims the
//    lower-priority GPU pods that must also leave for the pod's GPU shares
//    (and the device-plugin slots of a node whose kubelet is short of them)
//    to fit, and drops nodes where no set would do.
//  - With a GpuPreemptor (preemptor.h), Filter hands a pod that fits nowhere
//    and may preempt to it, and Filter, Prioritize and Bind keep the shares
//    (Filter and Bind: and the slots) nominated for preempting pods free for
//    them.
//  - Bind books Filter's choice when the node is unchanged since, or (a
//    one-GPU share) its GPU still has the share free; otherwise, or without a
//    choice, it picks the GPUs on the chosen node with the policy. The pick
//    is made from one read of the state (ClusterState::Read) and booked with
//    one call, ClusterState::Assume, which refuses it when the node changed
//    since the read (UNAVAILABLE: Bind reads and picks again, at most 3
//    times in all) and has the ledger check the fit again. Then it calls the
//    Binder (without holding any lock) with the tessera.io/assignment and
//    tessera.io/assigned-at annotations. On failure the share is released and
//    the error returned in ExtenderBindingResult.Error (HTTP 200), so
//    kube-scheduler retries.
//  - PrioritizeClaims and FilterClaims answer kube-scheduler's second
//    extenders entry, for pods whose GPUs are DRA ResourceClaims of
//    Tessera's driver (extender_claims.cc; docs/notes/dra.md, "Placement
//    under DRA"). kube-scheduler's allocator picks a claim's GPUs (first fit
//    in the node's ResourceSlice order), so PrioritizeClaims scores each node
//    by the GPUs the allocator will take there: core::AllocatorPick over the
//    node's slice order (ClusterView::DraDeviceOrder), then the policy's
//    ScorePick, scaled as Prioritize scales. A pod with claims of no such
//    class gets an empty list (no opinion; to kube-scheduler the same as one
//    equal score); without place_pods_without_gpus, so does every pod
//    without claims, found by a scan of the body for "resourceClaims"
//    without decoding it. FilterClaims passes every node (the allocator
//    filtered).
//  - With place_pods_without_gpus, the second entry's prioritize also scores
//    pods that ask for no GPU (extender_host.cc): the policy scores each GPU
//    node by the CPU and memory the pod would take there (what that strands
//    of the GPUs), as the simulator places such pods; a node without GPUs
//    strands none and gets 10, as the best GPU node does. The pod is then
//    bound by kube-scheduler and booked by ClusterState as a pod without
//    GPUs; when only GPU nodes were scored it is booked on the best one at
//    once (ClusterState::AssumeHostPod), since kube-scheduler may score the
//    next pods before the pod watch shows the binding. Pods that ask for a GPU get an empty list there (the first entry
//    places them), and so do pods with placement preferences of their own
//    (core::PodView::prefers_placement), which kube-scheduler's scores keep,
//    and pods that ask for no CPU and no memory (every node would tie).
// Policies that need a view of the workload learn it from the pods that hold
// shares (tessera: as arrivals; fgd: its target workload is rebuilt from the
// live pods as their number doubles, and at least every 4096 new pods);
// tessera-interference reads the predicted GPU loads the state keeps from
// the node agents' usage reports (load_tracker.h).
//
// Thread-safety: all methods may be called from any thread at once. Filter,
// prioritize and the GPU choice of bind take turns on the policy's mutex
// (policy_mu_: the policy, the placer and the verdict cache), each holding
// it around one ClusterState::Read; the booking (ClusterState::Assume), the
// admission wait and the binder call run outside it. Binds take their pick
// and booking in turns (bind_mu_), so the extender's own binds never make
// each other's choice stale; only informer events can. Lock order:
// bind_mu_, policy_mu_, the state's mutex, the preemptor's.
//
//   ClusterState state(ClusterStateOptions{});
//   auto extender = Extender::Create(state, binder, ExtenderOptions{});
//   HttpReply r = (*extender)->Filter(body);  // r.status 200, r.body ExtenderFilterResult
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model.h"
#include "core/placer.h"
#include "core/policy.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "scheduler/cluster_state.h"
#include "scheduler/node_names_cache.h"
#include "scheduler/pod_view_cache.h"
#include "scheduler/preemptor.h"
#include "scheduler/rejected_pods.h"

namespace tessera::scheduler {

struct ExtenderArgs;  // wire.h

// What a verb call decided, for tessera_scheduler_decisions_total (and
// tests): the reply's body says it to kube-scheduler, this says it to people.
enum class Decision : uint8_t {
  kBadRequest,     // any verb: the body is not what kube-scheduler sends (400)
  kFit,            // filter: at least one node fits
  kNoFit,          // filter, prioritize: no node fits now
  kUnschedulable,  // filter, prioritize: no node could ever fit the request as written
  kScored,         // prioritize: the feasible nodes were scored
  kBound,          // bind: the Binding was posted
  kRefused,        // bind: this replica may not bind now (standby, caches not synced)
  kConflict,       // bind: the pod no longer fits the chosen node, holds a share already, or the node kept changing
  kApiError,       // bind: the API server failed or refused the Binding
  kError,          // bind: the pod is unknown or its assignment cannot be written
  kVictims,        // preempt: at least one node can take the pod once its victims leave
};
inline constexpr size_t kDecisionCount = 11;
// The label value: "bad_request", "fit", "no_fit", ...
const char* DecisionName(Decision decision);

struct HttpReply {
  int status = 200;
  std::string body;
  Decision decision = Decision::kError;
};

// Posts a pod's Binding (with annotations) to the API server. Implemented by
// the Kubernetes client in production, by fakes in tests.
class Binder {
 public:
  virtual ~Binder() = default;
  // OK when the API server bound the pod to `node` and merged `annotations`
  // into it; any error otherwise (the extender then releases the share).
  virtual Status Bind(const std::string& pod_namespace, const std::string& pod_name, const std::string& pod_uid,
                      const std::string& node, const std::map<std::string, std::string>& annotations) = 0;
};

struct ExtenderOptions {
  // Placement policy (core MakePolicy name). Default "tessera".
  std::string policy = "tessera";
  // Seeds the policy's random choices.
  uint64_t seed = 1;
  // Where decisions are logged; nullptr: spdlog's default logger.
  std::shared_ptr<spdlog::logger> logger;
  // Asked before every bind; a non-OK status refuses the bind with its
  // message (e.g. "this replica is not the leader"). nullptr: always bind.
  std::function<Status()> may_bind;
  // Monotonic clock for assumptions and their expiry. nullptr: steady_clock.
  std::function<Clock::time_point()> now;
  // Wall clock for tessera.io/assigned-at. nullptr: system_clock.
  std::function<std::chrono::system_clock::time_point()> wall_now;
  // Requests with at most this many nodes get per-node detail in rejection
  // reasons ("node n3: ...; largest free share is ..."); larger ones get
  // reasons that kube-scheduler can group. Default 64.
  size_t detailed_reasons_max_nodes = 64;
  // Pods remembered by uid from filter, prioritize and preempt calls
  // (PodViewCache): decoded once per uid and resourceVersion across the
  // verbs, and their requests used by Bind when the pod watch has not
  // delivered the pod. Default 4096.
  size_t remembered_requests = 4096;
  // GPU preemption (must outlive the extender). nullptr: none, and no
  // nominations are kept free; the preempt verb still answers.
  GpuPreemptor* preemptor = nullptr;
  // tessera-interference's knobs; it scores with the state's predicted GPU
  // loads (ClusterState::load_book).
  core::InterferenceOptions interference;
  // Tests only: called by Bind between its choice of GPUs and their booking,
  // with the pod's key and the choice, holding no lock but the bind turn (so
  // it must not call Bind), e.g. to change the node meanwhile. nullptr: none.
  std::function<void(const std::string& pod_key, const core::Assignment& chosen)> after_pick_for_test;
  // Filter answers only the node the policy chooses among those that fit
  // (the best-scored, ties to the first name) instead of all of them; nodes
  // that do not fit keep their reasons. kube-scheduler then takes that node
  // without scoring and without a prioritize call. Policies that score every
  // node alike (random) still answer every fitting node. Default false here;
  // tessera-scheduler's configuration turns it on (filterReturnsBest).
  bool filter_returns_best = false;
  // The second entry's prioritize (PrioritizeClaims) also scores pods that
  // ask for no GPU and hold no claim, with the policy, so they land where
  // they strand the least GPU capacity instead of where kube-scheduler's
  // spreading puts them. Default false here; tessera-scheduler's
  // configuration turns it on (placePodsWithoutGpus).
  bool place_pods_without_gpus = false;
  // Namespaces whose pods may ask tessera.io/isolation: none ("*": any).
  // Filter finds no node for such a pod elsewhere, saying why: a container
  // without enforcement can take more of a shared GPU than it booked, so the
  // operator chooses who may. Default: none may.
  std::vector<std::string> isolation_none_namespaces;
};

// "" when `req` is enforced or its namespace is among `allowed`
// (ExtenderOptions::isolation_none_namespaces); else why tessera.io/isolation:
// none is refused there, for Filter's reason.
std::string UnenforcedRefusal(const core::PodView& pod, const core::PodRequest& req,
                              const std::vector<std::string>& allowed);

class Extender {
 public:
  // `state` and `binder` must outlive the extender. INVALID_ARGUMENT for an
  // unknown policy name, or a simulator-only NAME+kube one.
  static Result<std::unique_ptr<Extender>> Create(ClusterState& state, Binder& binder, ExtenderOptions options);
  Extender(const Extender&) = delete;
  Extender& operator=(const Extender&) = delete;

  // ExtenderArgs -> ExtenderFilterResult (200), or 400 with a message.
  HttpReply Filter(std::string_view body);
  // ExtenderArgs -> HostPriorityList (200), or 400 with a message.
  HttpReply Prioritize(std::string_view body);
  // ExtenderBindingArgs -> ExtenderBindingResult (200), or 400 with a message.
  HttpReply Bind(std::string_view body);
  // ExtenderPreemptionArgs -> ExtenderPreemptionResult (200), or 400.
  HttpReply Preempt(std::string_view body);
  // The second entry's verbs, for claim pods and, with
  // place_pods_without_gpus, pods without GPUs (see the file comment):
  // ExtenderArgs -> HostPriorityList / ExtenderFilterResult (200), or 400.
  HttpReply PrioritizeClaims(std::string_view body);
  HttpReply FilterClaims(std::string_view body);

  // A pod the pod watch decoded while it waits for a node: a call whose Pod
  // has the same uid and resourceVersion takes this view instead of
  // decoding its own copy (kube-scheduler sends the object the API server
  // served both). Ignored for a pod that is bound, finished or has no uid
  // or resourceVersion. Thread-safe.
  void RememberPendingPod(std::shared_ptr<const core::PodView> pod);
  // How many calls took a remembered pod instead of decoding one.
  uint64_t pods_reused() const { return pods_.hits(); }

  // Pods that filter found no room for, kept a few seconds so that a share
  // freed just after can wake them (see rejected_pods.h).
  RejectedPods& rejected() { return rejected_; }

  const std::string& policy_name() const { return options_.policy; }

 private:
  Extender(ClusterState& state, Binder& binder, ExtenderOptions options);

  // A policy verdict on one node for one pod shape, valid for one node
  // version (unique across the ledger) and, once scored, one policy epoch.
  struct Verdict {
    uint64_t version = 0;  // node version + 1; 0 = empty
    uint64_t epoch = 0;    // policy epoch + 1 `candidate` was computed in; 0 = not scored
    core::FitFailure why = core::FitFailure::kNone;
    core::Candidate candidate;
    // Why the node was rejected, once Filter asked: -1 not yet, 0 without
    // and 1 with per-node detail (ExplainMisfit).
    int reason_detail = -1;
    bool unresolvable = false;
    std::string reason;
  };
  // policy_mu_ held (and the state's mutex, through Read, where a view is taken).
  void LearnWorkloadLocked(const ClusterView& view) TESSERA_REQUIRES(policy_mu_);
  int ShapeIdLocked(const core::PodRequest& pod) TESSERA_REQUIRES(policy_mu_);
  Verdict& VerdictLocked(int shape, int node_index, const core::PodRequest& pod, const core::NodeState& node,
                         bool need_score) TESSERA_REQUIRES(policy_mu_);
  // Ledger indexes of `nodes`' names (-1: not in the ledger), cached per
  // name list (the same shared list, or an equal one).
  const std::vector<int>& ResolveLocked(const ClusterView& view,
                                        const std::shared_ptr<const NodeNamesCache::List>& nodes)
      TESSERA_REQUIRES(policy_mu_);
  Status MakePolicyLocked(const core::TargetWorkload& workload) TESSERA_REQUIRES(policy_mu_);

  // PrioritizeClaims for a pod that asks for no GPU and holds no claim
  // (extender_host.cc).
  HttpReply PrioritizeWithoutGpus(const ExtenderArgs& args) TESSERA_EXCLUDES(policy_mu_);

  // The request Bind works on: from the pod watch, else from a filter call.
  Result<BindAsk> RequestForBind(const std::string& key, const std::string& uid);

  // What Filter answered for a pod (filter_returns_best), kept for its Bind.
  struct Choice {
    std::string uid;
    core::PodRequest request;
    core::Assignment assignment;  // the node and the GPUs
    uint64_t node_version = 0;    // the node's ledger version Filter chose on
    Clock::time_point at{};       // when (ExtenderOptions::now's clock)
    SlotAsk slots;                // the device-plugin slots it will hold there
  };
  // Removes pod `key`'s choice and returns it when it is for this bind: the
  // same uid, node `node` and request `req`. nullopt when there is none.
  std::optional<Choice> TakeChoiceLocked(const std::string& key, const std::string& uid, const std::string& node,
                                         const core::PodRequest& req) TESSERA_REQUIRES(policy_mu_);

  // Bind's choice: the GPUs the policy gives `ask.request` on `node` (shares
  // nominated there for other pods kept free), and the version of the node
  // it was made on. RESOURCE_EXHAUSTED when the pod no longer fits there,
  // its GPUs or its device-plugin slots (Filter's slot check counted the
  // node before pods bound since took slots); the errors of
  // ClusterView::BindTarget.
  // With `take_choice`, first takes Filter's choice for the pod into
  // `chosen` (TakeChoiceLocked); a `chosen` still good on the node is the
  // pick. `source` says which (for the log).
  struct BindPick {
    core::Assignment assignment;
    uint64_t node_version = 0;
    const char* source = "";
  };
  Result<BindPick> PickForBind(const BindAsk& ask, const std::string& uid, const std::string& node,
                               const std::vector<Nomination>& nominations, bool take_choice,
                               std::optional<Choice>& chosen) TESSERA_EXCLUDES(policy_mu_);
  // Picks and books (ClusterState::Assume) in the bind turn; picks again
  // when the node changed in between, kBindAttempts times at most, then
  // UNAVAILABLE. Returns what was booked, or why nothing was; `source`
  // (when not null) gets where the booked GPUs were chosen.
  Result<core::Assignment> PickAndAssume(const BindAsk& ask, const std::string& uid, const std::string& node,
                                         const std::vector<Nomination>& nominations, Clock::time_point now,
                                         std::string* source)
      TESSERA_EXCLUDES(bind_mu_, policy_mu_);

  ClusterState& state_;
  RejectedPods rejected_;
  Binder& binder_;
  const ExtenderOptions options_;
  std::shared_ptr<spdlog::logger> log_;

  // The policy and its caches: the policy object, the placer (its score
  // cache), the verdict cache, the workload learned so far.
  Mutex policy_mu_;
  // Bind's turn: one pick and booking at a time, so that binds to one node
  // do not invalidate each other's picks (UNAVAILABLE) and retry in a convoy.
  // Guards no data; taken before policy_mu_.
  Mutex bind_mu_ TESSERA_ACQUIRED_BEFORE(policy_mu_);
  std::unique_ptr<core::PlacementPolicy> policy_ TESSERA_GUARDED_BY(policy_mu_);
  std::unique_ptr<core::Placer> placer_ TESSERA_GUARDED_BY(policy_mu_);
  core::Rng claims_rng_ TESSERA_GUARDED_BY(policy_mu_);  // PrioritizeClaims' ScorePick
  uint64_t holds_cursor_ TESSERA_GUARDED_BY(policy_mu_) = 0;
  int64_t learned_ TESSERA_GUARDED_BY(policy_mu_) = 0;        // pods fed to the policy so far
  int64_t next_rebuild_ TESSERA_GUARDED_BY(policy_mu_) = 32;  // fgd: rebuild the target workload at this count
  // Pod shapes (core::ShapeKey) -> row of verdicts_, at most kMaxShapes;
  // a new shape beyond that takes the row used longest ago.
  std::unordered_map<std::string, int> shapes_ TESSERA_GUARDED_BY(policy_mu_);
  std::vector<std::vector<Verdict>> verdicts_ TESSERA_GUARDED_BY(policy_mu_);  // [shape][ledger node index]
  std::vector<std::string> shape_keys_ TESSERA_GUARDED_BY(policy_mu_);         // [shape]: its key
  std::vector<uint64_t> shape_used_ TESSERA_GUARDED_BY(policy_mu_);            // [shape]: shape_clock_ when last asked
  uint64_t shape_clock_ TESSERA_GUARDED_BY(policy_mu_) = 0;
  struct Resolution {
    uint64_t topology = 0;
    std::shared_ptr<const NodeNamesCache::List> nodes;
    std::vector<int> index;
  };
  // The last few node lists seen, newest last.
  std::vector<Resolution> resolutions_ TESSERA_GUARDED_BY(policy_mu_);
  // Filter's choices not bound yet, by pod key (at most remembered_requests).
  std::unordered_map<std::string, Choice> choices_ TESSERA_GUARDED_BY(policy_mu_);

  // The pods of the calls, decoded once per uid and resourceVersion, and
  // their node lists, parsed once per text (each its own lock).
  PodViewCache pods_;
  NodeNamesCache node_names_;
};

}  // namespace tessera::scheduler
