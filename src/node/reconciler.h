// tessera-node's reconciliation pass: the kubelet's pod-resources record of
// the agent's resource, checked against the assignments of the pods bound
// to the node (reconcile.h decides; this does the I/O and reports). Each new
// mismatch is logged, counted (tessera_node_allocation_mismatches_total) and
// raised once as a Warning Event on its pod; each completed pass is counted
// (tessera_node_reconcile_runs_total). A pass with the socket absent, or
// with the kubelet or the API server unreachable, is skipped with a log line.
// Thread-compatible: one pass at a time (the agent runs it on a
// PeriodicLoop).
//
//   Reconciler reconciler({.node = "n1", .resource = "tessera.io/gpu", .socket = path}, api, events, metrics, log);
//   reconciler.Pass();
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <memory>
#include <string>

#include "kube/api.h"
#include "node/event_recorder.h"
#include "node/node_metrics.h"
#include "node/reconcile.h"

namespace tessera::node {

struct ReconcilerOptions {
  std::string node;      // this Node's name
  std::string resource;  // the resource whose kubelet records are checked (--resource-name)
  std::string socket;    // the kubelet's pod-resources socket (--pod-resources-socket)
  std::chrono::milliseconds timeout{5000};  // of the pod-resources List call
};

class Reconciler {
 public:
  // `api`, `events` and the counters of `metrics` must outlive the Reconciler.
  Reconciler(ReconcilerOptions options, kube::Api& api, EventRecorder& events, const NodeMetrics& metrics,
             std::shared_ptr<spdlog::logger> log);

  // One pass (above).
  void Pass();

 private:
  const ReconcilerOptions options_;
  kube::Api& api_;
  EventRecorder& events_;
  const NodeMetrics& metrics_;
  std::shared_ptr<spdlog::logger> log_;
  MismatchTracker tracker_;
  bool warned_no_socket_ = false;
};

}  // namespace tessera::node
