// Admission on a usage counter shared by every process of a container: one
// compare-and-swap, so concurrent callers cannot pass the limit together.
// Lock-free; safe from any thread or process that maps the counter.
//
//   if (!TryCharge(share.used_bytes, limit, n)) return CUDA_ERROR_OUT_OF_MEMORY;
//   ...
//   Uncharge(share.used_bytes, n);
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera::region {

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "region counters must be lock-free to live in shared memory");

// Adds `bytes` to `used` when the sum stays <= `limit` and returns true;
// otherwise leaves `used` alone and returns false. limit == 0 means no limit.
inline bool TryCharge(std::atomic<uint64_t>& used, uint64_t limit, uint64_t bytes) noexcept {
  uint64_t cur = used.load(std::memory_order_relaxed);
  do {
    if (limit != 0 && (bytes > limit || cur > limit - bytes)) return false;
  } while (!used.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel,
                                       std::memory_order_relaxed));
  return true;
}

// Adds unconditionally: for memory the driver has already handed out (graph
// pools grow at launch, after the fact). Usage may then exceed the limit.
inline void ForceCharge(std::atomic<uint64_t>& used, uint64_t bytes) noexcept {
  used.fetch_add(bytes, std::memory_order_acq_rel);
}

// Subtracts `bytes`, saturating at 0 so a mismatched free never wraps the
// counter. Returns the new value.
inline uint64_t Uncharge(std::atomic<uint64_t>& used, uint64_t bytes) noexcept {
  uint64_t cur = used.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = cur > bytes ? cur - bytes : 0;
  } while (!used.compare_exchange_weak(cur, next, std::memory_order_acq_rel,
                                       std::memory_order_relaxed));
  return next;
}

// Raises `peak` to at least `value`.
inline void RaisePeak(std::atomic<uint64_t>& peak, uint64_t value) noexcept {
  uint64_t cur = peak.load(std::memory_order_relaxed);
  while (cur < value && !peak.compare_exchange_weak(cur, value, std::memory_order_relaxed)) {
  }
}

}  // namespace tessera::region
