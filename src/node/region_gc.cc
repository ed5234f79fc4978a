#include "node/region_gc.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "region/region.h"

namespace tessera::node {
namespace {

constexpr std::string_view kRecordSuffix = ".arbiter.json";
// RegionGc::last_reason_ keys of reasons about no single uid.
constexpr const char* kRootKey = "root";
constexpr const char* kListKey = "list";

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

// The names in the directory open at `dir_fd`, "." and ".." left out. The
// descriptor stays open (and owned by the caller).
Result<std::vector<std::string>> Names(int dir_fd, const std::string& shown) {
  const int dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return Status(Internal(Errno("dup " + shown)));
  DIR* dir = fdopendir(dup_fd);
  if (dir == nullptr) {
    close(dup_fd);
    return Status(Internal(Errno("opendir " + shown)));
  }
  rewinddir(dir);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  const int err = errno;
  closedir(dir);
  if (err != 0) {
    errno = err;
    return Status(Internal(Errno("reading " + shown)));
  }
  return names;
}

// The errors that say an entry is not (or no longer) what we look for: gone,
// a symlink where O_NOFOLLOW refused it, not a directory, a socket.
bool NotThere(int err) { return err == ENOENT || err == ELOOP || err == ENOTDIR || err == ENXIO || err == EISDIR; }

// The first live process registered in the region file `name` of the
// container folder open at `dir_fd`; nullopt when none or when it is not a
// region of this layout.
Result<std::optional<RegionUser>> LiveUserOf(int dir_fd, const std::string& shown) {
  // O_NONBLOCK: a FIFO put there by the container must not block the agent.
  Fd fd(openat(dir_fd, region::kFileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.ok()) {
    if (NotThere(errno)) return std::optional<RegionUser>();
    return Status(Internal(Errno("open " + shown)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status(Internal(Errno("fstat " + shown)));
  if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != sizeof(region::Layout)) {
    return std::optional<RegionUser>();
  }
  void* p = mmap(nullptr, sizeof(region::Layout), PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return Status(Internal(Errno("mmap " + shown)));
  std::optional<RegionUser> user;
  if (region::Region::Validate(p, sizeof(region::Layout)).ok()) {
    const region::Layout& l = *static_cast<const region::Layout*>(p);
    for (const region::ProcSlot& s : l.procs) {
      const int32_t pid = s.pid.load(std::memory_order_acquire);
      const uint64_t start = s.start_time.load(std::memory_order_acquire);
      if (pid <= 0 || start == 0 || region::ProcessStartTime(pid) != start) continue;
      user = RegionUser{shown, pid};
      break;
    }
  }
  munmap(p, sizeof(region::Layout));
  return user;
}

// Removes what the directory open at `dir_fd` holds (not the directory),
// never following a symlink, and adds it to `out`.
Status Empty(int dir_fd, const std::string& shown, int depth, RemovedRegion& out) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(dir_fd, shown));
  for (const std::string& name : names) {
    const std::string path = shown + "/" + name;
    struct stat st;
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return Internal(Errno("stat " + path));
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxRegionDepth) {
        return FailedPrecondition(path + " nests deeper than " + std::to_string(kMaxRegionDepth) +
                                  " levels; remove it by hand");
      }
      Fd child(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!child.ok()) {
        // Swapped for a symlink or a file since the stat: the next pass unlinks it.
        return Internal(Errno("open " + path));
      }
      TESSERA_RETURN_IF_ERROR(Empty(child.get(), path, depth + 1, out));
      if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) return Internal(Errno("rmdir " + path));
    } else {
      // A file, a symlink (the link itself), a FIFO, a socket.
      if (unlinkat(dir_fd, name.c_str(), 0) != 0) {
        if (errno == ENOENT) continue;
        return Internal(Errno("unlink " + path));
      }
      if (S_ISREG(st.st_mode)) out.bytes += static_cast<uint64_t>(st.st_size);
    }
    ++out.entries;
  }
  return Status::Ok();
}

// Opens <root>/<uid> as a directory, refusing a symlink.
Result<int> OpenUidFolder(int root_fd, const std::string& root, const std::string& uid) {
  const std::string shown = root + "/" + uid;
  const int fd = openat(root_fd, uid.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == ENOENT) return Status(NotFound(shown + " does not exist"));
  if (errno == ELOOP || errno == ENOTDIR) {
    return Status(FailedPrecondition(shown + " is not a directory (a symlink is never followed)"));
  }
  return Status(Internal(Errno("open " + shown)));
}

}  // namespace

bool LooksLikePodUid(std::string_view name) {
  if (name.size() != 36) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? name[i] != '-' : !IsHex(name[i])) return false;
  }
  return true;
}

RegionGcPlan PlanRegionGc(const std::set<std::string>& on_disk, const std::set<std::string>& known,
                          const std::map<std::string, GcClock::time_point>& missing_since, GcClock::time_point now,
                          std::chrono::seconds grace, const std::function<bool(const std::string&)>& in_use) {
  RegionGcPlan plan;
  for (const std::string& uid : on_disk) {
    if (known.contains(uid)) continue;
    auto it = missing_since.find(uid);
    const GcClock::time_point since = it != missing_since.end() ? it->second : now;
    // Kept until the folder is gone from disk: a removal that fails is tried again.
    plan.missing_since[uid] = since;
    if (now - since < grace) continue;
    (in_use(uid) ? plan.in_use : plan.remove).push_back(uid);
  }
  return plan;
}

std::set<std::string> PodUids(const PodViews& pods) {
  std::set<std::string> out;
  for (const auto& pod : pods) {
    if (!pod->uid.empty()) out.insert(pod->uid);
  }
  return out;
}

Result<std::set<std::string>> ListRegionUids(const std::string& root) {
  Fd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.ok()) {
    if (errno == ENOENT) return Status(NotFound(root + " does not exist"));
    return Status(Internal(Errno("open " + root)));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(root_fd.get(), root));
  std::set<std::string> out;
  for (const std::string& name : names) {
    if (!LooksLikePodUid(name)) continue;
    struct stat st;
    if (fstatat(root_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) out.insert(name);
  }
  return out;
}

Result<std::optional<RegionUser>> RegionInUse(const std::string& root, const std::string& uid) {
  Fd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.ok()) return Status(Internal(Errno("open " + root)));
  Result<int> opened = OpenUidFolder(root_fd.get(), root, uid);
  if (!opened.ok()) {
    // Gone, or not a folder: it holds no region.
    if (opened.status().code() != StatusCode::kInternal) return std::optional<RegionUser>();
    return opened.status();
  }
  Fd uid_fd(*opened);
  const std::string shown = root + "/" + uid;
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(uid_fd.get(), shown));
  for (const std::string& name : names) {
    Fd container(openat(uid_fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!container.ok()) {
      if (NotThere(errno)) continue;  // a record, a symlink, gone
      return Status(Internal(Errno("open " + shown + "/" + name)));
    }
    TESSERA_ASSIGN_OR_RETURN(std::optional<RegionUser> user,
                             LiveUserOf(container.get(), shown + "/" + name + "/" + region::kFileName));
    if (user) return user;
  }
  return std::optional<RegionUser>();
}

Result<RemovedRegion> RemoveRegionFolder(const std::string& root, const std::string& uid) {
  if (!LooksLikePodUid(uid)) return Status(InvalidArgument("\"" + uid + "\" does not look like a pod uid"));
  Fd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.ok()) return Status(Internal(Errno("open " + root)));
  TESSERA_ASSIGN_OR_RETURN(int opened, OpenUidFolder(root_fd.get(), root, uid));
  Fd uid_fd(opened);
  const std::string shown = root + "/" + uid;
  RemovedRegion out;
  // What the folder holds, counted before it goes (for the log).
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(uid_fd.get(), shown));
  for (const std::string& name : names) {
    struct stat st;
    if (fstatat(uid_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      ++out.containers;
    } else if (S_ISREG(st.st_mode) && name.size() > kRecordSuffix.size() && name.ends_with(kRecordSuffix)) {
      ++out.records;
    }
  }
  TESSERA_RETURN_IF_ERROR(Empty(uid_fd.get(), shown, 1, out));
  if (unlinkat(root_fd.get(), uid.c_str(), AT_REMOVEDIR) != 0) return Status(Internal(Errno("rmdir " + shown)));
  ++out.entries;
  return out;
}

RegionGc::RegionGc(RegionGcOptions options, std::shared_ptr<spdlog::logger> log, metrics::Counter* removed)
    : options_(std::move(options)), log_(std::move(log)), removed_(removed) {}

void RegionGc::Warn(const std::string& key, const std::string& reason) {
  std::string& last = last_reason_[key];
  if (last == reason) {
    log_->debug("{}", reason);
    return;
  }
  last = reason;
  log_->warn("{}", reason);
}

void RegionGc::Pass(const std::optional<PodViews>& cached, const ListPods& list_now,
                    GcClock::time_point now) {
  if (!cached) {
    log_->debug("region cleanup skipped: the watch of node {}'s pods has not synced", options_.node);
    return;
  }
  auto on_disk = ListRegionUids(options_.root);
  if (!on_disk.ok()) {
    if (on_disk.status().code() == StatusCode::kNotFound) {
      log_->debug("region cleanup: {} does not exist yet", options_.root);
    } else {
      Warn(kRootKey, "region cleanup skipped (will retry): " + on_disk.status().message());
    }
    return;
  }
  last_reason_.erase(kRootKey);
  std::map<std::string, std::string> keep_reasons;  // by uid, from in_use
  auto in_use = [&](const std::string& uid) {
    auto user = RegionInUse(options_.root, uid);
    if (!user.ok()) {
      keep_reasons[uid] = "cannot tell whether a process still uses it: " + user.status().message();
      return true;
    }
    if (*user) {
      keep_reasons[uid] = "process " + std::to_string((*user)->pid) + " registered in " + (*user)->region +
                          " is alive";
      return true;
    }
    return false;
  };
  RegionGcPlan plan = PlanRegionGc(*on_disk, PodUids(*cached), missing_since_, now, options_.grace, in_use);
  missing_since_ = std::move(plan.missing_since);
  std::erase_if(last_reason_,
                [&](const auto& e) { return LooksLikePodUid(e.first) && !missing_since_.contains(e.first); });
  for (const std::string& uid : plan.in_use) {
    Warn(uid, "kept the region folder " + options_.root + "/" + uid + " of pod uid " + uid + ", gone from node " +
                  options_.node + ": " + keep_reasons[uid] + " (will check again next pass)");
  }
  if (plan.remove.empty()) return;
  // The cache may lag behind the API server: a pod absent from it is removed
  // only when a LIST made now agrees.
  auto listed = list_now();
  if (!listed.ok()) {
    Warn(kListKey, "region cleanup of " + std::to_string(plan.remove.size()) +
                 " folder(s) postponed: listing the pods of node " + options_.node + ": " +
                 listed.status().message());
    return;
  }
  last_reason_.erase(kListKey);
  const std::set<std::string> present = PodUids(*listed);
  for (const std::string& uid : plan.remove) {
    const std::string folder = options_.root + "/" + uid;
    if (present.contains(uid)) {
      log_->info("region folder {} kept: pod uid {} is on node {} after all (the watch cache lags)", folder, uid,
                 options_.node);
      missing_since_.erase(uid);
      continue;
    }
    const auto gone_for = std::chrono::duration_cast<std::chrono::seconds>(now - missing_since_[uid]);
    auto removed = RemoveRegionFolder(options_.root, uid);
    if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) {
      Warn(uid, "removing the region folder " + folder + " of pod uid " + uid + " failed (will retry next pass): " +
                    removed.status().message());
      continue;
    }
    missing_since_.erase(uid);
    last_reason_.erase(uid);
    if (!removed.ok()) continue;  // removed by someone else meanwhile
    if (removed_ != nullptr) removed_->Increment();
    log_->info("removed the region folder {} of pod uid {}, gone from node {} for {}s: {} container region(s), {} "
               "arbiter record(s), {} entries, {} bytes freed",
               folder, uid, options_.node, gone_for.count(), removed->containers, removed->records, removed->entries,
               removed->bytes);
  }
}

}  // namespace tessera::node
