#include "region/region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>

#include "region/admission.h"

namespace tessera::region {
namespace {

static_assert(sizeof(Layout) < (1u << 31), "layout_bytes is 32-bit");

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

Result<Layout*> MapFd(int fd, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status(Internal(Errno("fstat " + path)));
  if (static_cast<size_t>(st.st_size) != sizeof(Layout)) {
    return Status(FailedPrecondition(path + ": size " + std::to_string(st.st_size) +
                                     ", expected " + std::to_string(sizeof(Layout)) +
                                     " (another layout version?)"));
  }
  void* p = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status(Internal(Errno("mmap " + path)));
  Status valid = Region::Validate(p, sizeof(Layout));
  if (!valid.ok()) {
    munmap(p, sizeof(Layout));
    return valid.WithContext(path);
  }
  return static_cast<Layout*>(p);
}

// Builds the region under a temporary name and publishes it with link().
// Returns OK also when another process published first (EEXIST).
Status CreateFile(const std::string& dir, const std::string& path) {
  std::string tmp = dir + "/.memory.region.XXXXXX";
  int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Internal(Errno("create " + tmp));
  Status st;
  if (fchmod(fd, 0666) != 0 || ftruncate(fd, sizeof(Layout)) != 0) {
    st = Internal(Errno("size " + tmp));
  } else {
    void* p = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      st = Internal(Errno("mmap " + tmp));
    } else {
      st = InitializeLayout(*static_cast<Layout*>(p));
      munmap(p, sizeof(Layout));
      if (st.ok() && link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
        st = Internal(Errno("publish " + path));
      }
    }
  }
  unlink(tmp.c_str());
  close(fd);
  return st;
}

}  // namespace

Status InitializeLayout(Layout& layout) {
  layout.version = kLayoutVersion;
  layout.layout_bytes = sizeof(Layout);
  layout.max_gpus = kMaxGpus;
  layout.max_procs = kMaxProcs;
  TESSERA_RETURN_IF_ERROR(layout.lock.Init());
  std::atomic_thread_fence(std::memory_order_release);
  layout.magic = kMagic;
  return Status::Ok();
}

Status Region::Validate(const void* base, size_t size) {
  if (size < sizeof(Layout)) return FailedPrecondition("region smaller than its layout");
  const Layout* l = static_cast<const Layout*>(base);
  if (l->magic != kMagic) return FailedPrecondition("not a Tessera region (bad magic)");
  if (l->version != kLayoutVersion) {
    return FailedPrecondition("region layout version " + std::to_string(l->version) +
                              ", this library reads " + std::to_string(kLayoutVersion));
  }
  if (l->layout_bytes != sizeof(Layout) || l->max_gpus != kMaxGpus ||
      l->max_procs != kMaxProcs) {
    return FailedPrecondition("region sizes differ from this library's layout");
  }
  return Status::Ok();
}

Result<Region> Region::OpenDir(const std::string& dir) {
  const std::string path = dir + "/" + kFileName;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    TESSERA_RETURN_IF_ERROR(CreateFile(dir, path));
    fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return Status(Internal(Errno("open " + path)));
  Result<Layout*> mapped = MapFd(fd, path);
  close(fd);
  if (!mapped.ok()) return mapped.status();
  return Region(*mapped);
}

Result<Region> Region::OpenExisting(const std::string& dir) {
  const std::string path = dir + "/" + kFileName;
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return NotFound("no region at " + path);
  if (fd < 0) return Status(Internal(Errno("open " + path)));
  Result<Layout*> mapped = MapFd(fd, path);
  close(fd);
  if (!mapped.ok()) return mapped.status();
  return Region(*mapped);
}

Result<Region> Region::CreateAnonymous() {
  void* p = mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status(Internal(Errno("mmap anonymous region")));
  Status st = InitializeLayout(*static_cast<Layout*>(p));
  if (!st.ok()) {
    munmap(p, sizeof(Layout));
    return st;
  }
  return Region(static_cast<Layout*>(p));
}

Region::Region(Region&& other) noexcept : layout_(other.layout_) { other.layout_ = nullptr; }

Region& Region::operator=(Region&& other) noexcept {
  if (this != &other) {
    if (layout_ != nullptr) munmap(layout_, sizeof(Layout));
    layout_ = other.layout_;
    other.layout_ = nullptr;
  }
  return *this;
}

Region::~Region() {
  if (layout_ != nullptr) munmap(layout_, sizeof(Layout));
}

Layout* Region::Leak() {
  Layout* l = layout_;
  layout_ = nullptr;
  return l;
}

uint64_t ProcessStartTime(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // Fields after the command name, which may hold spaces and parentheses.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  int field = 2;  // p points at the end of field 2 (comm)
  while (*p != '\0' && field < 22) {
    if (*p == ' ') ++field;
    ++p;
  }
  if (field != 22) return 0;
  // A zombie (state Z) no longer holds GPU memory.
  const char* state = std::strrchr(buf, ')') + 2;
  if (*state == 'Z' || *state == 'X') return 0;
  return std::strtoull(p, nullptr, 10);
}

namespace {

bool SlotIsDead(const ProcSlot& s) {
  int32_t pid = s.pid.load(std::memory_order_acquire);
  if (pid == 0) return false;
  return ProcessStartTime(pid) != s.start_time.load(std::memory_order_acquire);
}

void ReleaseLocked(Layout& layout, ProcSlot& s) {
  for (int g = 0; g < kMaxGpus; ++g) {
    uint64_t b = s.used_bytes[g].exchange(0, std::memory_order_acq_rel);
    if (b != 0) region::Uncharge(layout.gpus[g].used_bytes, b);
  }
  s.start_time.store(0, std::memory_order_relaxed);
  s.pid.store(0, std::memory_order_release);
}

int ReapLocked(Layout& layout) {
  int reaped = 0;
  for (ProcSlot& s : layout.procs) {
    if (SlotIsDead(s)) {
      ReleaseLocked(layout, s);
      ++reaped;
    }
  }
  return reaped;
}

}  // namespace

Result<int> RegisterProcess(Layout& layout, pid_t pid) {
  const uint64_t start = ProcessStartTime(pid);
  if (RobustMutex::IsHeld(layout.lock.Lock(kLockTimeoutMs)) == false) {
    return Status(Internal("region lock: held by a live process past the timeout"));
  }
  ReapLocked(layout);
  int found = -1;
  for (int i = 0; i < kMaxProcs && found < 0; ++i) {
    ProcSlot& s = layout.procs[i];
    if (s.pid.load(std::memory_order_acquire) == 0) {
      for (auto& u : s.used_bytes) u.store(0, std::memory_order_relaxed);
      s.start_time.store(start, std::memory_order_relaxed);
      s.pid.store(pid, std::memory_order_release);
      found = i;
    }
  }
  layout.lock.Unlock();
  if (found < 0) return Status(ResourceExhausted("region: all process slots are live"));
  return found;
}

void ReleaseProcess(Layout& layout, int slot) {
  if (slot < 0 || slot >= kMaxProcs) return;
  bool held = RobustMutex::IsHeld(layout.lock.Lock(kLockTimeoutMs));
  // Without the lock (a live holder is stuck) the release is still safe: only
  // this process writes its own slot.
  ReleaseLocked(layout, layout.procs[slot]);
  if (held) layout.lock.Unlock();
}

int ReapDeadProcesses(Layout& layout) {
  if (!RobustMutex::IsHeld(layout.lock.Lock(kLockTimeoutMs))) return 0;
  int n = ReapLocked(layout);
  layout.lock.Unlock();
  return n;
}

bool Charge(Layout& layout, int slot, int gpu, uint64_t bytes, Refusal refusal) {
  GpuShare& share = layout.gpus[gpu];
  const uint64_t limit = share.limit_bytes.load(std::memory_order_relaxed);
  if (!TryCharge(share.used_bytes, limit, bytes)) {
    if (refusal == Refusal::kCounted) share.oom_refusals.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  RaisePeak(share.peak_bytes, share.used_bytes.load(std::memory_order_relaxed));
  layout.procs[slot].used_bytes[gpu].fetch_add(bytes, std::memory_order_acq_rel);
  return true;
}

void ForceCharge(Layout& layout, int slot, int gpu, uint64_t bytes) {
  region::ForceCharge(layout.gpus[gpu].used_bytes, bytes);
  RaisePeak(layout.gpus[gpu].peak_bytes,
            layout.gpus[gpu].used_bytes.load(std::memory_order_relaxed));
  layout.procs[slot].used_bytes[gpu].fetch_add(bytes, std::memory_order_acq_rel);
}

void Uncharge(Layout& layout, int slot, int gpu, uint64_t bytes) {
  // Only what the slot holds goes back, so a double free cannot take from
  // another process's share.
  std::atomic<uint64_t>& mine = layout.procs[slot].used_bytes[gpu];
  uint64_t cur = mine.load(std::memory_order_relaxed);
  uint64_t take;
  do {
    take = cur < bytes ? cur : bytes;
  } while (!mine.compare_exchange_weak(cur, cur - take, std::memory_order_acq_rel,
                                       std::memory_order_relaxed));
  region::Uncharge(layout.gpus[gpu].used_bytes, take);
}

}  // namespace tessera::region
