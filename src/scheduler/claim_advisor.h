// The reason a person can act on for a pod whose ResourceClaim asks Tessera's
// DRA driver for what no GPU has. kube-scheduler's DRA allocator says only
// "cannot allocate all claims", for a claim that waits for room as for one
// that can never be allocated (seen with 1.36); the ClaimAdvisor tells the
// second kind apart and posts, once per pod, a Warning Event
// TesseraClaimUnsatisfiable on it, e.g.
//   claim ns/p-gpu-x7k2 request "gpu" asks 49152 MiB of GPU memory; the
//   largest GPU of driver gpu.tessera.io has 40960 MiB (gpu-0 on node n1)
//
// What "never" means here: a request of a DeviceClass that selects the
// driver (a CEL selector naming it, as the chart's does) asks more memory
// than the largest GPU the driver publishes in any ResourceSlice, more
// compute than a GPU has, or more GPUs than any one node has; selects, in
// its own CEL selectors, a value of a string attribute that no published
// GPU has (the simple form only: `device.attributes["gpu.tessera.io"].model
// == "H900"`, alone or as a term of a top-level `&&`; see
// RequiredEqualities); or no node publishes a GPU of the driver at all. A
// firstAvailable request is never when each of its subrequests is. What it
// cannot read (other CEL, attributes no GPU publishes as strings) is left
// alone: the advice may miss a claim no GPU satisfies for another reason,
// but never calls a claim impossible that one GPU could take.
//
// Thread-safety: the pure functions are thread-safe. Observe, Forget and
// RunOnce may run on any thread at once (passes one at a time); Start runs
// passes on a thread of its own, and Stop is called from the thread that
// called Start.
//
//   ClaimAdvisor advisor(client, {.may_act = may_bind});
//   // the pod informer's handlers: advisor.Observe(pod) on add and update,
//   // advisor.Forget(pod) on delete
//   advisor.Start();   // every 2 s; advisor.Stop() before the client goes
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/dra_names.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/api.h"

namespace tessera::scheduler {

inline constexpr const char* kClaimUnsatisfiableReason = "TesseraClaimUnsatisfiable";

// What the driver's GPUs offer, read from ResourceSlices.
struct DraGpus {
  int devices = 0;                 // GPUs published, all nodes
  int64_t largest_memory_mib = 0;  // the largest GPU's memory capacity
  std::string largest;             // "gpu-0 on node n1"
  int64_t compute_percent = 100;   // the most compute a GPU offers (percent)
  int most_on_one_node = 0;        // GPUs of the node with most
  // Each published GPU's string attributes (name -> value), as its slice lists them.
  std::vector<std::map<std::string, std::string>> string_attributes;
};

// `slices` are ResourceSlice objects (any driver: others are skipped).
// Attributes that are not strings are not kept.
// Capacities that are not quantities are skipped.
DraGpus DraGpusFrom(const std::vector<nlohmann::json>& slices, const std::string& driver);

// The names of the DeviceClasses (objects) with a CEL selector that names
// `driver` in quotes, as `device.driver == "gpu.tessera.io"` does.
std::set<std::string> DriverClasses(const std::vector<nlohmann::json>& classes, const std::string& driver);

// One `device.attributes["<driver>"].<name> == "<value>"` of a CEL selector.
struct AttributeEquals {
  std::string name, value;
  bool operator==(const AttributeEquals&) const = default;
};

// What a CEL `expression` surely requires of a device of `driver`: each term
// of its top-level conjunction that is an equality of one of the driver's
// attributes (written `.name` or `["name"]`) with a string literal (either
// side, either quote, no escapes), in order. Other terms say nothing and are
// skipped; an expression with a top-level `||` or `?:` requires nothing
// alone and yields none. Never fails: what it cannot read yields none.
std::vector<AttributeEquals> RequiredEqualities(const std::string& expression, const std::string& driver);

// Why `claim` (a ResourceClaim object) can never be allocated on the
// driver's GPUs, "" when it might (or asks nothing of the driver's classes).
// The message names the claim, the request and the largest GPU, or the
// attribute values the GPUs publish.
std::string UnsatisfiableReason(const nlohmann::json& claim, const std::set<std::string>& classes,
                                const DraGpus& gpus, const std::string& driver);

// True for a pod kube-scheduler has marked unschedulable (PodScheduled
// False, reason Unschedulable), not bound, with at least one claim.
bool UnschedulableWithClaims(const nlohmann::json& pod);

// The names of the ResourceClaims `pod` uses: those generated from
// templates (status.resourceClaimStatuses) and those it names itself.
std::vector<std::string> PodClaimNames(const nlohmann::json& pod);

struct ClaimAdvisorOptions {
  std::string driver = core::kDraDriver;
  std::chrono::milliseconds period{2000};
  // OK when this replica may post Events (the leader, caches synced); the
  // advisor skips a pass otherwise. Empty: always.
  std::function<Status()> may_act{};
};

class ClaimAdvisor {
 public:
  // `api` must outlive the advisor.
  ClaimAdvisor(kube::Api& api, ClaimAdvisorOptions options);
  ~ClaimAdvisor();  // Stop()

  // A pod added or changed (the pod informer's handlers): kept while it is
  // unschedulable with claims (UnschedulableWithClaims), dropped otherwise.
  // Cheap for a pod without claims.
  void Observe(const nlohmann::json& pod) TESSERA_EXCLUDES(mu_);
  // A pod deleted.
  void Forget(const nlohmann::json& pod) TESSERA_EXCLUDES(mu_);

  // One pass: for each kept pod not looked at yet, reads its claims and
  // posts the Event when one can never be allocated. Reads the slices and
  // classes only when there is such a pod. Returns the Events posted;
  // errors of the API (the pass is tried again next period).
  Result<int> RunOnce() TESSERA_EXCLUDES(mu_);

  void Start();  // RunOnce every period on a thread of its own
  void Stop() TESSERA_EXCLUDES(mu_);

 private:
  kube::Api& api_;
  const ClaimAdvisorOptions options_;
  Mutex mu_;
  CondVar wake_;
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
  std::map<std::string, nlohmann::json> waiting_ TESSERA_GUARDED_BY(mu_);  // by uid: unschedulable pods with claims
  // Uids of kept pods looked at (given an Event, or with every claim read
  // and none impossible); dropped with the pod.
  std::set<std::string> advised_ TESSERA_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tessera::scheduler
