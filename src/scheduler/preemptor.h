// GpuPreemptor: preemption for GPU shares, driven by the extender itself.
// kube-scheduler's own preemption never sees a conflict over gpu-mem or
// gpu-core (they are ignoredByScheduler), so when Filter finds no node for a
// pod that may preempt (spec.priority above other pods', preemptionPolicy not
// Never) it hands the pod here. A worker thread, off the HTTP path:
//   1. waits `delay`, and gives way if kube-scheduler's preemption took the
//      pod meanwhile (its preempt verb ran for the pod, or the pod has
//      status.nominatedNodeName);
//   2. plans with core::PlanPreemption on the nodes Filter turned away for
//      lack of room (minimal victims of strictly lower priority), GPU share
//      and, where the node's kubelet is short of them, device-plugin slots;
//   3. asks the Eviction API for every victim with dryRun first, so a
//      PodDisruptionBudget that forbids one (429) moves on to the next plan
//      before anything is evicted (at most `max_attempts` plans);
//   4. nominates the pod on the node (a reservation other pods' Filter and
//      Bind respect, ReserveNominated and NominatedSlots) before evicting, so
//      the freed share and slots are not taken while the victims terminate;
//   5. evicts the victims and records an Event on each (TesseraPreempted)
//      and on the pod (TesseraPreempting); a pod that cannot be helped gets
//      TesseraPreemptionFailed once per reason.
// kube-scheduler retries the pod when the victims are deleted; the pod then
// fits, binds, and its nomination ends (Forget). Nominations also end when
// the pod is no longer pending or after `nomination_ttl`. One plan is in
// flight per pod, and a pod holding a nomination is not planned again.
//
// Thread-safety: every method may be called from any thread. Lock order:
// ClusterState's mutex before this object's.
//
//   GpuPreemptor preemptor(state, api, PreemptorOptions{});
//   preemptor.Start();
//   preemptor.Request(request);   // from Filter, returns at once
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/ledger.h"
#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "scheduler/cluster_state.h"

namespace tessera::scheduler {

// What the preemptor needs from the API server (the Kubernetes client in
// production, fakes in tests).
class PreemptionApi {
 public:
  virtual ~PreemptionApi() = default;
  // Evicts pod ns/name through its Eviction subresource (policy/v1), with
  // `uid` as a precondition; with `dry_run` the API server only checks.
  // RESOURCE_EXHAUSTED when a PodDisruptionBudget forbids it (429),
  // NOT_FOUND when the pod is gone, any other error otherwise.
  virtual Status Evict(const std::string& ns, const std::string& name, const std::string& uid, bool dry_run) = 0;
  // Records an Event of `type` ("Normal", "Warning") on pod ns/name; best effort.
  virtual void RecordEvent(const std::string& ns, const std::string& name, const std::string& uid,
                           const std::string& type, const std::string& reason, const std::string& message) = 0;
};

struct PreemptorOptions {
  // Whether the extender preempts for GPU shares at all. Default on.
  bool enabled = true;
  // How long a nomination holds a share for its pod at most. Default 60 s.
  std::chrono::seconds nomination_ttl{60};
  // Plans needing more victims on one node are not made (0: no limit). Default 16.
  int max_victims = 16;
  // How long after Filter the worker plans, leaving kube-scheduler's own
  // preemption (the preempt verb) the first turn. Default 1 s.
  std::chrono::milliseconds delay{1000};
  // Plans tried for one pod when PodDisruptionBudgets refuse evictions. Default 3.
  int max_attempts = 3;
  // After a pod could not be helped, Filter calls for it are not planned
  // again for this long. Default 10 s.
  std::chrono::milliseconds retry_after{10000};
  // Asked before each plan; a non-OK status skips it (this replica is not
  // the leader, caches not synced). nullptr: always plan.
  std::function<Status()> may_act;
  // Where decisions are logged; nullptr: spdlog's default logger.
  std::shared_ptr<spdlog::logger> logger;
  // Clocks: monotonic (delays, expiry) and wall (victims' run time). nullptr: the system's.
  std::function<Clock::time_point()> now;
  std::function<int64_t()> unix_now;
};

// A pod Filter found no room for, as handed to the preemptor.
struct PreemptionRequest {
  std::string key;  // "namespace/name"
  std::string uid;
  int32_t priority = 0;              // spec.priority
  core::PodRequest request;
  SlotAsk slots;                     // the device-plugin slots it asks for (SlotsAsked)
  std::vector<std::string> nodes;    // nodes that lack room (kube-scheduler's other filters passed them)
};

// A share held for a preempting pod on a node while its victims leave.
struct Nomination {
  std::string key;
  std::string uid;
  std::string node;
  int32_t priority = 0;
  core::PodRequest request;
  core::Assignment assignment;        // the GPUs the plan gave it
  SlotAsk slots;                      // the device-plugin slots it will take there
  std::vector<std::string> victims;   // keys of the pods evicted for it
  Clock::time_point expires{};
};

// Adds to `node` (a copy of a ledger node) what `nomination` reserves beyond
// the share its victims still hold there, so a pod that fits the result
// leaves room for the nominated pod both now and once the victims are gone.
// `view` must be the state `node` was copied from.
void ReserveNominated(const ClusterView& view, const Nomination& nomination, core::NodeState* node);

// The device-plugin slots of `ask`'s resource that `nominations` reserve on
// the ledger's node `node` beyond those their victims still hold there (the
// victims' slots pass to the nominated pod as they leave), to be counted as
// taken (ClusterView::SlotShortage's also_taken). 0 when ask.count is 0.
int64_t NominatedSlots(const ClusterView& view, const std::vector<Nomination>& nominations, std::string_view node,
                       const SlotAsk& ask);

class GpuPreemptor {
 public:
  // `state` and `api` must outlive the preemptor.
  GpuPreemptor(ClusterState& state, PreemptionApi& api, PreemptorOptions options);
  ~GpuPreemptor();  // Stop()
  GpuPreemptor(const GpuPreemptor&) = delete;
  GpuPreemptor& operator=(const GpuPreemptor&) = delete;

  // Starts the worker thread. Without it, RunPending does the work (tests).
  void Start();
  // Stops and joins the worker; queued requests are dropped. Idempotent.
  void Stop();

  // Queues a plan for the pod unless preemption is off, one is queued or in
  // flight for it, it holds a nomination, or it failed within retry_after.
  // Returns at once.
  void Request(PreemptionRequest request);
  // kube-scheduler's preempt verb ran for pod `uid`: its preemption drives
  // this pod; queued plans for it are skipped.
  void NoteSchedulerPreemption(const std::string& uid);
  // The pod bound (or is gone): its nomination ends.
  void Forget(const std::string& key);

  // The live nominations of pods other than `pod_key` (all when empty).
  std::vector<Nomination> NominationsAgainst(const std::string& pod_key) const;
  // Every live nomination (tests, logs).
  std::vector<Nomination> nominations() const { return NominationsAgainst(""); }

  // Processes every queued request whose delay has passed, and expires
  // nominations, on the calling thread. Returns how many requests it took.
  int RunPending();

  bool enabled() const { return options_.enabled; }
  const PreemptorOptions& options() const { return options_; }

 private:
  struct Queued {
    PreemptionRequest request;
    Clock::time_point due;
  };
  void Loop() TESSERA_EXCLUDES(mu_);
  // Without mu_: they read the ClusterState, whose mutex comes first.
  void Process(const PreemptionRequest& request) TESSERA_EXCLUDES(mu_);
  void Expire(Clock::time_point now) TESSERA_EXCLUDES(mu_);
  void GiveUp(const PreemptionRequest& request, const std::string& why) TESSERA_EXCLUDES(mu_);
  Clock::time_point Now() const { return options_.now ? options_.now() : Clock::now(); }

  ClusterState& state_;
  PreemptionApi& api_;
  const PreemptorOptions options_;
  std::shared_ptr<spdlog::logger> log_;

  mutable Mutex mu_;
  CondVar wake_;
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
  std::deque<Queued> queue_ TESSERA_GUARDED_BY(mu_);
  std::set<std::string> busy_ TESSERA_GUARDED_BY(mu_);  // keys queued or in flight
  std::map<std::string, Nomination, std::less<>> nominations_ TESSERA_GUARDED_BY(mu_);  // by pod key
  // uid -> when the verb ran
  std::unordered_map<std::string, Clock::time_point> scheduler_driven_ TESSERA_GUARDED_BY(mu_);
  std::unordered_map<std::string, Clock::time_point> cooldown_ TESSERA_GUARDED_BY(mu_);     // uid -> not before
  std::unordered_map<std::string, std::string> last_failure_ TESSERA_GUARDED_BY(mu_);  // uid -> reason last reported
  // The worker. Not guarded: Start() sets it under mu_, Stop() joins it
  // without (the worker needs mu_ to finish); call them from one thread.
  std::thread thread_;
};

}  // namespace tessera::scheduler
