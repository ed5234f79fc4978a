// Retry delays: exponential backoff with jitter, used for the client's retries
// of retryable requests and for the informer's and leader elector's retries.
// Not thread-safe (one Backoff per retry loop).
//
//   Backoff backoff(std::chrono::milliseconds(100), std::chrono::seconds(5));
//   while (!Try().ok()) std::this_thread::sleep_for(backoff.Next());
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "core/random.h"

namespace tessera::kube {

// The delay before retry number `attempt` (0-based): base * 2^attempt, capped
// at `cap`, then stretched by jitter * u of itself, u in [0, 1). So attempt 0
// waits base .. base * (1 + jitter). Pure; for tests and for Backoff.
std::chrono::milliseconds BackoffDelay(int attempt, std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                       double jitter, double u);

class Backoff {
 public:
  // jitter: the fraction of the nominal delay added at random (0.2 = up to +20 %).
  // seed 0: from std::random_device, read at the first Next() (most loops
  // succeed at once and never ask; opening the device cost the client's
  // every request about 0.7 % of tessera-scheduler's CPU).
  Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap, double jitter = 0.2, uint64_t seed = 0);

  // The next delay, and counts one attempt.
  std::chrono::milliseconds Next();
  // Back to the first delay (after a success).
  void Reset() { attempt_ = 0; }
  int attempt() const { return attempt_; }

 private:
  std::chrono::milliseconds base_, cap_;
  double jitter_;
  int attempt_ = 0;
  uint64_t seed_;
  std::optional<core::Rng> rng_;  // made by the first Next()
};

}  // namespace tessera::kube
