#include "kube/backoff.h"

#include <algorithm>
#include <random>

namespace tessera::kube {

std::chrono::milliseconds BackoffDelay(int attempt, std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                       double jitter, double u) {
  // Doubling in double avoids overflow for large attempts; the cap bounds it.
  double nominal = static_cast<double>(base.count());
  for (int i = 0; i < attempt && nominal < static_cast<double>(cap.count()); ++i) nominal *= 2;
  nominal = std::min(nominal, static_cast<double>(cap.count()));
  const double stretched = nominal * (1.0 + std::clamp(jitter, 0.0, 1.0) * std::clamp(u, 0.0, 1.0));
  return std::chrono::milliseconds(static_cast<int64_t>(stretched));
}

Backoff::Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap, double jitter, uint64_t seed)
    : base_(base), cap_(cap), jitter_(jitter), seed_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  if (!rng_) rng_.emplace(seed_ != 0 ? seed_ : std::random_device{}());
  const auto d = BackoffDelay(attempt_, base_, cap_, jitter_, rng_->Uniform());
  if (attempt_ < 64) ++attempt_;
  return d;
}

}  // namespace tessera::kube
