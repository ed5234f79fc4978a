// tessera-node's usage pass: the regions of the containers with a share on
// this node, read and joined with their assignments, and the claims the DRA
// driver prepared with their records (region_usage.h decides; this
// does the I/O and reports): the latest snapshot goes to /metrics (a
// SnapshotStore), each new OOM refusal is logged and raised as a Warning
// Event on its pod, and each pod's tessera.io/usage annotation is written
// when its usage moved (UsageChanged), at most once per annotation interval.
// Thread-compatible: one pass at a time (the agent runs it on a
// PeriodicLoop); its sources must be safe to call from that thread.
//
//   UsageReporter usage(options, api, sources, events, store, log);
//   usage.Pass();
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/pod_usage.h"
#include "kube/api.h"
#include "node/event_recorder.h"
#include "node/inventory.h"
#include "node/pod_views.h"
#include "node/region_usage.h"
#include "node/usage_metrics.h"

namespace tessera::node {

struct UsageReporterOptions {
  std::string node;         // this Node's name
  std::string region_root;  // --region-root: <root>/<pod uid>/<container> holds each region, <root>/dra each claim's
  // Least time between two writes of one pod's annotation; 0: never written.
  std::chrono::milliseconds annotation_interval{10000};
};

// Where a pass reads from; each is called once per pass.
struct UsageSources {
  // The node's pods from the watch cache, decoded (Allocator::CachedPods);
  // nullopt until it has synced (the pass is then skipped).
  std::function<std::optional<PodViews>()> pods;
  // The node's GPUs as last read (NodeInventory::Current).
  std::function<std::vector<core::GpuInfo>()> gpus;
  // The device's own load measurement (NodeInventory::ReadLoad);
  // UNIMPLEMENTED where the source measures none (not logged), any other
  // error naming the source (logged once until a read succeeds).
  std::function<Result<std::vector<GpuLoad>>()> load;
};

class UsageReporter {
 public:
  // `api`, `events` and `store` must outlive the reporter.
  UsageReporter(UsageReporterOptions options, kube::Api& api, UsageSources sources, EventRecorder& events,
                SnapshotStore& store, std::shared_ptr<spdlog::logger> log);

  // One pass (above).
  void Pass();

 private:
  // A pod's usage annotation as last written.
  struct Published {
    core::PodUsage usage;
    std::chrono::steady_clock::time_point when;
  };
  // The region <root>/<uid>/<container> (a pod's container, or a claim under ClaimsRoot).
  std::optional<std::vector<RegionCounters>> LookupRegion(const std::string& root, const std::string& uid,
                                                          const std::string& container, int n);
  void PublishUsage(const UsageSnapshot& snapshot);

  const UsageReporterOptions options_;
  kube::Api& api_;
  const UsageSources sources_;
  EventRecorder& events_;
  SnapshotStore& store_;
  std::shared_ptr<spdlog::logger> log_;
  std::optional<UsageSnapshot> last_;
  std::map<std::string, Published> published_;  // by pod uid
  std::set<std::string> warned_regions_;  // and unreadable claim records: each warned once
  bool warned_load_ = false;
};

}  // namespace tessera::node
