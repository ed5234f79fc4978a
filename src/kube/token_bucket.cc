#include "kube/token_bucket.h"

#include <algorithm>

namespace tessera::kube {

TokenBucket::TokenBucket(double qps, int burst, Clock clock)
    : qps_(qps), burst_(std::max(1, burst)), clock_(std::move(clock)), tokens_(burst_), last_(clock_()) {}

std::chrono::nanoseconds TokenBucket::Reserve() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  MutexLock lock(mu_);
  const auto now = clock_();
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / qps_ * 1e9));
}

}  // namespace tessera::kube
