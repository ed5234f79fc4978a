#include "node/reconciler.h"

#include <filesystem>

#include "node/node_pods.h"
#include "node/pod_resources.h"

namespace tessera::node {

Reconciler::Reconciler(ReconcilerOptions options, kube::Api& api, EventRecorder& events,
                       const NodeMetrics& metrics, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)), api_(api), events_(events), metrics_(metrics), log_(std::move(log)) {}

void Reconciler::Pass() {
  const std::string& socket = options_.socket;
  std::error_code ec;
  if (!std::filesystem::exists(socket, ec)) {
    if (!warned_no_socket_) {
      log_->warn("{} is absent: allocations are not checked against the kubelet until it appears", socket);
      warned_no_socket_ = true;
    } else {
      log_->debug("{} is still absent: reconciliation skipped", socket);
    }
    return;
  }
  warned_no_socket_ = false;
  auto records = ListKubeletRecords(socket, options_.resource, options_.timeout);
  if (!records.ok()) {
    log_->warn("reconciliation skipped: {}", records.status().message());
    return;
  }
  auto pods = ListNodePods(api_, options_.node);
  if (!pods.ok()) {
    log_->warn("reconciliation skipped: listing the pods of node {}: {}", options_.node, pods.status().message());
    return;
  }
  std::vector<Mismatch> found = FindMismatches(*records, PodAssignmentsFromList(*pods), options_.node);
  for (const Mismatch& m : tracker_.New(found)) {
    if (metrics_.mismatches) metrics_.mismatches->Increment();
    log_->warn("allocation mismatch ({}): {}", MismatchKindName(m.kind), m.message);
    events_.Record(PodWarning({m.ns, m.pod, m.uid}, kMismatchReason, m.message, options_.node));
  }
  if (metrics_.reconcile_runs) metrics_.reconcile_runs->Increment();
  log_->debug("reconciled {} kubelet record(s): {} mismatch(es)", records->size(), found.size());
}

}  // namespace tessera::node
