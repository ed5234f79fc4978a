// This node's pods, for the Allocate handshake (its pending pods) and the
// agent's loops (every pod, Cached): a watch-fed cache (a kube::Informer on
// spec.nodeName=<node>) read instead of LISTing the API server on every
// GetPreferredAllocation and Allocate, with a LIST whenever the cache cannot
// vouch for what it holds. The pods' JSON stops here: each cached pod is
// decoded (core::DecodePod) and parsed (PendingPodFrom) once per
// resourceVersion, and every read (Read, Cached) hands out the decoded views
// (pod_views.h), never the JSON. Thread-safe.
//
//   NodePods pods(api, "node-1", log);
//   TESSERA_RETURN_IF_ERROR(pods.Start());
//   TESSERA_ASSIGN_OR_RETURN(NodePods::Snapshot snap, pods.Read(/*fresh=*/false));
//   ... PATCH one of snap.pending ...; pods.NoteWrite(patched_pod);
//
// What the cache promises: Read(false) answers from it only once the first
// list has been applied and only when it reflects every write announced with
// NoteWrite (it waits up to write_wait for the watch to deliver the last one;
// otherwise it LISTs). It may still lag behind writes made by others (a pod
// bound a moment ago, a deletion): callers must not decide a failure on it
// alone, and Read(true) always LISTs.
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/pod_view.h"
#include "core/podspec.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "node/identify.h"
#include "node/pod_views.h"

namespace tessera::node {

// The pods bound to `node`, listed now from the API server (a LIST with
// spec.nodeName=<node>, not a cache), each decoded with `names` (a pod
// without a name is left out). The LIST's errors; INTERNAL when the answer
// holds no items.
Result<PodViews> ListNodePods(kube::Api& api, const std::string& node, const core::ResourceNames& names = {});

struct NodePodsOptions {
  // How long Read(false) waits for the cache to reflect the last NoteWrite
  // before it LISTs instead. Default 500 ms: the watch usually delivers a
  // write within milliseconds.
  std::chrono::milliseconds write_wait{500};
  // The extended resource names the pods' requests are read with (the node
  // agent's, with its front ends). Default: Tessera's own, no front end.
  core::ResourceNames resources;
};

class NodePods {
 public:
  // The pending pods read, and where from.
  struct Snapshot {
    std::vector<PendingPod> pending;  // as PendingPodsFromList gives them: oldest first
    bool listed = false;              // true: a LIST now; false: the watch cache
    // Every pod of the node, as read, decoded (for CheckHandOut). A pod
    // without identity (no name) is left out.
    PodViews pods;
  };

  // Does no I/O until Start() or a Read. `api` must outlive the NodePods.
  NodePods(kube::Api& api, std::string node, std::shared_ptr<spdlog::logger> log, NodePodsOptions options = {});
  NodePods(const NodePods&) = delete;
  NodePods& operator=(const NodePods&) = delete;

  // Starts the watch (list, then watch, on its own thread; it retries on its
  // own). Until its first list is applied every Read LISTs. Fails only when
  // already started. The watch ends when the object is destroyed.
  Status Start();

  // This node's pending pods: from the cache when `fresh` is false and the
  // cache can vouch for them (above), else from a LIST. Errors are the LIST's.
  Result<Snapshot> Read(bool fresh) TESSERA_EXCLUDES(mu_);

  // Announces a write of ours to one of the node's pods; `written` is the
  // object the API server answered with. Later Read(false) calls answer from
  // the cache only once it holds that write (its resourceVersion). A version
  // older than one already noted changes nothing; a missing or non-decimal
  // one (which cannot be waited for) makes Read LIST until a later write is
  // noted.
  void NoteWrite(const nlohmann::json& written) TESSERA_EXCLUDES(mu_);

  // Every pod the watch cache holds (any phase), decoded, or nullopt until
  // its first list has been applied. May lag behind the API server. A pod
  // without identity is left out.
  std::optional<PodViews> Cached() const TESSERA_EXCLUDES(mu_);

 private:
  // A cached pod's decoded view and pending view, valid while its
  // resourceVersion stays `rv`.
  struct Parsed {
    std::string rv;
    std::shared_ptr<const core::PodView> view;  // nullptr: no identity
    std::optional<PendingPod> pod;              // nullopt: not pending (allocated, finished, ...)
  };
  // The decoded view of `pod`; nullptr (logged) for a pod without identity.
  std::shared_ptr<const core::PodView> Decode(const nlohmann::json& pod) const;
  // Brings `parsed_` up to the watch cache (decoding only the pods whose
  // resourceVersion changed; forgetting those gone) and calls `each` with
  // every cached pod's entry.
  void Refresh(const std::function<void(const Parsed&)>& each) const TESSERA_REQUIRES(mu_);

  Result<Snapshot> List();
  Snapshot FromCache() TESSERA_EXCLUDES(mu_);

  kube::Api& api_;
  const std::string node_;
  std::shared_ptr<spdlog::logger> log_;
  const NodePodsOptions options_;
  kube::Informer informer_;
  mutable Mutex mu_;
  std::string last_write_ TESSERA_GUARDED_BY(mu_);  // newest version noted; "" none; "unknown": LIST
  // By namespace/name, the pods last read from the cache: a cache of their
  // decoding, so const reads (Cached) may update it.
  mutable std::map<std::string, Parsed> parsed_ TESSERA_GUARDED_BY(mu_);
};

}  // namespace tessera::node
