// ClusterState: what the extender knows about the cluster, built from the
// node and pod informers' callbacks (Node JSON objects, pods decoded once
// into core::PodView at the informer's edge). It holds a core
// Ledger of every GPU node's capacity and the shares held by live pods, the
// nodes that are not GPU nodes (with the reason, for Filter), and the
// requests of pending GPU pods (for Bind).
//
// Rules for pods (UpsertPod / DeletePod):
//  - a pod bound to a node (spec.nodeName) with a tessera.io/assignment
//    annotation and a phase other than Succeeded/Failed holds its share:
//    confirmed if this extender had assumed it, added as confirmed otherwise;
//  - a terminal or deleted pod releases its share;
//  - a pod whose assignment names a node not known yet (or not a GPU node)
//    waits, and is applied when the node arrives;
//  - a pod whose assignment does not fit (two schedulers, a node that
//    shrank) is logged and kept as a *conflict*, retried whenever its node
//    frees capacity. Conflicts are counted, never silently dropped.
// A held pod on a node with a node agent (tessera.io/node-agent) *awaits
// admission* until the agent lists its GPU containers in tessera.io/allocated
// (or it runs). ClaimAdmissionTurn lets one such pod per node go out at a
// time: the kubelet admits pods in an order the agent cannot see, and the
// agent tells pending pods apart only by their GPUs and slot counts, so two
// pending pods on one node could be mixed up; with one, Allocate cannot pick
// the wrong pod.
// Bind is two steps: the extender chooses GPUs from a read of the state (a
// node's NodeState, whose version names that state), then Assume books that
// choice as *assumed* in one call, refusing it (UNAVAILABLE) if the node changed
// since it was read, and the ledger refusing it if it does not fit. Nothing
// here calls back into the caller while the state's mutex is held, except
// the function given to Read.
// A pod this extender binds is *assumed* (Assume) until the pod watch
// shows it with its assignment; ExpireAssumed releases assumptions older than
// the TTL (the bind was lost). A node without a valid inventory annotation is
// not a GPU node; it is kept with the reason so Filter can say why.
// Each pod's record moves through the stages of core/pod_lifecycle.h
// (pending, assumed, awaiting admission, held, waiting for its node,
// conflict, released) by that table only; the indexes that follow a stage
// (the pods awaiting admission per node, the parked pods per node) change
// with it, in one place (Advance).
// DRA (issue 22; docs/notes/dra.md): the driver's ResourceSlices say which
// GPU each device is (its `index` attribute) and the order kube-scheduler's
// allocator tries them in (ClusterView::DraDeviceOrder); an allocated
// ResourceClaim's shares on the driver's devices are booked in the ledger
// under the key "claim:<namespace>/<name>" (ClaimLedgerKey), beside the
// pods' shares and taking no device-plugin slot, so the device-plugin path
// is never placed on room a claim holds. kube-scheduler's allocator has
// already given the claim its devices, so a claim is booked as it is: one
// whose pool has no slice yet, whose node is not a GPU node here, or that
// does not fit (a pod placed on the room in the same instant) holds nothing
// and is retried when its node, its slice or the node's room changes
// (Problems() lists it); the node agent's book refuses the second of the
// two. A claim's booking changes only when its allocation does; a slice
// deleted (kubelets delete them as they start) leaves claims booked.
// Pods without GPUs ("host pods", cluster_state_host.cc): a bound,
// non-terminal pod that asks for no GPU resource and carries no
// tessera.io/assignment (a CPU-only pod kube-scheduler placed, a DRA pod whose
// GPU shares its claim holds) books the CPU and memory of its spec on its
// node under the ledger key "host:<namespace>/<name>" (HostLedgerKey), so the
// ledger's free CPU and memory are the node's and the policy's CPU terms see
// the CPU these pods take. Each is shown to the policy once as an arrival
// (NewHoldsSince), as the simulator shows every pod, so a policy that learns
// how much CPU pods without GPUs ask for (tessera's CPU pressure) learns it
// here too. One on a node that is not a GPU node holds nothing and is booked
// when the node becomes one; one that does not fit (the book disagrees with
// the kubelet, which admitted it) holds nothing, is listed by Problems() and
// is retried whenever its node frees room.
// The pod watch shows such a pod bound only after kube-scheduler bound it,
// and kube-scheduler may score the next pods first; so the extender books a
// pod without GPUs on the node its prioritize scored best as soon as it has
// scored it (AssumeHostPod): an *assumed* host pod, counted as an arrival
// then. The pod watch confirms it (the pod bound there), moves it (bound
// elsewhere) or ends it (finished, deleted, or a GPU pod after all); a pod
// seen unbound keeps its assumption (the watch may be behind kube-scheduler),
// and an assumption the watch never confirms is released by ExpireAssumed
// after host_assume_ttl (the pod did not schedule).
// Device-plugin slots (tessera.io/gpu, and HAMi's count with that front end
// on) are counted here, not by kube-scheduler: its queueing hint for a node
// change checks a pod against the node with the extender's ignored resources
// too, so a pod it turned away for want of slots was not retried when the
// slots appeared (docs/scheduler-extender.md, "A pod that arrives before the
// slots"). A GPU's sharers never exceed the slots its inventory lists (the
// ledger); a node whose kubelet reports fewer slots allocatable than its
// inventory lists (its agent starting or restarting, a sick GPU's slots) or
// whose GPUs list none takes a pod only while what is allocatable, less the
// slots of that resource its pods hold, covers the slots the pod asks for
// (SlotShortage).
// A LoadTracker (load_tracker.h) follows every pending and held pod's
// predicted GPU load and learns from the tessera.io/usage annotations of held
// pods; a pod re-booked at a new prediction gives its node a new ledger
// version, so cached scores of the node are recomputed.
//
// Thread-safety: every method may be called from any thread; one mutex
// guards all state (TESSERA_GUARDED_BY, checked by clang). Read() runs a
// function under it.
//
//   ClusterState state(ClusterStateOptions{});
//   state.UpsertNode(node_json);      // informer callbacks
//   state.UpsertPod(pod_json);        // decodes once, then UpsertPod(const core::PodView&)
//   size_t held = state.Read([](const ClusterView& v) { return v.ledger().pod_count(); });
//   // Bind: pick on a node read in Read (its version noted), then book it.
//   Result<core::Assignment> booked = state.Assume(pod, slots, uid, picked, version_read, Clock::now());
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dra_names.h"
#include "core/ledger.h"
#include "core/model.h"
#include "core/pod_lifecycle.h"
#include "core/pod_view.h"
#include "core/podspec.h"
#include "core/preemption.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "scheduler/dra_objects.h"
#include "scheduler/load_tracker.h"

namespace spdlog {
class logger;
}

namespace tessera::scheduler {

using Clock = std::chrono::steady_clock;

// A bound pod that has awaited admission this many admission waits (60 s at
// the default 4 s) no longer holds binds to its node back: its node's kubelet
// may never admit it (down, or the pod stuck), and the node must not be
// wedged for everyone else.
inline constexpr int kAdmissionGiveUpFactor = 15;

struct ClusterStateOptions {
  // Extended resource names pods use (to recognise GPU pods).
  core::ResourceNames resources;
  // How long a pod bound by this extender may stay unseen by the pod watch
  // before its share is released. Default 60 s.
  std::chrono::seconds assume_ttl{60};
  // How long a pod without GPUs booked by AssumeHostPod may stay unseen
  // bound before its booking is released. Default 10 s.
  std::chrono::seconds host_assume_ttl{10};
  // How long ClaimAdmissionTurn waits for the node to admit the pod bound before
  // (nodes with an agent only). Keep it below kube-scheduler's extender
  // httpTimeout. Default 4 s. A node whose bound pod has awaited admission
  // longer than this is filtered out for new pods (AdmissionStall), and after
  // kAdmissionGiveUpFactor times this the pod no longer holds binds to its
  // node back.
  std::chrono::milliseconds admission_wait{4000};
  // Where decisions are logged; nullptr: spdlog's default logger.
  std::shared_ptr<spdlog::logger> logger;
  // Predicted GPU load and what it learns from tessera.io/usage.
  LoadTrackerOptions load;
  // Wall clock for the load history (usage times are wall times). nullptr:
  // system_clock.
  std::function<std::chrono::system_clock::time_point()> wall_now;
  // DRA: the driver whose slices and claims are read, and the DeviceClasses
  // whose requests are its GPUs (SchedulerConfig::dra_device_classes).
  std::string dra_driver = core::kDraDriver;
  std::set<std::string, std::less<>> dra_classes = {core::kDraDriver};
};

// The ledger key of an allocated ResourceClaim "namespace/name" is this
// prefix and the key (no pod key has a colon).
inline constexpr std::string_view kClaimLedgerPrefix = "claim:";
inline std::string ClaimLedgerKey(std::string_view claim_key) {
  return std::string(kClaimLedgerPrefix) + std::string(claim_key);
}
// Whether a ledger key is a claim's (ClaimLedgerKey), not a pod's.
inline bool IsClaimLedgerKey(std::string_view ledger_key) { return ledger_key.starts_with(kClaimLedgerPrefix); }

// The ledger key of a bound pod without GPUs "namespace/name" (see the file
// comment): its CPU and memory, no GPU share.
inline constexpr std::string_view kHostLedgerPrefix = "host:";
inline std::string HostLedgerKey(std::string_view pod_key) {
  return std::string(kHostLedgerPrefix) + std::string(pod_key);
}
inline bool IsHostLedgerKey(std::string_view ledger_key) { return ledger_key.starts_with(kHostLedgerPrefix); }

// One GPU's use, for logs and tests.
struct GpuSummary {
  std::string node;
  int index = 0;
  std::string model;
  bool healthy = true;
  int64_t mem_total_mib = 0;
  int64_t mem_used_mib = 0;
  int64_t core_used_milli = 0;
  int sharers = 0;
  int64_t predicted_busy_milli = 0;  // from the LoadTracker: predicted busy time of its shares
  int64_t mem_free_mib() const { return mem_total_mib - mem_used_mib; }
  int64_t core_free_milli() const;
};

struct StateSummary {
  int nodes = 0;             // all nodes seen
  int gpu_nodes = 0;         // nodes in the ledger
  int64_t gpus = 0;
  int pods_held = 0;         // holding a share in the ledger (assumed ones included)
  int pods_assumed = 0;      // bound by this extender, not yet seen by the pod watch
  int pods_held_assumed = 0; // of pods_held, those assumed
  int pods_waiting = 0;      // assignment names a node that is unknown or not a GPU node
  int pods_conflict = 0;     // assignment does not fit its node
  int pods_pending = 0;      // unbound GPU pods whose request is kept for Bind
  int claims_held = 0;       // allocated ResourceClaims of the driver booked in the ledger
  int claims_waiting = 0;    // allocated ones not booked (see the file comment)
  int host_pods = 0;         // bound pods without GPUs whose CPU and memory the ledger holds
  int host_pods_unfit = 0;   // such pods on GPU nodes whose CPU or memory does not fit the ledger
  int host_pods_assumed = 0; // of host_pods, booked by AssumeHostPod and not yet seen bound
  int64_t conflicts_total = 0;  // pods that ever entered the conflict state
  int64_t expired_total = 0;    // assumptions released by ExpireAssumed
  int64_t host_expired_total = 0;  // host pod assumptions released by ExpireAssumed
  int64_t workloads_learned = 0;  // workloads with a utilization history
  int64_t usage_samples_total = 0;  // tessera.io/usage samples taken into the history
  int64_t usage_rejected_total = 0; // tessera.io/usage texts that could not be read
  std::vector<GpuSummary> gpu_use;  // filled by Snapshot() only

  // One line: "nodes=3 gpu_nodes=2 gpus=16 held=5 assumed=1 waiting=0 conflicts=0 pending=2"
  std::string ToString() const;
};

class ClusterState;

// The device-plugin slots a pod asks for: the count resource its GPU
// containers name (tessera.io/gpu, or HAMi's with that front end on) and how
// many the kubelet allocates it (the containers' sum). count 0: none of
// these (gpushare's memory units, or no GPU).
struct SlotAsk {
  std::string resource;
  int64_t count = 0;
  size_t which = 0;  // resource's place in the node's slot counts: 0 Tessera's, 1 HAMi's
};
SlotAsk SlotsAsked(const core::PodView& pod, const core::ResourceNames& names);

// What Bind books for a pending pod: its request and the slots it takes.
struct BindAsk {
  core::PodRequest request;
  SlotAsk slots;
};

// Read-only access to the state, valid only inside ClusterState::Read (with
// the state's mutex held; its methods assert that to the analysis).
class ClusterView {
 public:
  enum class NodeKind { kUnknown, kGpu, kNotGpu };

  const core::Ledger& ledger() const;
  // What is known about `node`. For kNotGpu, `*reason` (if given) is set to
  // why ("not a GPU node (no tessera.io/gpu-inventory annotation)").
  NodeKind KindOf(std::string_view node, const std::string** reason = nullptr) const;
  // Changes whenever a node is added, removed, or changes kind, so callers
  // can cache what they resolved from node names (ledger indexes, kinds).
  uint64_t topology_version() const;
  // Every GPU model in the ledger with the memory of its largest GPU.
  const std::map<std::string, int64_t, std::less<>>& Models() const;
  // Requests of the pods holding shares, by key, then of the claims booked
  // (as the ledger holds them: one container per device), then of the bound
  // pods without GPUs (booked or not; key "host:...", no containers).
  std::vector<core::PodRequest> HeldRequests() const;
  // Requests of pods (and claims) that started holding a share since
  // `*cursor` (in the order they did), and of bound pods without GPUs first
  // seen since, and advances the cursor. Keeps the last 8192 only.
  std::vector<core::PodRequest> NewHoldsSince(uint64_t* cursor) const;
  // The bound pods without GPUs whose CPU and memory are booked on `node`,
  // for preemption planning (kube-scheduler may name them as victims).
  struct HostPod {
    std::string key;  // "namespace/name"
    std::string uid;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
  };
  std::vector<HostPod> HostPodsOn(std::string_view node) const;
  // The pods holding shares on `node`, for preemption planning: key, uid,
  // spec.priority, start time, whether deletion was requested, what they
  // hold, and the slots each holds of `ask`'s resource (none when ask.count
  // is 0). Pods this extender bound that the pod watch has not shown yet are
  // not evictable (their priority is not known).
  std::vector<core::PreemptionPod> HeldPodsOn(std::string_view node, const SlotAsk& ask = {}) const;
  // The ledger's node `index` as the preemption planner sees it for a pod
  // asking `ask`: the node, HeldPodsOn, and where its kubelet is short of
  // slots of the ask's resource, their count (SlotShortage's, with
  // `also_taken` more: slots reserved for nominated pods).
  core::PreemptionNode PreemptionNodeOf(size_t index, const SlotAsk& ask, int64_t also_taken = 0) const;
  // What pod `key` holds (request and assignment); nullptr when it holds no share.
  const core::PodRequest* HeldRequest(std::string_view key) const;
  // The device-plugin slots pod `key` holds; nullptr when it holds no share.
  const SlotAsk* HeldSlots(std::string_view key) const;
  // Predicted load of every GPU and the learned history.
  const LoadTracker& load() const;
  // Why `node` should get no new pods now: a pod bound there has awaited its
  // admission by the node agent for longer than admission_wait, so a bind
  // there would wait behind it. "" when none. The text names the node, the
  // pod and how long.
  std::string AdmissionStall(std::string_view node, Clock::time_point now) const;
  // Why the ledger's node `index` (ledger().nodes()) cannot take a pod
  // asking `ask` for want of device-plugin slots, or "" when it can (see the
  // file comment): the slots its kubelet reports allocatable for the
  // resource, less those the pods holding shares there take of it (pods of
  // other front ends take none), and `also_taken` (slots to be taken beyond the
  // ledger: Filter's choices for pods being bound), must cover the ask. Free
  // while every node's slots are allocatable; otherwise an index into a table
  // rebuilt when the topology changes. The text names the node, the resource
  // and the counts. Evicting pods frees slots only while the ask is no more
  // than what is allocatable (SlotsFor says).
  std::string SlotShortage(size_t index, const SlotAsk& ask, int64_t also_taken = 0) const;
  // The slots of resource `which` (SlotAsk::which) on the ledger's node
  // `index` when its kubelet is short of them: allocatable, and taken by the
  // pods holding shares there. nullopt when the node has all it lists.
  struct SlotCount {
    int64_t allocatable = 0;
    int64_t taken = 0;
  };
  std::optional<SlotCount> SlotsFor(size_t index, size_t which) const;
  // The GPU node a bind of pod `pod_key` to `node` books on, checked as
  // ClusterState::Assume checks it: ALREADY_EXISTS if the pod already holds or
  // waits for a share; NOT_FOUND / FAILED_PRECONDITION when the node is
  // unknown / not a GPU node. The node's `version` is the one Assume compares
  // (copy the node to choose GPUs outside Read). The pointer is valid inside
  // this Read only.
  Result<const core::NodeState*> BindTarget(std::string_view pod_key, std::string_view node) const;
  // DRA: the GPU indexes of `node` in the order its slices of the driver
  // list them (pools by name, slices by name, devices as listed: the
  // allocator's order); nullptr when the node publishes none.
  const std::vector<int>* DraDeviceOrder(std::string_view node) const;
  // The ResourceClaim "namespace/name" as last seen; nullptr when unknown.
  const DraClaim* Claim(std::string_view key) const;

 private:
  friend class ClusterState;
  explicit ClusterView(const ClusterState* state) : state_(state) {}
  const ClusterState* state_;
};

class ClusterState {
 public:
  explicit ClusterState(ClusterStateOptions options = {});
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // Informer callbacks. Malformed objects are logged and ignored (they cannot
  // be fixed by retrying); nothing here fails.
  void UpsertNode(const nlohmann::json& node);
  void DeleteNode(std::string_view name);
  // A pod added or changed, and a pod deleted (only its key and uid are read).
  void UpsertPod(const core::PodView& pod);
  void DeletePod(const core::PodView& pod);
  // The pod informer's edge: decodes `pod` (core::DecodePod with
  // options().resources) and applies the view, which it returns for other
  // readers of the event (Extender::RememberPendingPod); a pod without
  // identity is logged and ignored (nullptr).
  std::shared_ptr<const core::PodView> UpsertPod(const nlohmann::json& pod);
  void DeletePod(const nlohmann::json& pod);
  // The ResourceSlice and ResourceClaim informers' callbacks (DRA; see the
  // file comment). Slices of other drivers are ignored; malformed objects
  // are logged and ignored.
  void UpsertSlice(const nlohmann::json& slice);
  void DeleteSlice(const nlohmann::json& slice);
  void UpsertClaim(const nlohmann::json& claim);
  void DeleteClaim(const nlohmann::json& claim);

  // For a pod assumed by Assume, before its Binding is sent: blocks
  // until no other pod awaits admission on its node (see the header), then
  // marks this one awaiting, so binds to one node go out one admission at a
  // time while the ledger already holds every share. UNAVAILABLE naming the
  // pod still awaited at `deadline`; NOT_FOUND if `pod_key` is not assumed.
  // Call it without locks of your own.
  Status ClaimAdmissionTurn(std::string_view pod_key, Clock::time_point deadline);
  std::chrono::milliseconds admission_wait() const { return options_.admission_wait; }

  // Books `assignment` for `pod` as assumed (Bind's second step) and returns
  // it, if its node is still in the state the caller chose it from:
  // `seen_version` is the node's NodeState::version as the caller read it
  // (ClusterView::BindTarget). The ledger checks the assignment against the
  // request and the node's free capacity again. Errors, with nothing booked:
  //  - ALREADY_EXISTS if the pod already holds or waits for a share;
  //  - NOT_FOUND / FAILED_PRECONDITION when assignment.node is unknown / not
  //    a GPU node;
  //  - UNAVAILABLE naming the pod and the node when the node changed since
  //    `seen_version` (transient: read it again, choose again, retry; no
  //    other error here is UNAVAILABLE);
  //  - INVALID_ARGUMENT (the assignment does not match the request) or
  //    RESOURCE_EXHAUSTED (it does not fit) from the ledger.
  // `slots` are the device-plugin slots the pod will hold there (SlotsAsked;
  // SlotShortage counts them until the pod releases its share).
  // Takes the state's mutex and calls nothing outside this object.
  Result<core::Assignment> Assume(const core::PodRequest& pod, const SlotAsk& slots, std::string_view uid,
                                  const core::Assignment& assignment, uint64_t seen_version,
                                  Clock::time_point now) TESSERA_EXCLUDES(mu_);
  // Releases an assumption (the bind failed). FAILED_PRECONDITION, changing
  // nothing, when the pod watch already confirmed the pod; NOT_FOUND if the
  // pod holds nothing.
  Status ForgetAssumed(std::string_view pod_key);
  // Releases assumptions made before now - assume_ttl, and host pod
  // assumptions made before now - host_assume_ttl. Returns how many of the
  // first kind.
  int ExpireAssumed(Clock::time_point now);

  // Books `pod`, a pod without GPUs that prioritize scored best on `node`,
  // there as if bound (file comment, "Pods without GPUs"), for up to
  // host_assume_ttl, and shows it to the policy as an arrival unless
  // `counted` (an assumption of it was dropped just before). Nothing when
  // `pod` is bound, ends, or asks for a GPU, or when the pod watch has shown
  // it bound already; an earlier assumption of the same pod is replaced.
  void AssumeHostPod(const core::PodView& pod, const std::string& node, Clock::time_point now,
                     bool counted = false) TESSERA_EXCLUDES(mu_);
  // Releases an assumption AssumeHostPod made for pod `key` with `uid`, so
  // that the pod is scored without its own booking when kube-scheduler asks
  // again. Whether there was one (a booking the watch confirmed stays, and
  // is not one).
  bool DropHostAssumption(std::string_view key, std::string_view uid) TESSERA_EXCLUDES(mu_);

  // The request and slot ask of an unbound GPU pod last seen by UpsertPod,
  // if its uid matches (any uid when `uid` is empty). NOT_FOUND when unknown;
  // the pod's validation error when it is malformed.
  Result<BindAsk> PendingRequest(std::string_view pod_key, std::string_view uid) const;
  // Whether pod `pod_key` (with `uid`, any when empty) is an unbound GPU pod
  // the pod watch shows, and the node in its status.nominatedNodeName
  // ("" when none: kube-scheduler's own preemption did not pick a node).
  bool IsPending(std::string_view pod_key, std::string_view uid, std::string* nominated_node = nullptr) const;

  // Runs `fn(const ClusterView&)` under the mutex and returns its result.
  // `fn` must not call back into this object.
  template <typename Fn>
  decltype(auto) Read(Fn&& fn) const TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return fn(ClusterView(this));
  }

  StateSummary Summary() const;
  // Summary plus every GPU's use, nodes in ledger order.
  StateSummary Snapshot() const;
  // The pods waiting for a node or in conflict, "ns/name: why", sorted.
  std::vector<std::string> Problems() const;
  // Pods currently in conflict.
  int conflict_count() const;
  // How many times room may have appeared so far: a held share released
  // (pod deleted or finished, assumption forgotten or expired), or a GPU
  // node added or changed (its inventory or allocatable slots; not a
  // heartbeat). kube-scheduler may see either before this state does and
  // retry a pod against the old state, so a change is the cue to wake the
  // pods turned away just before (WakeRejected).
  uint64_t freed_count() const { return freed_.load(std::memory_order_relaxed); }

  const ClusterStateOptions& options() const { return options_; }
  // The predicted GPU load book, for a placement policy that scores with it
  // (PolicyConfig::load). Read it only under Read(), as the policy does when
  // the extender scores inside Read(). Not analysed: the pointer is taken
  // without the lock, what it points to is read with it.
  const core::GpuLoadBook* load_book() const TESSERA_NO_THREAD_SAFETY_ANALYSIS { return &load_.book(); }

 private:
  friend class ClusterView;
  struct PodRecord {
    std::string uid;
    std::string assignment_text;  // the annotation as last seen ("" for own assumptions)
    core::PodRequest request;     // what the ledger holds (shares from the assignment)
    core::Assignment assignment;
    // Where the pod is in its scheduling life (core/pod_lifecycle.h); changed
    // only by Advance, which keeps awaiting_ and parked_ in step with it.
    core::PodStage stage = core::PodStage::kNone;
    std::string problem;          // why waiting for its node / in conflict
    // Bound by this extender and not yet shown by the pod watch (the ledger
    // holds its share as assumed while it holds one); expires after the TTL.
    bool assumed = false;
    Clock::time_point assumed_at{};
    bool counted = false;         // reported by NewHoldsSince already
    bool admitted = false;        // as last seen: it runs, or its node's agent allocated every GPU container
    Clock::time_point awaiting_since{};  // when it entered kAwaitingAdmission
    // For preemption: spec.priority, start time (status.startTime, else
    // creation; unix seconds), deletionTimestamp set; known once the pod
    // watch showed the pod.
    int32_t priority = 0;
    int64_t started_unix = 0;
    bool terminating = false;
    bool seen = false;
    std::string workload;         // WorkloadOf the pod ("" until the pod watch showed it)
    SlotAsk slots;                // the device-plugin slots it holds on its node (SlotShortage)
  };
  struct NodeEntry {
    std::string fingerprint;      // inventory + allocatable as last seen
    std::string not_gpu_reason;   // empty: the node is in the ledger
    bool has_agent = false;       // carries tessera.io/node-agent: pods there are admitted by Allocate
  };
  struct ClaimRecord {
    DraClaim claim;
    std::string node;     // where its shares are booked; "" while it holds none
    std::string problem;  // why an allocated claim holds none
    core::PodRequest request;  // what the ledger holds for it (one container per device)
    bool counted = false;      // reported by NewHoldsSince already
  };
  struct HostRecord {
    std::string uid;
    std::string node;          // spec.nodeName
    core::PodRequest request;  // key HostLedgerKey(pod key), the spec's CPU and memory, no containers
    bool booked = false;       // the ledger holds its CPU and memory
    std::string problem;       // why it holds nothing on a GPU node ("" otherwise)
    bool assumed = false;      // booked by AssumeHostPod, not yet seen bound by the pod watch
    Clock::time_point assumed_at{};
  };
  struct PendingPod {
    std::string uid;
    Status error;                 // OK when `request` is valid
    core::PodRequest request;
    SlotAsk slots;
    std::string nominated_node;   // status.nominatedNodeName
    std::string workload;         // WorkloadOf the pod
  };

  // Moves `rec` (pods_[key]) to the stage after `event` and keeps awaiting_
  // and parked_ in step: entering kAwaitingAdmission starts its wait, leaving
  // it wakes binds waiting for the node. An event its stage does not take is
  // logged and changes nothing (false).
  bool Advance(const std::string& key, PodRecord& rec, core::PodEvent event) TESSERA_REQUIRES(mu_);
  // A bound pod that awaits admission and is admitted now (or its node has
  // no agent) goes on to kHeld; a held one whose node gained an agent that
  // has not admitted it awaits again.
  void SettleAdmission(const std::string& key, PodRecord& rec) TESSERA_REQUIRES(mu_);
  bool NodeHasAgent(const std::string& node) const TESSERA_REQUIRES(mu_);
  void Hold(const std::string& key, PodRecord record) TESSERA_REQUIRES(mu_);
  void NoteNewHold(PodRecord& rec) TESSERA_REQUIRES(mu_);
  void PushNewHold(const core::PodRequest& request) TESSERA_REQUIRES(mu_);
  void TryPlace(const std::string& key, PodRecord& record) TESSERA_REQUIRES(mu_);
  // Gives back what the pod holds and forgets it; `event` is kGone or kForgotten.
  void Release(const std::string& key, core::PodEvent event = core::PodEvent::kGone) TESSERA_REQUIRES(mu_);
  void Evict(const std::string& node, const std::string& why) TESSERA_REQUIRES(mu_);
  void ApplyParked(const std::string& node) TESSERA_REQUIRES(mu_);
  // DRA (cluster_state_dra.cc). Books an allocated claim's shares (nothing
  // for one not allocated); sets its problem when they cannot be booked.
  void BookClaim(const std::string& key, ClaimRecord& rec) TESSERA_REQUIRES(mu_);
  // Gives back what the claim holds; `retry` retries what waits for the room.
  void UnbookClaim(const std::string& key, ClaimRecord& rec, bool retry) TESSERA_REQUIRES(mu_);
  // Books the allocated claims holding nothing, those on `node` (all when "").
  void RetryClaims(const std::string& node) TESSERA_REQUIRES(mu_);
  // Pods without GPUs (cluster_state_host.cc). NoteHostPod books, rebooks or
  // forgets `pod` by the file comment's rule (any pod may be given);
  // ForgetHostPod gives back what one holds and forgets it (nothing when
  // unknown, or when `uid` is set and differs); BookHost tries the ledger and
  // otherwise leaves it waiting on its node; RetryHostPods books those
  // waiting on `node`; UnbookHost takes one off the ledger and leaves it
  // waiting (its node left the ledger or changed).
  void NoteHostPod(const core::PodView& pod) TESSERA_REQUIRES(mu_);
  void ForgetHostPod(const std::string& key, std::string_view uid) TESSERA_REQUIRES(mu_);
  void BookHost(const std::string& key, HostRecord& rec) TESSERA_REQUIRES(mu_);
  void RetryHostPods(const std::string& node) TESSERA_REQUIRES(mu_);
  void UnbookHost(const std::string& key, HostRecord& rec) TESSERA_REQUIRES(mu_);
  // Rebuilds node's device order and the pools' device maps from slices_.
  void RebuildDraNode(const std::string& node) TESSERA_REQUIRES(mu_);
  // Moves the pods that have awaited admission on `node` for
  // kAdmissionGiveUpFactor admission waits to kAdmissionAbandoned, so they
  // no longer hold its binds back.
  void GiveUpStaleAwaiting(const std::string& node, Clock::time_point now) TESSERA_REQUIRES(mu_);
  void SetWaitingReason(const std::string& node, const std::string& why) TESSERA_REQUIRES(mu_);
  // Keeps slots_short_ for GPU node `name` (`node` its object, `info` its inventory).
  void NoteSlots(const std::string& name, const nlohmann::json& node, const core::NodeInfo& info) TESSERA_REQUIRES(mu_);
  // Feeds a held pod's tessera.io/usage to the LoadTracker; gives its node a
  // new version when its booked load changed.
  void NoteUsage(const std::string& key, const PodRecord& rec, const std::string& usage_text,
                 const Result<core::PodUsage>& usage) TESSERA_REQUIRES(mu_);
  int64_t NowSeconds() const;
  void TopologyChanged() TESSERA_REQUIRES(mu_) {
    models_dirty_ = true;
    ++topology_version_;
  }
  StateSummary SummaryLocked() const TESSERA_REQUIRES(mu_);

  const ClusterStateOptions options_;
  std::shared_ptr<spdlog::logger> log_;

  std::atomic<uint64_t> freed_{0};
  mutable Mutex mu_;
  CondVar admitted_;  // notified when a pod leaves kAwaitingAdmission
  core::Ledger ledger_ TESSERA_GUARDED_BY(mu_);
  std::unordered_map<std::string, NodeEntry> nodes_ TESSERA_GUARDED_BY(mu_);
  std::map<std::string, PodRecord, std::less<>> pods_ TESSERA_GUARDED_BY(mu_);
  // node -> its pods in a Parked stage
  std::map<std::string, std::set<std::string>, std::less<>> parked_ TESSERA_GUARDED_BY(mu_);
  // node -> its pods in kAwaitingAdmission
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> awaiting_ TESSERA_GUARDED_BY(mu_);
  // Assumed records by (assumed_at, key), oldest first, for ExpireAssumed.
  std::set<std::pair<Clock::time_point, std::string>> assumed_ TESSERA_GUARDED_BY(mu_);
  std::unordered_map<std::string, PendingPod> pending_ TESSERA_GUARDED_BY(mu_);
  std::deque<core::PodRequest> new_holds_ TESSERA_GUARDED_BY(mu_);
  uint64_t new_holds_first_ TESSERA_GUARDED_BY(mu_) = 0;  // sequence number of new_holds_.front()
  mutable bool models_dirty_ TESSERA_GUARDED_BY(mu_) = true;
  uint64_t topology_version_ TESSERA_GUARDED_BY(mu_) = 1;
  mutable std::map<std::string, int64_t, std::less<>> models_ TESSERA_GUARDED_BY(mu_);
  int64_t conflicts_total_ TESSERA_GUARDED_BY(mu_) = 0;
  int64_t expired_total_ TESSERA_GUARDED_BY(mu_) = 0;
  LoadTracker load_ TESSERA_GUARDED_BY(mu_);
  // DRA: the driver's slices by name; per pool its node and device -> GPU
  // index (kept when its slices are deleted); per node the allocator's
  // device order; the claims by key and the keys of allocated ones holding
  // nothing.
  struct DraPool {
    std::string node;
    std::map<std::string, int, std::less<>> index;
  };
  std::map<std::string, DraSlice, std::less<>> slices_ TESSERA_GUARDED_BY(mu_);
  std::map<std::string, DraPool, std::less<>> pools_ TESSERA_GUARDED_BY(mu_);
  std::map<std::string, std::vector<int>, std::less<>> dra_order_ TESSERA_GUARDED_BY(mu_);
  std::map<std::string, ClaimRecord, std::less<>> claims_ TESSERA_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> claims_waiting_ TESSERA_GUARDED_BY(mu_);
  int64_t usage_rejected_total_ TESSERA_GUARDED_BY(mu_) = 0;
  // Bound pods without GPUs by pod key; per node the keys of those holding
  // nothing (its node is not a GPU node, or they do not fit).
  std::map<std::string, HostRecord, std::less<>> host_pods_ TESSERA_GUARDED_BY(mu_);
  // Assumed host pods by (assumed_at, key), oldest first, for ExpireAssumed.
  std::set<std::pair<Clock::time_point, std::string>> host_assumed_ TESSERA_GUARDED_BY(mu_);
  int64_t host_expired_total_ TESSERA_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> host_waiting_ TESSERA_GUARDED_BY(mu_);
  // GPU nodes whose kubelet reports fewer slots allocatable than their
  // inventory lists, or whose inventory lists none: per slot resource, the
  // slots allocatable. SlotShortage looks only at these.
  std::map<std::string, std::map<std::string, int64_t, std::less<>>, std::less<>> slots_short_ TESSERA_GUARDED_BY(mu_);
  // slots_short_ by ledger index, as of topology version
  // short_by_index_version_ (rebuilt by SlotShortage): its slots
  // allocatable per SlotAsk::which (-1: not there, or not short of that
  // resource), and the slots its pods hold as of ledger version `version`. Filter
  // walks it in node order, so it is kept flat.
  struct ShortSlots {
    int64_t have[2] = {-1, -1};
    uint64_t version = ~uint64_t{0};  // none yet
    int64_t taken[2] = {0, 0};        // per SlotAsk::which, by the pods holding shares there
  };
  mutable std::vector<ShortSlots> short_by_index_ TESSERA_GUARDED_BY(mu_);
  mutable uint64_t short_by_index_version_ TESSERA_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::scheduler
