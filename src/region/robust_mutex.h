// A process-shared, robust pthread mutex placed in shared memory. When its
// holder dies (even by SIGKILL) the kernel hands the mutex to the next
// locker, which is told so and repairs what the mutex guards; a dead holder
// never wedges the others. Waits are bounded by a timeout.
//
//   RobustMutex::LockResult r = mu.Lock(/*timeout_ms=*/2000);
//   if (r == LockResult::kRecovered) RepairState();
//   if (IsHeld(r)) { ...; mu.Unlock(); }
#pragma once

#include <pthread.h>

#include "core/status.h"

namespace tessera::region {

class RobustMutex {
 public:
  enum class LockResult {
    kAcquired,   // held; the previous holder unlocked normally
    kRecovered,  // held; the previous holder died while holding it
    kTimedOut,   // not held: a live holder kept it past the timeout
    kError,      // not held: the mutex is unusable
  };

  // Initializes in place, in memory that every user maps MAP_SHARED. Call once,
  // before other processes can see the memory.
  Status Init();

  // Waits at most timeout_ms. Thread-safe across processes.
  LockResult Lock(int timeout_ms);
  // Precondition: held by this thread.
  void Unlock();

  static bool IsHeld(LockResult r) {
    return r == LockResult::kAcquired || r == LockResult::kRecovered;
  }

 private:
  pthread_mutex_t mu_;
};

}  // namespace tessera::region
