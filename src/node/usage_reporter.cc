#include "node/usage_reporter.h"

#include <algorithm>

#include "kube/paths.h"

namespace tessera::node {

UsageReporter::UsageReporter(UsageReporterOptions options, kube::Api& api, UsageSources sources,
                             EventRecorder& events, SnapshotStore& store, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)),
      api_(api),
      sources_(std::move(sources)),
      events_(events),
      store_(store),
      log_(std::move(log)) {}

std::optional<std::vector<RegionCounters>> UsageReporter::LookupRegion(const std::string& root,
                                                                       const std::string& uid,
                                                                       const std::string& container, int n) {
  const std::string dir = RegionHostDir(root, uid, container);
  auto counters = ReadRegionCounters(dir, n);
  if (counters.ok()) {
    warned_regions_.erase(dir);
    return std::move(counters).value();
  }
  // No region yet: the container has not touched its GPU. Anything else is worth one line.
  if (counters.status().code() != StatusCode::kNotFound && warned_regions_.insert(dir).second) {
    log_->warn("cannot read the region of {}: {}", dir, counters.status().message());
  }
  return std::nullopt;
}

void UsageReporter::Pass() {
  std::optional<PodViews> pods = sources_.pods();
  if (!pods) {
    log_->debug("usage pass skipped: the watch of node {}'s pods has not synced", options_.node);
    return;
  }
  const std::vector<core::GpuInfo> gpus = sources_.gpus();
  std::optional<std::vector<GpuLoad>> load;
  if (auto read = sources_.load(); read.ok()) {
    load = std::move(read).value();
    warned_load_ = false;
  } else if (read.status().code() != StatusCode::kUnimplemented && !warned_load_) {
    log_->warn("{}; using the containers' regions instead", read.status().message());
    warned_load_ = true;
  }
  UsageSnapshot snapshot = JoinUsage(
      ActiveAssignments(*pods, options_.node), gpus,
      [this](const std::string& uid, const std::string& container, int n) {
        return LookupRegion(options_.region_root, uid, container, n);
      },
      std::chrono::system_clock::now(), std::chrono::steady_clock::now(), last_ ? &*last_ : nullptr,
      load ? &*load : nullptr);
  if (auto claims = ReadClaimRecords(options_.region_root); claims.ok()) {
    for (const std::string& why : claims->unreadable) {
      if (warned_regions_.insert(why).second) log_->warn("prepared claim record {}; its share is not shown", why);
    }
    AddClaimUsage(
        snapshot, claims->records,
        [this](const std::string& uid, const std::string& container, int n) {
          return LookupRegion(ClaimsRoot(options_.region_root), uid, container, n);
        },
        last_ ? &*last_ : nullptr);
  } else if (warned_regions_.insert(std::string(claims.status().message())).second) {
    log_->warn("{}; claims' shares are not shown", claims.status().message());
  }
  for (const OomRefusal& r : NewOomRefusals(last_ ? &*last_ : nullptr, snapshot)) {
    const std::string message = OomRefusalMessage(r);
    log_->info("{}/{}: {}", r.share.pod.ns, r.share.pod.name, message);
    events_.Record(PodWarning(r.share.pod, kOomRefusedReason, message, options_.node));
  }
  if (options_.annotation_interval.count() > 0) PublishUsage(snapshot);
  store_.Set(snapshot);
  last_ = std::move(snapshot);
}

void UsageReporter::PublishUsage(const UsageSnapshot& snapshot) {
  const std::map<std::string, core::PodUsage> usages = PodUsages(snapshot);
  std::erase_if(published_, [&](const auto& entry) { return !usages.contains(entry.first); });
  const auto now = std::chrono::steady_clock::now();
  UsagePublishPolicy policy;
  policy.min_interval = options_.annotation_interval;
  for (const auto& [uid, usage] : usages) {
    auto last = published_.find(uid);
    if (last != published_.end() &&
        (now - last->second.when < policy.min_interval || !UsageChanged(last->second.usage, usage, policy))) {
      continue;
    }
    // A plain reference to capture: clang before 16 cannot capture a structured binding.
    const std::string& pod_uid = uid;
    auto of_pod = [&pod_uid](const ContainerGpu& c) { return c.pod.uid == pod_uid; };
    auto found = std::find_if(snapshot.containers.begin(), snapshot.containers.end(), of_pod);
    // PodUsages names only pods of the snapshot's containers or claims.
    const ContainerGpu& any = found != snapshot.containers.end()
                                  ? *found
                                  : *std::find_if(snapshot.claims.begin(), snapshot.claims.end(), of_pod);
    auto encoded = core::EncodeUsage(usage);
    if (!encoded.ok()) {
      log_->warn("usage of {}/{} not written: {}", any.pod.ns, any.pod.name, encoded.status().message());
      continue;
    }
    nlohmann::json patch = {
        {"metadata", {{"uid", uid}, {"annotations", {{std::string(core::kUsageAnnotation), *encoded}}}}}};
    auto patched = api_.Patch(kube::PodPath(any.pod.ns, any.pod.name), kube::PatchType::kMerge, patch);
    if (!patched.ok()) {
      log_->warn("writing the usage of {}/{} failed (will retry): {}", any.pod.ns, any.pod.name,
                 patched.status().message());
      continue;
    }
    published_[uid] = Published{usage, now};
  }
}

}  // namespace tessera::node
