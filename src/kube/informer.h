// Informer: a local, eventually consistent copy of one collection (e.g.
// "/api/v1/pods"), kept by list + watch on its own thread, with handlers
// called for every add, update and delete.
//
// Thread-safety: Get/List/HasSynced from any thread. Handlers run on the
// informer thread, one at a time, in event order; the store already holds the
// new state when a handler runs. Register handlers before Start().
//
//   Informer pods(client, "/api/v1/pods");
//   TESSERA_RETURN_IF_ERROR(pods.AddHandlers({.on_add = [](const nlohmann::json& pod) { ... }}));
//   TESSERA_RETURN_IF_ERROR(pods.Start());
//   pods.WaitForSync(std::chrono::seconds(30));
//
// The store keeps each object without metadata.managedFields (the API
// server's record of which client set which field: on a pod often as large
// as the rest of its metadata and spec together, and read by nothing here),
// as kube-scheduler's informers do; InformerOptions::keep_managed_fields
// keeps it. Handlers get the stored objects (a delete: the last state the
// watch gave).
//
// Resilience: the watch resumes from the last resourceVersion seen (BOOKMARKs
// move it too). On 410 (too old) it lists again and delivers the difference
// from the store (adds, updates, deletes), so subscribers converge. Any other
// error is logged and retried with backoff (200 ms .. 30 s); the thread never
// gives up until Stop().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/api.h"

namespace tessera::kube {

struct EventHandlers {
  // Each may be empty. `{}` initialisers let designated initialisers name only some.
  std::function<void(const nlohmann::json& obj)> on_add{};
  std::function<void(const nlohmann::json& old_obj, const nlohmann::json& new_obj)> on_update{};
  std::function<void(const nlohmann::json& last_obj)> on_delete{};
};

struct InformerOptions {
  std::string label_selector;  // both sent on list and watch
  std::string field_selector;
  int page_size = 500;              // list page size
  int watch_timeout_seconds = 300;  // each watch request's timeoutSeconds
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_cap{30000};
  bool keep_managed_fields = false;  // store metadata.managedFields too
};

// What takes a store to a fresh list: keys gone (deleted, with their stored
// object), new keys (added) and keys whose metadata.resourceVersion changed
// (updated, old then new). Pure; unit-tested.
struct StoreDelta {
  std::vector<nlohmann::json> added;
  std::vector<std::pair<nlohmann::json, nlohmann::json>> updated;
  std::vector<nlohmann::json> deleted;
};
StoreDelta DiffStore(const std::map<std::string, nlohmann::json>& store, const std::vector<nlohmann::json>& items);

// True when resourceVersion `have` is at least `want`: both read as the
// decimal etcd revisions the API server hands out, which grow with every
// write. An empty `want` is always reached; an empty or non-decimal `have`
// (or a non-decimal `want`) never is, so a caller that cannot tell falls back
// to reading the API server. Pure; unit-tested.
bool ResourceVersionAtLeast(const std::string& have, const std::string& want);

// Makes `obj` what the store keeps: erases metadata.managedFields, in place
// (the informer owns each listed or watched object, so nothing is copied).
// Anything else, or an object without the field, is left as it is.
void DropManagedFields(nlohmann::json& obj);

class Informer {
 public:
  // `path` is the collection ("/api/v1/pods", "/api/v1/namespaces/ns/configmaps").
  // `api` (a Client, or a fake in tests) must outlive the informer.
  Informer(Api& api, std::string path, InformerOptions options = {});
  ~Informer();  // Stop()
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // kFailedPrecondition once started.
  Status AddHandlers(EventHandlers handlers);
  // Starts the thread. kFailedPrecondition when already started.
  Status Start();
  // Ends the watch, joins the thread. Handlers are not called after it
  // returns. Idempotent; must not be called from a handler.
  void Stop();

  // True once the first list has been applied.
  bool HasSynced() const { return synced_.load(); }
  // Waits up to `timeout` for HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // "namespace/name", or "name" for cluster-scoped objects.
  static std::string KeyOf(const nlohmann::json& obj);
  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  // Calls `fn` with every stored object and its key, in key order, holding
  // the store's lock: one consistent moment, without copying the objects.
  // `fn` must be quick and must not call this informer.
  void ForEach(const std::function<void(const std::string& key, const nlohmann::json& obj)>& fn) const;
  // The resourceVersion the next watch would start from.
  std::string ResourceVersion() const;
  // Waits up to `timeout` until the store reflects every write up to
  // resourceVersion `rv` (ResourceVersionAtLeast(ResourceVersion(), rv)): a
  // watch event, BOOKMARK or relist at `rv` or later has been applied. False
  // on timeout, on Stop(), or when the versions cannot be compared.
  bool WaitForResourceVersion(const std::string& rv, std::chrono::milliseconds timeout) const;
  // Full lists done so far: 1 after sync, +1 per relist after a 410.
  int ListCount() const { return lists_.load(); }

 private:
  void Run();
  Status ListAndApply();
  bool Apply(WatchEvent& event);
  void SleepFor(std::chrono::milliseconds d);

  Api& api_;
  const std::string path_;
  const InformerOptions options_;
  std::vector<EventHandlers> handlers_;  // fixed at Start()

  mutable Mutex mu_;
  mutable CondVar cv_;  // sync, stop and new-resourceVersion wake-ups
  std::map<std::string, nlohmann::json> store_ TESSERA_GUARDED_BY(mu_);
  std::string resource_version_ TESSERA_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::atomic<int> lists_{0};
  std::thread thread_;
};

}  // namespace tessera::kube
