// The Kubernetes API as Tessera's daemons use it: the few verbs the node
// agent (pod cache, Allocate handshake, its loops, Events, the Node's
// inventory), the informer and the scheduler's bind and preemption adapters
// call. An interface, so that those pieces take it by reference and unit
// tests hand them an in-memory fake (kube::FakeApi, fake_api.h) instead of
// an API server. The binaries use kube::Client (client.h), the REST client,
// which implements it; its header holds the full contract of each verb (the
// HTTP mapping, retries, rate limits).
//
// Contract shared by every implementation: paths are apiserver paths
// ("/api/v1/namespaces/ns/pods/p", built with paths.h); errors map as
// api_error.h says (kNotFound, kAlreadyExists, kFailedPrecondition for a
// 409 Conflict such as a resourceVersion or uid precondition that failed,
// kOutOfRange for a watch whose resourceVersion is too old, kUnavailable
// for what may be retried); objects are v1 JSON.
//
// Thread-safety: implementations are thread-safe; any number of threads may
// call any method at once. Whoever takes an Api& does not own it: the
// caller keeps the object alive for as long as it is used (main() owns the
// Client; a test owns its FakeApi).
//
//   void Annotate(kube::Api& api) {
//     auto pod = api.Patch(kube::PodPath("ns", "p"), kube::PatchType::kMerge, {{"metadata", {{"labels", {{"a", "b"}}}}}});
//   }
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "kube/watch_stream.h"

namespace tessera::kube {

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in types only)
  kJson,            // application/json-patch+json (RFC 6902; the patch is an array)
};

// The defaults below are the interface's; an implementation's override
// repeats them unchanged, so a call means the same through either type.
class Api {
 public:
  virtual ~Api() = default;

  // The object at `path`.
  virtual Result<nlohmann::json> Get(const std::string& path) = 0;

  // Every item of the collection at `path` (all namespaces when the path
  // names none), filtered by the selectors when non-empty:
  // {"items": [...], "resourceVersion": "<list RV>"}. `page_size` is a hint
  // to implementations that page.
  virtual Result<nlohmann::json> List(const std::string& path, const std::string& label_selector = "",
                                      const std::string& field_selector = "", int page_size = 500) = 0;

  // POSTs `body` to the collection at `path`; the created object, with the
  // name the server chose for a metadata.generateName. kAlreadyExists when
  // the name is taken.
  virtual Result<nlohmann::json> Create(const std::string& path, const nlohmann::json& body) = 0;

  // PATCHes the object at `path`; the patched object. A merge patch that
  // carries metadata.resourceVersion or metadata.uid makes it a
  // precondition: kFailedPrecondition (409 Conflict) when the object's
  // differs, nothing changed.
  virtual Result<nlohmann::json> Patch(const std::string& path, PatchType type, const nlohmann::json& patch) = 0;

  // Binds pod ns/name to `node` (pods/binding), `uid` a precondition when
  // non-empty, `annotations` merged into the pod in the same update.
  // kFailedPrecondition when the pod is already bound or its uid differs;
  // kNotFound when it is gone.
  virtual Status Bind(const std::string& ns, const std::string& name, const std::string& uid,
                      const std::string& node, const std::map<std::string, std::string>& annotations = {}) = 0;

  // Evicts pod ns/name (pods/eviction, honouring PodDisruptionBudgets),
  // `uid` a precondition when non-empty; with `dry_run` nothing happens
  // beyond the checks. kResourceExhausted when a budget forbids it now;
  // kNotFound when the pod is gone.
  virtual Status Evict(const std::string& ns, const std::string& name, const std::string& uid = "",
                       bool dry_run = false) = 0;

  // Watches `path` (which may carry a query such as a fieldSelector) from
  // `resource_version` ("" : from now) and calls on_event for each event,
  // BOOKMARKs included, on the calling thread. Returns OK when the stream
  // ends (timeout_seconds, on_event returned false, *stop became true:
  // checked at least every 100 ms); kOutOfRange when `resource_version` is
  // too old (relist). Not retried: the caller resumes from the last
  // resourceVersion it saw.
  virtual Status Watch(const std::string& path, const std::string& resource_version,
                       const WatchHandler& on_event,
                       const std::atomic<bool>* stop = nullptr, int timeout_seconds = 300) = 0;

 protected:
  // Copyable where the implementation is (a Client is a shared handle).
  Api() = default;
  Api(const Api&) = default;
  Api& operator=(const Api&) = default;
};

}  // namespace tessera::kube
