// Removes the region folders of pods gone from this node. Allocate leaves,
// per sharing container, <root>/<pod uid>/<container> (its region) and
// <root>/<pod uid>/<container>.arbiter.json (the arbiter's record); this
// removes <root>/<pod uid> with everything in it once the pod has been
// absent from the node's pods for a grace period, a fresh LIST agrees, and
// no process registered in its regions is alive. Pieces: a pure decision
// (PlanRegionGc), the file-system steps (ListRegionUids, RegionInUse,
// RemoveRegionFolder) and RegionGc, which runs one pass of them.
//
// Safety: only names that look like pod uids (LooksLikePodUid) directly
// under the root are touched, and nothing under the root is followed when
// it is a symlink (a symlink is removed as a link; what it names is left
// alone). The root itself may be a symlink (/var/run -> /run).
//
// Thread-safety: the free functions are; a RegionGc is used from one thread.
//
//   RegionGc gc(options, log, metrics.region_folders_removed);
//   gc.Pass(allocator.CachedPods(), list_pods_now, std::chrono::steady_clock::now());
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "metrics/registry.h"
#include "node/pod_views.h"

namespace tessera::node {

using GcClock = std::chrono::steady_clock;

// True for a pod uid as the API server writes it: a UUID, 8-4-4-4-12 hex
// digits (either case). Anything else under the root is never removed.
bool LooksLikePodUid(std::string_view name);

// What one pass decided.
struct RegionGcPlan {
  std::vector<std::string> remove;  // absent past the grace, no live process: remove now
  std::vector<std::string> in_use;  // absent past the grace but a live process: kept, asked again next pass
  // The state for the next pass: when each uid on disk and not known was
  // first seen so. Uids known again, or gone from disk, drop out.
  std::map<std::string, GcClock::time_point> missing_since;
};

// The decision, pure: each uid in `on_disk` that is not in `known` is
// missing since missing_since[uid], or since `now` when first seen missing;
// once it has been missing for at least `grace`, it is removed unless
// `in_use(uid)` (asked only for those) says a process still uses it. Both
// lists come out sorted.
RegionGcPlan PlanRegionGc(const std::set<std::string>& on_disk, const std::set<std::string>& known,
                          const std::map<std::string, GcClock::time_point>& missing_since, GcClock::time_point now,
                          std::chrono::seconds grace, const std::function<bool(const std::string&)>& in_use);

// The uids of `pods` (those without a uid are skipped).
std::set<std::string> PodUids(const PodViews& pods);

// The names under `root` that look like pod uids and are directories (not
// symlinks to one). NOT_FOUND when `root` does not exist (no container has
// been allocated yet); INTERNAL when it cannot be read.
Result<std::set<std::string>> ListRegionUids(const std::string& root);

// A process registered in a region that is still alive.
struct RegionUser {
  std::string region;  // the memory.region file
  int32_t pid = 0;     // as the container's process saw itself
};

// The first live process registered in <root>/<uid>/<container>/memory.region,
// over the uid's container folders; nullopt when none. A slot is live when
// its pid, in this process's view of /proc, has the start time it recorded
// (region::ProcessStartTime); a slot with no recorded start time is not.
// Where the agent does not share the containers' PID namespace it sees none
// of their processes, so this is a last guard: the pod being gone for the
// grace period is what protects a running container. Files that are not
// regions of this layout (or are symlinks) hold no process. An error means
// it cannot tell (keep the folder): the uid folder or a region unreadable.
Result<std::optional<RegionUser>> RegionInUse(const std::string& root, const std::string& uid);

// What RemoveRegionFolder freed.
struct RemovedRegion {
  int containers = 0;      // container region folders (directories directly in the uid folder)
  int records = 0;         // arbiter records (*.arbiter.json directly in the uid folder)
  uint64_t entries = 0;    // files, links and folders removed, the uid folder included
  uint64_t bytes = 0;      // sum of the regular files' sizes
};

// Deepest nesting RemoveRegionFolder descends to below the uid folder.
inline constexpr int kMaxRegionDepth = 32;

// Removes <root>/<uid> and all it holds, through openat/unlinkat with
// O_NOFOLLOW: an entry that is (or becomes) a symlink is unlinked, never
// followed, so nothing outside the folder is touched. INVALID_ARGUMENT when
// `uid` does not look like a pod uid; NOT_FOUND when the folder is absent;
// FAILED_PRECONDITION when <root>/<uid> is not a directory (a symlink
// included) or nests deeper than kMaxRegionDepth; INTERNAL naming the entry
// for any other failure. What was removed before a failure stays removed.
Result<RemovedRegion> RemoveRegionFolder(const std::string& root, const std::string& uid);

struct RegionGcOptions {
  std::string root;                      // --region-root
  std::string node;                      // for the log
  std::chrono::seconds grace{300};       // --region-gc-grace-seconds; > 0
};

// The node's pods listed now from the API server (not the watch cache):
// ListNodePods.
using ListPods = std::function<Result<PodViews>()>;

class RegionGc {
 public:
  // `removed` (may be null) counts the folders removed.
  RegionGc(RegionGcOptions options, std::shared_ptr<spdlog::logger> log, metrics::Counter* removed);

  // One pass. `cached` is the node's pods as the watch cache holds them;
  // nullopt (it has not synced) skips the pass, and so does a root that
  // cannot be listed. Uids due for removal are checked once more against
  // `list_now()`, and none is removed when that fails. Removals are logged
  // at info with what was freed; failures at warn with the reason (again
  // only when the reason changes), retried next pass.
  void Pass(const std::optional<PodViews>& cached, const ListPods& list_now, GcClock::time_point now);

  // Uids missing from the node's pods now, and since when (for tests).
  const std::map<std::string, GcClock::time_point>& MissingSinceForTest() const { return missing_since_; }

 private:
  // Logs `reason` at warn when it differs from the last one logged under
  // `key` (a uid, or a pass-wide key), else at debug.
  void Warn(const std::string& key, const std::string& reason);

  const RegionGcOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  metrics::Counter* removed_;
  std::map<std::string, GcClock::time_point> missing_since_;
  std::map<std::string, std::string> last_reason_;  // by uid (or pass-wide key): the last reason logged
};

}  // namespace tessera::node
