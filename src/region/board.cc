#include "region/board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tessera::region {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

Status CreateBoardFile(const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) return Status::Ok();  // not stat(): a GLIBC_2.33 symbol
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string tmp = dir + "/.board.XXXXXX";
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Internal(Errno("create " + tmp));
  Status st;
  if (fchmod(fd, 0666) != 0 || ftruncate(fd, sizeof(Board)) != 0) {
    st = Internal(Errno("size " + tmp));
  } else {
    void* p = mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      st = Internal(Errno("mmap " + tmp));
    } else {
      Board* b = static_cast<Board*>(p);
      b->version = kBoardVersion;
      b->board_bytes = sizeof(Board);
      b->slots = kBoardSlots;
      std::atomic_thread_fence(std::memory_order_release);
      b->magic = kBoardMagic;
      munmap(p, sizeof(Board));
      if (link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
        st = Internal(Errno("publish " + path));
      }
    }
  }
  unlink(tmp.c_str());
  close(fd);
  return st;
}

Status ValidateBoard(const void* base, size_t size) {
  if (size < sizeof(Board)) return FailedPrecondition("board smaller than its layout");
  const Board* b = static_cast<const Board*>(base);
  if (b->magic != kBoardMagic) return FailedPrecondition("not a Tessera GPU board (bad magic)");
  if (b->version != kBoardVersion) {
    return FailedPrecondition("board version " + std::to_string(b->version) + ", this library reads " +
                              std::to_string(kBoardVersion));
  }
  if (b->board_bytes != sizeof(Board) || b->slots != kBoardSlots) {
    return FailedPrecondition("board sizes differ from this library's layout");
  }
  return Status::Ok();
}

Result<Board*> OpenBoard(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    TESSERA_RETURN_IF_ERROR(CreateBoardFile(path));
    fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return Status(Internal(Errno("open " + path)));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const Status s = Internal(Errno("fstat " + path));
    close(fd);
    return s;
  }
  if (static_cast<size_t>(st.st_size) != sizeof(Board)) {
    close(fd);
    return Status(FailedPrecondition(path + ": size " + std::to_string(st.st_size) + ", expected " +
                                     std::to_string(sizeof(Board)) + " (another board version?)"));
  }
  void* p = mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Status(Internal(Errno("mmap " + path)));
  Status valid = ValidateBoard(p, sizeof(Board));
  if (!valid.ok()) {
    munmap(p, sizeof(Board));
    return valid.WithContext(path);
  }
  return static_cast<Board*>(p);
}

int ClaimBoardSlot(Board& board, uint64_t token, uint64_t now_us) {
  for (int i = 0; i < kBoardSlots; ++i) {
    uint64_t free_owner = 0;
    BoardSlot& s = board.slot[i];
    if (s.owner.compare_exchange_strong(free_owner, token, std::memory_order_acq_rel)) {
      s.busy_until_us.store(0, std::memory_order_relaxed);
      s.seen_us.store(now_us, std::memory_order_release);
      return i;
    }
  }
  // All taken: take over one whose owner has been quiet (dead, or gone
  // without releasing it) for kBoardSlotStaleUs.
  for (int i = 0; i < kBoardSlots; ++i) {
    BoardSlot& s = board.slot[i];
    uint64_t owner = s.owner.load(std::memory_order_acquire);
    const uint64_t seen = s.seen_us.load(std::memory_order_acquire);
    const uint64_t until = s.busy_until_us.load(std::memory_order_acquire);
    if (seen + kBoardSlotStaleUs > now_us || until + kBoardSlotStaleUs > now_us) continue;
    if (s.owner.compare_exchange_strong(owner, token, std::memory_order_acq_rel)) {
      s.busy_until_us.store(0, std::memory_order_relaxed);
      s.seen_us.store(now_us, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void ReleaseBoardSlot(Board& board, int slot, uint64_t token) {
  if (slot < 0 || slot >= kBoardSlots) return;
  BoardSlot& s = board.slot[slot];
  if (s.owner.load(std::memory_order_acquire) != token) return;
  s.busy_until_us.store(0, std::memory_order_release);
  uint64_t mine = token;
  s.owner.compare_exchange_strong(mine, 0, std::memory_order_acq_rel);
}

void MarkBusy(Board& board, int slot, uint64_t now_us) {
  BoardSlot& s = board.slot[slot];
  if (s.busy_until_us.load(std::memory_order_relaxed) > now_us + kBoardLeaseUs / 2) return;
  s.busy_until_us.store(now_us + kBoardLeaseUs, std::memory_order_release);
  s.seen_us.store(now_us, std::memory_order_relaxed);
}

void MarkIdle(Board& board, int slot, uint64_t now_us) {
  BoardSlot& s = board.slot[slot];
  if (s.busy_until_us.load(std::memory_order_relaxed) <= now_us) return;
  s.busy_until_us.store(now_us, std::memory_order_release);
  s.seen_us.store(now_us, std::memory_order_relaxed);
}

bool SlotBusy(const Board& board, int i, uint64_t now_us) {
  const BoardSlot& s = board.slot[i];
  const uint64_t until = s.busy_until_us.load(std::memory_order_acquire);
  return until > now_us && until <= now_us + 2 * kBoardLeaseUs &&
         s.owner.load(std::memory_order_relaxed) != 0;
}

uint32_t OthersBusy(const Board& board, int self, uint64_t now_us) {
  uint32_t n = 0;
  for (int i = 0; i < kBoardSlots; ++i) {
    if (i != self && SlotBusy(board, i, now_us)) ++n;
  }
  return n;
}

}  // namespace tessera::region
