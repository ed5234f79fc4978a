// FakeApi: an in-memory kube::Api for unit tests, so the node agent's pieces
// and the scheduler's adapters run against something that behaves like the
// API server on the points they rely on, without one. Integration and e2e
// tests keep the real kube-apiserver; this is for unit tests only.
//
// What it does, and no more (only what the callers use):
//   - objects by path (core /api/v1 and /apis/<group>/<version> paths, as
//     paths.h builds them), each write giving the object the next
//     resourceVersion of one store-wide counter (decimal, as etcd's);
//   - Create: name from metadata.name or generateName, namespace from the
//     path, a pod-uid-shaped uid; kAlreadyExists for a taken name;
//   - List with field selectors (key=value, key==value, key!=value on dotted
//     fields such as spec.nodeName; a missing field reads "") and label
//     selectors (k=v, k==v, k!=v, k, !k); other syntax is INVALID_ARGUMENT;
//   - Patch: merge patches (RFC 7386) only; metadata.resourceVersion and
//     metadata.uid in the patch are preconditions, a mismatch is the API
//     server's 409 Conflict (kFailedPrecondition) and changes nothing;
//   - Bind (spec.nodeName and the annotations in one write; 409 when already
//     bound or the uid differs) and Evict (the pod is removed at once);
//   - Watch: every write is kept in a history that watches replay from
//     their resourceVersion and then follow, ADDED / MODIFIED / DELETED as
//     the object enters, changes in or leaves the watch's selectors; no
//     BOOKMARKs. ExpireWatches compacts the history (a watch behind it ends
//     with kOutOfRange, as a 410 Gone makes the real one), HoldWatches
//     pauses delivery, so a test makes a watcher miss events and relist.
// Errors carry the real client's codes and read as its messages do
// ("PATCH /api/v1/...: 409 Conflict: ..."). Not modelled: defaulting,
// validation, status subresources, finalizers and graceful deletion,
// paging, BOOKMARKs, admission.
//
// The test's side: Upsert and Remove write as another client would (the
// watches see them; no call is recorded), Peek reads without a call, Calls
// lists the Api calls made so far, and a hook runs before each Api call to
// fail it (an API server away) or to change the store first (another
// writer winning a race).
//
// Thread-safety: every method may be called from any thread. A FakeApi must
// outlive every call into it (stop the informers that watch it first).
//
//   FakeApi api;
//   api.Upsert(PodsPath("ns"), pod);                  // resourceVersion "1"
//   Informer pods(api, PodsPath(""), {.field_selector = "spec.nodeName=n1"});
//   api.SetHook([&](const FakeApi::Call& c) {        // someone else writes first
//     if (c.verb == "PATCH") api.Upsert(PodsPath("ns"), changed_pod);
//     return Status::Ok();
//   });
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/api.h"

namespace tessera::kube {

class FakeApi final : public Api {
 public:
  // One Api call: its verb (GET, LIST, POST, PATCH, BIND, EVICT, WATCH) and
  // path (for BIND and EVICT the pod's path); `body` is the POST body, the
  // PATCH's patch or BIND's {"node", "uid", "annotations"}, else null.
  struct Call {
    std::string verb;
    std::string path;
    nlohmann::json body;
  };
  // Runs before each Api call, without the fake's lock: may call the test's
  // side (Upsert, Remove, Peek, ...) but not the Api methods. A non-OK
  // status fails the call with it, nothing done.
  using Hook = std::function<Status(const Call& call)>;

  FakeApi() = default;
  FakeApi(const FakeApi&) = delete;
  FakeApi& operator=(const FakeApi&) = delete;

  // kube::Api (api.h states the contracts; the fake's limits are above).
  Result<nlohmann::json> Get(const std::string& path) override TESSERA_EXCLUDES(mu_);
  Result<nlohmann::json> List(const std::string& path, const std::string& label_selector = "",
                              const std::string& field_selector = "", int page_size = 500) override
      TESSERA_EXCLUDES(mu_);
  Result<nlohmann::json> Create(const std::string& path, const nlohmann::json& body) override TESSERA_EXCLUDES(mu_);
  Result<nlohmann::json> Patch(const std::string& path, PatchType type, const nlohmann::json& patch) override
      TESSERA_EXCLUDES(mu_);
  Status Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              const std::map<std::string, std::string>& annotations = {}) override TESSERA_EXCLUDES(mu_);
  Status Evict(const std::string& ns, const std::string& name, const std::string& uid = "",
               bool dry_run = false) override TESSERA_EXCLUDES(mu_);
  Status Watch(const std::string& path, const std::string& resource_version,
               const WatchHandler& on_event, const std::atomic<bool>* stop = nullptr,
               int timeout_seconds = 300) override TESSERA_EXCLUDES(mu_);

  // --- The test's side. ---

  // Creates or replaces the object named by `object`'s metadata in the
  // collection at `collection` (e.g. PodsPath("ns"), "/api/v1/nodes"), as
  // another client would: a new resourceVersion, the namespace from the
  // path, a uid when it has none (a replaced object keeps the stored one
  // unless `object` names another). The stored object; INVALID_ARGUMENT for
  // a path that is not a collection or an object without a name.
  Result<nlohmann::json> Upsert(const std::string& collection, nlohmann::json object) TESSERA_EXCLUDES(mu_);
  // Deletes the object at `path`; NOT_FOUND when there is none.
  Status Remove(const std::string& path) TESSERA_EXCLUDES(mu_);
  // The object at `path` now, or nullopt; no call is recorded.
  std::optional<nlohmann::json> Peek(const std::string& path) const TESSERA_EXCLUDES(mu_);
  // The store's resourceVersion: that of its latest write ("0" before any).
  std::string ResourceVersion() const TESSERA_EXCLUDES(mu_);

  // Every Api call so far, in order (calls a hook failed included).
  std::vector<Call> Calls() const TESSERA_EXCLUDES(mu_);
  // How many of them had `verb`.
  int CountCalls(const std::string& verb) const TESSERA_EXCLUDES(mu_);
  // Replaces the hook (an empty one: none).
  void SetHook(Hook hook) TESSERA_EXCLUDES(mu_);

  // While held, open watches deliver nothing; writes are kept for them.
  void HoldWatches(bool hold) TESSERA_EXCLUDES(mu_);
  // Forgets the history up to now: a watch that has not delivered every
  // write so far ends with kOutOfRange, and so does a Watch from an older
  // resourceVersion; a relist (List) then brings the caller back.
  void ExpireWatches() TESSERA_EXCLUDES(mu_);
  // Watch calls running now.
  int OpenWatches() const TESSERA_EXCLUDES(mu_);

 private:
  // One write, as watches replay it: the object before (null when created)
  // and after (null when deleted).
  struct Write {
    uint64_t rv = 0;
    std::string key;  // the object's path
    nlohmann::json before;
    nlohmann::json after;
  };

  // Records `call` and runs the hook.
  Status Begin(Call call) TESSERA_EXCLUDES(mu_);
  // Stores `after` (null: deletes) at `key` with the next resourceVersion,
  // keeps the write for watches and wakes them. The stored object.
  nlohmann::json CommitLocked(const std::string& key, nlohmann::json after) TESSERA_REQUIRES(mu_);

  mutable Mutex mu_;
  CondVar changed_;  // a write, a hold released or an expiry: watches look again
  uint64_t rv_ TESSERA_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ TESSERA_GUARDED_BY(mu_) = 0;  // generated names and uids
  std::map<std::string, nlohmann::json> objects_ TESSERA_GUARDED_BY(mu_);  // by path
  std::vector<Write> history_ TESSERA_GUARDED_BY(mu_);  // writes after compacted_, oldest first
  uint64_t compacted_ TESSERA_GUARDED_BY(mu_) = 0;       // writes up to this rv are forgotten
  bool hold_ TESSERA_GUARDED_BY(mu_) = false;
  int open_watches_ TESSERA_GUARDED_BY(mu_) = 0;
  std::vector<Call> calls_ TESSERA_GUARDED_BY(mu_);
  Hook hook_ TESSERA_GUARDED_BY(mu_);
};

}  // namespace tessera::kube
