// Leader election over a coordination.k8s.io/v1 Lease, as client-go does it:
// one of several replicas holds the lease and renews it; the others take it
// over when it expires or is released.
//
// Thread-safety: IsLeader() from any thread. The callbacks run on the
// elector's thread and should return quickly (hand work to another thread).
//
//   LeaderElector elector(client, {.lease_namespace = "kube-system", .name = "tessera-scheduler",
//                                  .identity = pod_name, .on_started_leading = [] { ... }});
//   TESSERA_RETURN_IF_ERROR(elector.Start());
//   ...
//   elector.Stop();   // releases the lease so a successor takes over at once
//
// Safety: every write is a create (fails if the lease exists) or an update
// carrying the resourceVersion read, so two candidates never both win a round.
// A lease held by another is taken only when its holder is empty or it has
// not changed for leaseDurationSeconds as timed by this process's clock
// (not the holder's renewTime, so clock skew cannot shorten it). A leader that
// cannot renew within renew_deadline steps down (on_stopped_leading) and
// becomes a candidate again.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/client.h"

namespace tessera::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;  // where the Lease lives
  std::string name;             // the Lease's name
  std::string identity;         // this candidate, unique among candidates (e.g. pod name)
  std::chrono::milliseconds lease_duration{15000};  // how long a lease holds without renewal
  std::chrono::milliseconds renew_deadline{10000};  // a leader steps down when it cannot renew for this long
  std::chrono::milliseconds retry_period{2000};     // time between attempts to acquire or renew
  std::function<void()> on_started_leading{};  // may be empty
  std::function<void()> on_stopped_leading{};
};

// "2026-01-02T03:04:05.000000Z": the MicroTime format of renewTime/acquireTime.
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

// The Lease to write for `identity` to take or renew `current` (null: no
// lease yet), or nullopt when current is held by another holder and not
// `expired`. Keeps metadata (resourceVersion included) for an optimistic
// update; sets holderIdentity, leaseDurationSeconds and renewTime, and on a
// change of holder acquireTime and leaseTransitions + 1. Pure; unit-tested.
std::optional<nlohmann::json> NextLease(const nlohmann::json& current, const std::string& ns, const std::string& name,
                                        const std::string& identity, int lease_duration_seconds, bool expired,
                                        std::chrono::system_clock::time_point now);

class LeaderElector {
 public:
  // Talks to the server through a client of its own, made from
  // client.config() with timeouts within the renew deadline and at most one
  // retry, so a slow request cannot outlast the lease.
  LeaderElector(Client client, LeaderElectionConfig config);
  ~LeaderElector();  // Stop()
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts campaigning on a thread of its own. kInvalidArgument for a bad
  // config (empty names, retry_period < renew_deadline < lease_duration not
  // holding); kFailedPrecondition when already started.
  Status Start();
  // Stops campaigning; if leading, releases the lease (holderIdentity "",
  // leaseDurationSeconds 1) and calls on_stopped_leading, then joins.
  // Idempotent; must not be called from a callback.
  void Stop();

  bool IsLeader() const { return leader_.load(); }
  // The holder last seen on the lease ("" when none or not read yet).
  std::string LastObservedHolder() const;

 private:
  void Run();
  // One attempt to acquire or renew: true when we hold the lease after it.
  Result<bool> TryAcquireOrRenew();
  void Release();
  void SleepFor(std::chrono::milliseconds d);

  Client client_;
  const LeaderElectionConfig config_;
  const std::string path_;

  mutable Mutex mu_;
  CondVar cv_;                                           // Stop() wakes SleepFor
  std::string observed_holder_ TESSERA_GUARDED_BY(mu_);
  std::string observed_record_;                          // holder + renewTime + RV last seen; thread only
  std::chrono::steady_clock::time_point observed_time_;  // when observed_record_ last changed; thread only
  nlohmann::json last_lease_;                            // our last written lease; thread only
  std::atomic<bool> leader_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tessera::kube
