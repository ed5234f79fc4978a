// tessera-scheduler's side of the Kubernetes API, over a kube::Api: the
// extender's Binder (pods/binding with the assignment in the same update),
// the preemptor's PreemptionApi (evictions and Events) and the wake-up of
// pods turned away for lack of room just before a share was freed. main.cc
// wires them to the kube::Client; unit tests to a kube::FakeApi.
//
// Thread-safety: as the kube::Api they are given (any thread), which must
// outlive them.
//
//   kube::Client client(config);
//   ApiBinder binder(client);
//   auto extender = Extender::Create(state, binder, options);
//   WakeRejected(client, (*extender)->rejected(), RejectedPods::Clock::now(), std::chrono::system_clock::now());
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/api.h"
#include "scheduler/extender.h"
#include "scheduler/preemptor.h"
#include "scheduler/rejected_pods.h"

namespace tessera::scheduler {

// Binding requests in flight at once by default (ApiBinder): as many as the
// extender's fixed pool of HTTP threads let through before it grew on
// demand, and within the client's pool of reusable connections (96,
// src/kube/internal/curl_session.cc), so binds reuse them instead of each
// opening a TLS connection.
inline constexpr int kMaxBindsInFlight = 64;

// Posts Bindings through `api` (kube::Api::Bind: the uid a precondition,
// the annotations merged in the update that binds), at most
// `max_in_flight` at once; further binds wait for a turn. kube-scheduler
// sends a bind per pod as fast as it schedules them: unbounded, each bind
// beyond the client's connection pool paid a TLS handshake with the API
// server, which then slowed every bind until kube-scheduler's calls timed
// out (measured: 600 binds at once, a median Binding of 4 s). More at once
// than the API server serves only queue there.
class ApiBinder final : public Binder {
 public:
  explicit ApiBinder(kube::Api& api, int max_in_flight = kMaxBindsInFlight)
      : api_(api), max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight) {}
  Status Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
              const std::map<std::string, std::string>& annotations) override;

 private:
  kube::Api& api_;
  const int max_in_flight_;
  Mutex mu_;
  CondVar turn_;  // a bind finished
  int in_flight_ TESSERA_GUARDED_BY(mu_) = 0;
};

// Evictions and Events for GPU preemption through `api`. Events come from
// component tessera-scheduler; one that cannot be posted is logged and
// dropped.
class ApiPreemption final : public PreemptionApi {
 public:
  explicit ApiPreemption(kube::Api& api) : api_(api) {}
  Status Evict(const std::string& ns, const std::string& name, const std::string& uid, bool dry_run) override;
  void RecordEvent(const std::string& ns, const std::string& name, const std::string& uid, const std::string& type,
                   const std::string& reason, const std::string& message) override;

 private:
  kube::Api& api_;
};

// A pod turned away within this long before room appeared (a share freed,
// a GPU node added or changed: ClusterState::freed_count) may have been
// retried by kube-scheduler against a state that had not yet seen the change
// (kube-scheduler's own watch was faster).
inline constexpr std::chrono::seconds kWakeWindow{5};
// At most this many PATCHes per freed share, so the pod watch's thread is
// never held long. Enough: once one woken pod binds, kube-scheduler retries
// every parked pod on that event.
inline constexpr size_t kMaxWakesPerRelease = 8;
// The annotation a wake writes: when the room was freed (RFC 3339, micro).
inline constexpr const char* kRoomFreedAnnotation = "tessera.io/room-freed-at";

// Touches each pod of `rejected` noted within kWakeWindow before `now` (at
// most kMaxWakesPerRelease, taken out of `rejected`) with
// kRoomFreedAnnotation = `wall_now`: a pod update that makes kube-scheduler
// retry it now instead of at its next cluster event or unschedulable flush.
// Each PATCH carries the pod's uid as a precondition, so a newer pod of the
// same name is never touched. Failures are logged at debug and dropped.
// Returns how many pods were woken.
int WakeRejected(kube::Api& api, RejectedPods& rejected, RejectedPods::Clock::time_point now,
                 std::chrono::system_clock::time_point wall_now);

}  // namespace tessera::scheduler
