// Memory accounting of one process against its container's share: what it
// holds (by pointer, array, handle or pool), where its VMM handles are
// mapped, its contexts per GPU, and the charges in the region.
// No driver calls: the hooks call the driver and tell the accountant what
// happened, so this logic is unit-tested without a C ABI or a GPU.
//
// Thread-safety: all methods are thread-safe. Charges are lock-free (region
// CAS); the table of allocations has its own mutex, never held across a
// driver call (the accountant makes none).
//
//   if (!acct.Reserve(gpu, n)) return CUDA_ERROR_OUT_OF_MEMORY;
//   if (real(&p, n) != CUDA_SUCCESS) { acct.Unreserve(gpu, n); ... }
//   acct.Track(Space::kDevicePtr, p, gpu, n);
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/thread_annotations.h"
#include "region/region.h"

namespace tessera::cuda {

// Key spaces: values in different spaces may be numerically equal.
enum class Space : uint8_t {
  kDevicePtr, kAsyncPtr, kArray, kMipmap, kVmmHandle, kPool, kHostPool, kContext
};

class Accountant {
 public:
  // `layout` outlives the accountant; `slot` is this process's slot in it.
  Accountant(region::Layout* layout, int slot);

  // Charges `bytes` on `gpu` if the share stays within its limit.
  bool Reserve(int gpu, uint64_t bytes, region::Refusal refusal = region::Refusal::kCounted);
  // Charges past the limit: memory the driver already handed out.
  void ForceReserve(int gpu, uint64_t bytes);
  void Unreserve(int gpu, uint64_t bytes);

  // Remembers an allocation whose bytes are already reserved. `pool` ties an
  // async pointer to its pool. False when the table cannot grow (the caller
  // frees the allocation and reports out of memory).
  bool Track(Space space, uint64_t key, int gpu, uint64_t bytes, uint64_t pool = 0);
  // Drops one reference to `key` and gives its bytes back at the last one;
  // a VMM handle's bytes only once it is also mapped nowhere (see Map).
  // False when the key is unknown (memory not allocated through us, e.g.
  // IPC-opened or allocated before a fork).
  bool Release(Space space, uint64_t key);
  // One more reference (cuMemRetainAllocationHandle). False when unknown.
  bool Retain(Space space, uint64_t key);
  // VMM mappings. The driver frees a physical handle's memory when the
  // handle is released (every reference) and its last mapping is unmapped,
  // whichever comes last, so its charge stays until then.
  //
  // After cuMemMap succeeded: `handle` is mapped at [addr, addr + bytes).
  // False when the handle is not tracked (not charged: nothing to keep) or
  // the table cannot grow (then its bytes go back at its release, early).
  bool Map(uint64_t addr, uint64_t bytes, uint64_t handle);
  // After cuMemUnmap(addr, bytes) succeeded: every mapping that begins in
  // [addr, addr + bytes) is gone; a released handle whose last mapping
  // this was gives its bytes back. Returns how many mappings went.
  int Unmap(uint64_t addr, uint64_t bytes);
  // Where tracked handles are mapped now (tests).
  size_t Mappings() const;

  // Contexts. The driver reports no size for a context, so a process's
  // contexts on a GPU are charged a configured size together, once: from
  // its first context there to its last (the primary context counts while
  // retained, a created one until destroyed). A context reference is
  // opened before the driver call that makes it, so two threads cannot both
  // miss the charge.
  //
  // One more context reference on `gpu`. The first charges `bytes` if the
  // share holds them: false when it does not (nothing changed; the caller
  // refuses the context).
  bool OpenContext(int gpu, uint64_t bytes, region::Refusal refusal = region::Refusal::kCounted);
  // Undoes OpenContext (the driver call failed): the last reference gives
  // the charge back. Nothing when none is open.
  void CloseContext(int gpu);
  // The open reference became a primary-context retain / created context
  // `ctx`. ContextCreated: false when the table cannot grow (the caller
  // destroys the context and closes the reference).
  void PrimaryRetained(int gpu);
  bool ContextCreated(uint64_t ctx, int gpu);
  // After a successful primary release / cuCtxDestroy: closes that
  // reference. False when it was not counted (retained before a fork, or a
  // context we never saw created).
  bool PrimaryReleased(int gpu);
  bool ContextDestroyed(uint64_t ctx);
  // Context references this process holds on `gpu` (tests).
  uint32_t Contexts(int gpu) const;

  // Whether `key` is tracked.
  bool Contains(Space space, uint64_t key) const;
  // The pool an async pointer came from, or 0.
  uint64_t PoolOf(uint64_t async_ptr);

  // Pools are charged by their reserved bytes. Sets pool's charge to
  // `reserved`: growth is admitted against the limit (false: unchanged),
  // shrinking gives back. force = true admits growth past the limit.
  // `prepaid` bytes were already Reserve()d for this growth by the caller
  // and are folded into the pool's charge (or given back if unneeded; on
  // false they are given back too).
  bool SetPoolReserved(uint64_t pool, int gpu, uint64_t reserved, bool force,
                       uint64_t prepaid = 0);
  // The GPU of a pool we charge, or -1 when we do not know the pool.
  int PoolGpu(uint64_t pool);
  // Forgets a destroyed pool, its charge and its async pointers.
  void DropPool(uint64_t pool);
  // Pools with a charge, for a refresh against the driver.
  std::vector<uint64_t> Pools();

  // Graph memory: the device's graph pool reserve, charged past the limit
  // (it grew at launch, after the fact).
  void SetGraphReserved(int gpu, uint64_t reserved);

  // The share of `gpu`: its limit (0 = none) and its usage by all processes.
  uint64_t Limit(int gpu) const;
  uint64_t Used(int gpu) const;
  // What this process holds on `gpu`.
  uint64_t Held(int gpu) const;

  // In a child after fork or clone: the parent's allocations are not ours.
  void ResetForNewProcess(int slot);
  // Fork handlers (pthread_atfork, through the runtime): the table's lock is
  // held across fork(), so the child never inherits it locked by a thread
  // it does not have. AfterFork() runs in the parent and the child alike.
  void PrepareFork() TESSERA_ACQUIRE(mu_);
  void AfterFork() TESSERA_RELEASE(mu_);
  int slot() const { return slot_.load(std::memory_order_relaxed); }

 private:
  struct Key {
    Space space;
    uint64_t value;
    bool operator==(const Key& o) const { return space == o.space && value == o.value; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.value) ^ (static_cast<size_t>(k.space) << 56);
    }
  };
  struct Record {
    int gpu;
    uint64_t bytes;
    uint64_t pool;  // kAsyncPtr: its pool
    uint32_t refs;
    uint32_t maps = 0;  // kVmmHandle: mappings in mappings_
  };
  struct Mapping {
    uint64_t bytes;
    uint64_t handle;
  };

  // Gives a record's bytes back and erases it once nothing holds it.
  void DropIfUnusedLocked(std::unordered_map<Key, Record, KeyHash>::iterator it) TESSERA_REQUIRES(mu_);
  void CloseContextLocked(int gpu) TESSERA_REQUIRES(mu_);

  region::Layout* const layout_;
  std::atomic<int> slot_;  // changes only in a fresh child
  mutable Mutex mu_;
  std::unordered_map<Key, Record, KeyHash> table_ TESSERA_GUARDED_BY(mu_);
  uint64_t graph_reserved_[region::kMaxGpus] TESSERA_GUARDED_BY(mu_) = {};
  std::map<uint64_t, Mapping> mappings_ TESSERA_GUARDED_BY(mu_);  // address -> mapping
  uint32_t context_refs_[region::kMaxGpus] TESSERA_GUARDED_BY(mu_) = {};
  uint32_t primary_refs_[region::kMaxGpus] TESSERA_GUARDED_BY(mu_) = {};
  uint64_t context_charge_[region::kMaxGpus] TESSERA_GUARDED_BY(mu_) = {};
};

}  // namespace tessera::cuda
