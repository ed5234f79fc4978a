// The Allocate handshake against the API server: reads the pods pending on
// this node (from a watch cache of the node's pods, NodePods, with a LIST
// before any failure), identifies the container an Allocate (or a
// preferred-allocation request) is for, builds its env and marks the pod
// allocated with an optimistic-concurrency PATCH. tessera-node has one
// Allocator, owned by its plugin host (plugin_host.h), for every resource it
// serves: each call names the resource it came for, and only containers
// asking for that resource are candidates. Thread-safe: calls are serialised
// inside (one handshake at a time, whatever the resource), so two Allocates
// on one node never read the same pending pods at once.
//
//   Allocator allocator(api, "node-1", paths, log);
//   TESSERA_RETURN_IF_ERROR(allocator.Start());
//   TESSERA_ASSIGN_OR_RETURN(ContainerEnv env, allocator.Allocate("tessera.io/gpu", {"GPU-a-0"}, gpus));
#pragma once

#include <spdlog/logger.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/api.h"
#include "node/container_env.h"
#include "node/gpu_book.h"
#include "node/identify.h"
#include "node/node_pods.h"

namespace tessera::node {

// Whether the MPS daemon of GPU `uuid` runs now (MpsSupervisor::Running).
// Called with the Allocator's lock held; must not call back into it.
using MpsProbe = std::function<bool(const std::string& uuid)>;

// Told of each container's Allocate outcome, whatever its resource, before
// the kubelet gets the answer: OK, or the error and the pods it concerns
// (Allocate's `named`). Called with the Allocator's lock held: must return
// at once (no I/O) and must not call back into it.
using AllocateObserver = std::function<void(const Status& status, const std::vector<PodRef>& pods)>;

class Allocator {
 public:
  // `api` must outlive the Allocator.
  Allocator(kube::Api& api, std::string node, MountPaths paths, std::shared_ptr<spdlog::logger> log,
            NodePodsOptions pods = {});

  // For MPS pods, Allocate asks `probe` whether their GPU's daemon runs,
  // rather than trusting the `mps` flags of the inventory it is given (which
  // may be a resync old). Call before Start; without it the flags decide.
  void SetMpsProbe(MpsProbe probe) { mps_probe_ = std::move(probe); }
  // Every Allocate's outcome goes to `observer` (metrics, Events). Call
  // before Start.
  void SetObserver(AllocateObserver observer) { observer_ = std::move(observer); }

  // Starts the watch of this node's pods. Until it has synced, and whenever
  // it cannot vouch for its copy, calls LIST the pods instead. Fails only when
  // already started.
  Status Start();

  // Identifies the container `device_ids` (of `resource`) are for, builds
  // its env, creates its region directory and adds it to the pod's
  // tessera.io/allocated annotation (a merge PATCH carrying the pod's
  // resourceVersion; re-read and retried on 409). Only pods whose next
  // container asks for `resource` are candidates (KeepPendingFor); an empty
  // `resource` considers every pod. Before a pod's first container, its
  // assignment is checked against the pod's own request and spec
  // (CheckHandOut, handout.h) and then booked in the node's GpuBook (book()),
  // the one check against every other pod and every prepared DRA claim:
  // PERMISSION_DENIED when it is not what the pod asks for or does not fit
  // beside the other pods (a copied or forged assignment), RESOURCE_EXHAUSTED
  // naming the pod, the GPU and the holders already on it when it fits
  // beside the pods but not beside the claims; the booking is released
  // again when a later step fails. Errors say why nothing was allocated
  // (IdentifyContainer's messages, a refused
  // assignment, an unknown GPU, an MPS pod whose GPU runs no MPS daemon, an
  // API failure); nothing is marked then. On an error,
  // `named` (when given) receives the pods it concerns: the candidates
  // IdentifyContainer names, or the identified pod when a later step failed;
  // empty when it concerns none (bad device IDs, the pod list unreadable).
  // It identifies on the watch cache, which reflects every allocation this
  // Allocator marked; when that finds no single container it LISTs the pods
  // and identifies again, so a pod bound a moment ago is found and a refusal
  // never rests on the cache alone. The observer is told the outcome.
  Result<ContainerEnv> Allocate(const std::string& resource, const std::vector<std::string>& device_ids,
                                const std::vector<core::GpuInfo>& gpus, std::vector<PodRef>* named = nullptr)
      TESSERA_EXCLUDES(mu_);

  // The device IDs to prefer among `available` for a container of `size`
  // slots of `resource`: one per GPU of the oldest pending container asking
  // for `resource` that fits (the first available slot of each GPU),
  // `must_include` kept. Empty when no pending container fits (the kubelet
  // then chooses); "no container fits" is decided on a LIST, as Allocate's
  // refusals are. Remembers the choice, per resource, for Allocate's
  // tie-break.
  Result<std::vector<std::string>> Prefer(const std::string& resource, const std::vector<std::string>& available,
                                          const std::vector<std::string>& must_include, size_t size)
      TESSERA_EXCLUDES(mu_);

  // The node's one book of GPU shares (gpu_book.h), which the DRA driver
  // books its claims in too. Lives as long as the Allocator.
  GpuBook& book() { return book_; }

  // The node's pods as the watch cache holds them, decoded (NodePods::Cached).
  std::optional<PodViews> CachedPods() const { return pods_.Cached(); }

 private:
  Status MarkAllocated(const PendingPod& pod, const std::string& container) TESSERA_REQUIRES(mu_);
  // The compute arbiter's record of `container` (logged, not fatal, when it cannot be written).
  void WriteArbiterFor(const PendingPod& pod, const PendingContainer& container, const std::string& region_dir);
  // Drops from `read.pending` the pods whose hand-out this agent refused
  // (the kubelet fails such a pod, but until its status says so it still
  // looks pending, and would be named for the next Allocate on its GPUs);
  // forgets refused pods no longer in `read.pods`.
  void DropRefused(NodePods::Snapshot& read) TESSERA_REQUIRES(mu_);
  // Reads the node's pods (a LIST when `fresh`) and keeps the pending ones
  // `resource` may be for.
  Result<NodePods::Snapshot> ReadFor(const std::string& resource, bool fresh) TESSERA_REQUIRES(mu_);
  Result<ContainerEnv> AllocateLocked(const std::string& resource, const std::vector<std::string>& device_ids,
                                      const std::vector<core::GpuInfo>& gpus, std::vector<PodRef>& concerned)
      TESSERA_REQUIRES(mu_);

  // What GetPreferredAllocation last steered to, for one resource.
  struct Steer {
    ContainerRef container;
    std::vector<std::string> ids;  // sorted
  };

  kube::Api& api_;
  const std::string node_;
  const MountPaths paths_;
  std::shared_ptr<spdlog::logger> log_;
  MpsProbe mps_probe_;  // set before Start; may be empty
  AllocateObserver observer_;  // set before Start; may be empty
  NodePods pods_;
  GpuBook book_;
  Mutex mu_;  // one handshake at a time
  std::map<std::string, Steer> steered_ TESSERA_GUARDED_BY(mu_);      // by resource
  std::set<std::string> refused_uids_ TESSERA_GUARDED_BY(mu_);        // pods CheckHandOut or the book refused
};

}  // namespace tessera::node
