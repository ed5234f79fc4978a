// Client-side rate limit for apiserver requests: a token bucket holding up to
// `burst` tokens, refilled at `qps` per second. Thread-safe.
//
//   TokenBucket bucket(50, 100);
//   std::this_thread::sleep_for(bucket.Reserve());   // then send the request
#pragma once

#include <chrono>
#include <functional>

#include "core/thread_annotations.h"

namespace tessera::kube {

class TokenBucket {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // qps <= 0 disables the limit; burst < 1 is treated as 1. The bucket starts
  // full. `clock` is injectable for tests (default: steady_clock::now).
  TokenBucket(double qps, int burst, Clock clock = &std::chrono::steady_clock::now);

  // Takes one token, possibly one not yet refilled, and returns how long the
  // caller must wait before using it: zero when a token was there. Later
  // callers queue behind earlier reservations, so waits grow by 1/qps each.
  std::chrono::nanoseconds Reserve();

 private:
  const double qps_;
  const double burst_;
  const Clock clock_;
  Mutex mu_;
  double tokens_ TESSERA_GUARDED_BY(mu_);  // negative: reserved ahead
  std::chrono::steady_clock::time_point last_ TESSERA_GUARDED_BY(mu_);
};

}  // namespace tessera::kube
