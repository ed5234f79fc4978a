// A small Kubernetes REST client over libcurl: JSON objects in and out
// (nlohmann::json), typed only where Tessera needs it (Bind, Watch). It
// implements kube::Api (api.h), the interface the daemons' pieces take so
// unit tests can hand them a fake; Update, Delete and config() are the
// client's own.
//
// Thread-safety: a Client is a cheap handle; copies share one connection pool
// and one rate limiter, and any number of threads may call any method at once.
// A moved-from Client must not be used.
//
//   TESSERA_ASSIGN_OR_RETURN(ClientConfig config, ResolveConfig(""));
//   Client client(std::move(config));
//   TESSERA_ASSIGN_OR_RETURN(nlohmann::json pods, client.List(PodsPath("default")));
//
// Paths are apiserver paths ("/api/v1/namespaces/ns/pods"); build them with
// paths.h, which escapes names. Errors map HTTP codes as api_error.h says and
// read "VERB PATH: CODE REASON: MESSAGE". Every request first takes a token
// from the client's bucket (config.qps, config.burst). Retries: up to
// config.max_retries, with exponential backoff from 100 ms (jittered, capped
// at 5 s, or the server's Retry-After when longer, up to 30 s), for 429, 5xx
// and transport errors on GET/PUT/PATCH/DELETE; POST is retried only when the
// server cannot have acted on it (429, or no connection was made).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "kube/api.h"
#include "kube/api_error.h"
#include "kube/config.h"
#include "kube/paths.h"
#include "kube/watch_stream.h"

namespace tessera::kube {

class Client final : public Api {
 public:
  // Does no I/O; a bad server or credentials show up as errors of the first request.
  explicit Client(ClientConfig config);

  // The object at `path`.
  Result<nlohmann::json> Get(const std::string& path) override;

  // Every item of the collection at `path`, fetched page_size at a time by
  // following `continue`: {"items": [...], "resourceVersion": "<list RV>"}.
  // Selectors are sent as labelSelector / fieldSelector when non-empty. An
  // expired continue token restarts the list once, unpaged.
  Result<nlohmann::json> List(const std::string& path, const std::string& label_selector = "",
                              const std::string& field_selector = "", int page_size = 500) override;

  // POST `body` to the collection at `path`; the created object.
  // kAlreadyExists when the name is taken.
  Result<nlohmann::json> Create(const std::string& path, const nlohmann::json& body) override;
  // PUT: replaces the object; with metadata.resourceVersion set, fails with
  // kFailedPrecondition (409 Conflict) if the object changed since.
  Result<nlohmann::json> Update(const std::string& path, const nlohmann::json& body);
  // PATCH with the given patch format; the patched object.
  Result<nlohmann::json> Patch(const std::string& path, PatchType type, const nlohmann::json& patch) override;
  // DELETE, with ?gracePeriodSeconds= when given, and with `uid` as a
  // precondition (DeleteOptions) when non-empty, so a newer object of the
  // same name is never deleted in its place. kNotFound when already gone;
  // kFailedPrecondition (409 Conflict) when the uid differs.
  Status Delete(const std::string& path, std::optional<int> grace_period_seconds = std::nullopt,
                const std::string& uid = "");

  // Binds pod ns/name to `node` through POST .../pods/{name}/binding, with
  // metadata.uid as a precondition (when non-empty) and `annotations` merged
  // into the pod in the same atomic update that sets spec.nodeName.
  // kFailedPrecondition (409 Conflict) when the pod is already bound or its
  // uid differs; kNotFound when the pod is gone.
  Status Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              const std::map<std::string, std::string>& annotations = {}) override;

  // Evicts pod ns/name through POST .../pods/{name}/eviction (a policy/v1
  // Eviction, which honours PodDisruptionBudgets), with `uid` as a
  // precondition when non-empty; with `dry_run` the server only checks
  // (dryRun: [All]). kResourceExhausted when a PodDisruptionBudget forbids
  // it now (429, not retried); kNotFound when the pod is gone.
  Status Evict(const std::string& ns, const std::string& name, const std::string& uid = "",
               bool dry_run = false) override;

  // Streams `path`?watch=1&allowWatchBookmarks=true&timeoutSeconds=T
  // [&resourceVersion=RV] (`path` may already carry a query, e.g. a
  // labelSelector) and calls on_event for each event, BOOKMARKs included, on
  // the calling thread. Returns OK when the server ends the stream (e.g. at
  // timeoutSeconds), when on_event returns false, or when *stop becomes true
  // (checked at least every 100 ms). kOutOfRange when the server answers 410
  // or sends an ERROR event with code 410 (resourceVersion too old: relist);
  // other ERROR events and HTTP errors map as api_error.h says; a dropped
  // connection is kUnavailable. Not retried: the caller resumes from the last
  // resourceVersion it saw.
  Status Watch(const std::string& path, const std::string& resource_version,
               const WatchHandler& on_event, const std::atomic<bool>* stop = nullptr,
               int timeout_seconds = 300) override;

  const ClientConfig& config() const;

  // TCP connections (each with a TLS handshake, full or resumed) that this
  // client and its copies have opened so far, for requests and watches. For
  // benchmarks and tests.
  int64_t connections_opened() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera::kube
