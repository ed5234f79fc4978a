// tessera-node's GPU, container and claim series (tessera_gpu_*,
// tessera_container_*, tessera_claim_*)
// served from the latest UsageSnapshot, which the usage pass replaces and each
// scrape reads: nothing is kept per series, so a container that went away
// leaves no stale series behind.
//
// Thread-safety: SnapshotStore may be written and read from any thread.
//
//   SnapshotStore store;
//   TESSERA_RETURN_IF_ERROR(RegisterUsageMetrics(registry, "node-1", store));
//   store.Set(JoinUsage(...));
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "metrics/registry.h"
#include "node/region_usage.h"

namespace tessera::node {

// The latest snapshot; empty (no GPUs, no containers) before the first Set.
class SnapshotStore {
 public:
  void Set(UsageSnapshot snapshot) TESSERA_EXCLUDES(mu_);
  std::shared_ptr<const UsageSnapshot> Get() const TESSERA_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::shared_ptr<const UsageSnapshot> latest_ TESSERA_GUARDED_BY(mu_);
};

// Adds the families, labelled node, gpu (index), uuid, model and, for
// device-plugin containers (tessera_container_gpu_*), namespace, pod,
// container; for DRA claims (tessera_claim_gpu_*, the same series),
// namespace, claim, pod (the first pod the claim is reserved for). The GPU
// series count both paths' shares. `store` must outlive `registry`'s
// renders. ALREADY_EXISTS when they are there.
Status RegisterUsageMetrics(metrics::Registry& registry, const std::string& node, const SnapshotStore& store);

}  // namespace tessera::node
