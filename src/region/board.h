// The busy board of one physical GPU: a small shared-memory file that every
// process of every container using that GPU maps (libtessera-cuda.so, from
// TESSERA_GPU_BOARD_DIR), in which each process says whether it has GPU
// work in flight. The launch gate reads it to know how many contexts the
// driver is time-slicing the GPU between, so that a launch's measured event
// span, which then also covers the other contexts' slices, is charged only
// the part that was its own (src/cuda/contention.h). A region
// (region.h) is per container; the board is per GPU and crosses containers.
//
// Protocol: a process claims one slot per GPU (CAS on `owner`), then, while
// it has admitted work not yet measured, keeps busy_until_us a lease ahead
// of its clock (CLOCK_MONOTONIC; every process on a host shares it), and
// sets it to the present when its work is done. A mark is busy while
// busy_until_us is in the future by at most two leases (a mark further
// ahead is from another clock and ignored), so the mark of a process that
// died with work in flight expires within one lease, and its slot is taken
// over once it has been quiet for kBoardSlotStaleUs.
//
// Thread-safety: lock-free; every field is an atomic in shared memory, each
// slot written only by its owner (and by a claimer taking over a stale
// slot).
//
//   TESSERA_ASSIGN_OR_RETURN(Board* b, OpenBoard(dir + "/GPU-....board"));
//   const int slot = ClaimBoardSlot(*b, token, now_us);
//   MarkBusy(*b, slot, now_us);   ...   MarkIdle(*b, slot, now_us);
//   const uint32_t others = OthersBusy(*b, slot, now_us);
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tessera::region {

inline constexpr uint64_t kBoardMagic = 0x3144524f42535354ull;  // "TSSBORD1" little-endian
inline constexpr uint32_t kBoardVersion = 1;
inline constexpr int kBoardSlots = 64;  // processes on one GPU that publish; more are not seen
// How far ahead a busy mark reaches: a process refreshes it at least every
// half lease while busy (the gate's helper polls every millisecond).
inline constexpr uint64_t kBoardLeaseUs = 20'000;
// A slot whose owner wrote nothing for this long may be taken over.
inline constexpr uint64_t kBoardSlotStaleUs = 10'000'000;

struct BoardSlot {
  std::atomic<uint64_t> owner;          // 0: free; else the claimer's token
  std::atomic<uint64_t> busy_until_us;  // busy while in the future (see above)
  std::atomic<uint64_t> seen_us;        // the owner's last write
  uint64_t reserved;
};

struct Board {
  uint64_t magic;  // kBoardMagic, written last when the file is created
  uint32_t version;
  uint32_t board_bytes;  // sizeof(Board) of the creator
  uint32_t slots;        // kBoardSlots
  uint32_t reserved;
  BoardSlot slot[kBoardSlots];
};

// Creates the board file at `path` (built under a temporary name beside it,
// published with link(), mode 0666 so every container's processes may map
// it). OK when the file exists already: an existing file is left as it is.
// tessera-node creates each GPU's board before a container gets the folder.
Status CreateBoardFile(const std::string& path);

// Maps the board file at `path` for the life of the process, creating it
// when absent (race-free: built under a temporary name, published with
// link()). Fails when the file has another magic, version or size, or the
// folder does not exist or is not writable.
Result<Board*> OpenBoard(const std::string& path);
// Checks a mapped board before any field is trusted.
Status ValidateBoard(const void* base, size_t size);

// Claims a free slot (or one quiet for kBoardSlotStaleUs at `now_us`) for
// `token` (non-zero, unique to the claiming process: pid and start time).
// Returns its index, or -1 when every slot is held by a live process.
int ClaimBoardSlot(Board& board, uint64_t token, uint64_t now_us);
// Frees `slot` if `token` still owns it.
void ReleaseBoardSlot(Board& board, int slot, uint64_t token);
// The owner's marks. MarkBusy writes only when the mark would run out
// within half a lease (so about once per 10 ms while busy).
void MarkBusy(Board& board, int slot, uint64_t now_us);
void MarkIdle(Board& board, int slot, uint64_t now_us);
// Whether slot `i`'s mark is busy at `now_us`.
bool SlotBusy(const Board& board, int i, uint64_t now_us);
// The number of slots other than `self` (-1: none) busy at `now_us`.
uint32_t OthersBusy(const Board& board, int self, uint64_t now_us);

}  // namespace tessera::region
