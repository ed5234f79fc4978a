#include "cuda/contention.h"

#include <algorithm>

namespace tessera::cuda {

void ShareClock::Sample(uint64_t now_us, uint32_t others) {
  if (!started_) {
    started_ = true;
    t_us_ = now_us;
    others_ = others;
    return;
  }
  if (now_us < t_us_) return;
  v_us_ += static_cast<double>(now_us - t_us_) / (1.0 + others);
  t_us_ = now_us;
  others_ = others;
}

ShareClock::Mark ShareClock::At(uint64_t now_us) const {
  if (!started_ || now_us <= t_us_) return Now();
  return Mark{now_us, v_us_ + static_cast<double>(now_us - t_us_) / (1.0 + others_)};
}

uint64_t ShareClock::Charge(uint64_t measured_us, Mark from, Mark to) const {
  if (measured_us == 0) return 0;
  double share;
  if (to.t_us > from.t_us && to.v_us >= from.v_us) {
    share = (to.v_us - from.v_us) / static_cast<double>(to.t_us - from.t_us);
  } else {
    share = 1.0 / (1.0 + others_);
  }
  share = std::clamp(share, 0.0, 1.0);
  // Rounded by hand: the library links no libm.
  const auto us = static_cast<uint64_t>(static_cast<double>(measured_us) * share + 0.5);
  return std::clamp<uint64_t>(us, 1, measured_us);
}

}  // namespace tessera::cuda
