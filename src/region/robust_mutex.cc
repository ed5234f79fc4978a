#include "region/robust_mutex.h"

#include <cerrno>
#include <cstring>
#include <ctime>

namespace tessera::region {

Status RobustMutex::Init() {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return Internal("pthread_mutexattr_init failed");
  int rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (rc == 0) rc = pthread_mutex_init(&mu_, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) return Internal(std::string("robust mutex init: ") + std::strerror(rc));
  return Status::Ok();
}

RobustMutex::LockResult RobustMutex::Lock(int timeout_ms) {
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  int rc;
  do {
    rc = pthread_mutex_timedlock(&mu_, &deadline);
  } while (rc == EINTR);
  switch (rc) {
    case 0:
      return LockResult::kAcquired;
    case EOWNERDEAD:
      // The holder died; we hold the mutex. Mark it usable again.
      if (pthread_mutex_consistent(&mu_) != 0) {
        pthread_mutex_unlock(&mu_);
        return LockResult::kError;
      }
      return LockResult::kRecovered;
    case ETIMEDOUT:
      return LockResult::kTimedOut;
    default:
      return LockResult::kError;
  }
}

void RobustMutex::Unlock() { pthread_mutex_unlock(&mu_); }

}  // namespace tessera::region
