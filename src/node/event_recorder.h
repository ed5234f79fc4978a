// Posts Kubernetes Events for tessera-node from one background thread, so a
// caller on a hot path (Allocate) never waits on the API server. The queue is
// bounded and identical events (same object, type, reason and message) within
// a window are dropped, so a failure repeated in a burst is raised once.
// Thread-safety: Record from any thread.
//
//   EventRecorder events([&](auto& path, auto& body) { return api.Create(path, body).status(); }, {}, log);
//   events.Record(spec);   // a kube::EventSpec; returns at once
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/events.h"
#include "node/identify.h"

namespace tessera::node {

// Event reasons tessera-node raises on pods.
inline constexpr const char* kAllocateFailedReason = "TesseraAllocateFailed";
// An Allocate refused because the pod's assignment was not handed out (handout.h).
inline constexpr const char* kAssignmentRefusedReason = "TesseraAssignmentRefused";
inline constexpr const char* kMismatchReason = "TesseraAllocationMismatch";
inline constexpr const char* kOomRefusedReason = "TesseraOOMRefused";

// A Warning Event on `pod` from tessera-node on `node`.
kube::EventSpec PodWarning(const PodRef& pod, const std::string& reason, const std::string& message,
                           const std::string& node);

struct EventRecorderOptions {
  size_t max_queued = 256;                        // more waiting events than this: new ones are dropped
  std::chrono::milliseconds dedupe_window{5000};  // an identical event within this is dropped
};

class EventRecorder {
 public:
  // POSTs `body` to the collection `path`; the recorder's only I/O.
  using Poster = std::function<Status(const std::string& path, const nlohmann::json& body)>;

  EventRecorder(Poster post, EventRecorderOptions options, std::shared_ptr<spdlog::logger> log);
  // Finishes the POST in flight; events still queued are dropped.
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues `spec` for posting and returns true; false (nothing queued) when
  // an identical event was queued within the window or the queue is full.
  // Never blocks on I/O. Post failures are logged and not retried.
  bool Record(const kube::EventSpec& spec) TESSERA_EXCLUDES(mu_);

  // Blocks until every queued event was posted or failed (tests).
  void FlushForTest() TESSERA_EXCLUDES(mu_);

 private:
  void Loop() TESSERA_EXCLUDES(mu_);

  const Poster post_;
  const EventRecorderOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  Mutex mu_;
  CondVar cv_;  // queued, posted or stopping
  std::deque<kube::EventSpec> queue_ TESSERA_GUARDED_BY(mu_);
  std::map<std::string, std::chrono::steady_clock::time_point> recent_ TESSERA_GUARDED_BY(mu_);  // key -> queued at
  bool busy_ TESSERA_GUARDED_BY(mu_) = false;  // a POST in flight
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tessera::node
