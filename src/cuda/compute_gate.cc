#include "cuda/compute_gate.h"

#include <algorithm>
#include <cstring>

namespace tessera::cuda {

void ComputeBucket::Configure(region::ComputeShare& share, uint32_t share_ppm,
                              uint32_t window_us) {
  if (share_ppm == 0 || share_ppm >= kPpm) return;
  uint32_t none = 0;
  share.window_us.compare_exchange_strong(none, window_us != 0 ? window_us : kDefaultWindowUs);
  none = 0;
  share.share_ppm.compare_exchange_strong(none, share_ppm);
}

bool ComputeBucket::Limited() const {
  const uint32_t ppm = s_.share_ppm.load(std::memory_order_relaxed);
  return ppm != 0 && ppm < kPpm;
}

uint64_t ComputeBucket::WindowUs() const {
  const uint32_t w = s_.window_us.load(std::memory_order_relaxed);
  return w != 0 ? w : kDefaultWindowUs;
}

uint64_t ComputeBucket::RefillUs() const {
  const uint64_t r = WindowUs() * s_.share_ppm.load(std::memory_order_relaxed) / kPpm;
  return r != 0 ? r : 1;
}

void ComputeBucket::Refill(uint64_t now_us) {
  // Stored as index + 1, so 0 means never refilled (the first sight fills).
  const uint64_t window = now_us / WindowUs() + 1;
  uint64_t last = s_.window_index.load(std::memory_order_acquire);
  while (window > last) {
    if (!s_.window_index.compare_exchange_weak(last, window, std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
      continue;  // another thread or process refilled some windows; retry the rest
    }
    const int64_t refill = static_cast<int64_t>(RefillUs());
    // Enough windows to pay any debt and fill the bucket, without overflow.
    const uint64_t windows = window - last;
    int64_t cur = s_.balance_us.load(std::memory_order_relaxed);
    int64_t next;
    do {
      const uint64_t need = cur >= refill ? 0 : static_cast<uint64_t>(refill - cur) / refill + 1;
      next = std::min(refill, cur + static_cast<int64_t>(std::min(windows, need)) * refill);
      next = std::max(next, cur);  // a balance above the cap is kept, not cut
    } while (!s_.balance_us.compare_exchange_weak(cur, next, std::memory_order_acq_rel,
                                                   std::memory_order_relaxed));
    return;
  }
}

void ComputeBucket::Charge(uint64_t us) {
  s_.balance_us.fetch_sub(static_cast<int64_t>(us), std::memory_order_acq_rel);
  s_.used_us.fetch_add(us, std::memory_order_relaxed);
}

int64_t ComputeBucket::Balance() const { return s_.balance_us.load(std::memory_order_acquire); }

bool ComputeBucket::Admits(uint64_t inflight_us) const {
  return Balance() > static_cast<int64_t>(inflight_us);
}

uint64_t ComputeBucket::NextAdmitUs(uint64_t now_us, uint64_t inflight_us) const {
  const uint64_t w = WindowUs();
  const int64_t refill = static_cast<int64_t>(RefillUs());
  const int64_t short_by = static_cast<int64_t>(inflight_us) - Balance();  // >= 0 when blocked
  // Refills cap at one window's worth, so unmeasured work above that cannot
  // be waited out by refills alone: the next window is the best guess.
  const uint64_t windows =
      short_by < 0 ? 1 : std::min<uint64_t>(static_cast<uint64_t>(short_by / refill) + 1, 1u << 20);
  return (now_us / w + windows) * w;
}

void LaunchEstimate::Observe(uint64_t measured_us) {
  if (!have_) {
    avg_us_ = measured_us;
    have_ = true;
    return;
  }
  avg_us_ = (3 * avg_us_ + measured_us + 2) / 4;
}

bool ParseSharePercent(const char* s, uint32_t* ppm) {
  uint64_t whole = 0, frac = 0;
  int digits = 0, frac_digits = 0;
  const char* p = s;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
    whole = whole * 10 + static_cast<uint64_t>(*p - '0');
    if (whole > 100) return false;
  }
  if (*p == '.') {
    for (++p; *p >= '0' && *p <= '9'; ++p) {
      if (++frac_digits > 4) return false;
      frac = frac * 10 + static_cast<uint64_t>(*p - '0');
    }
    if (frac_digits == 0) return false;
  }
  if (*p != '\0' || digits == 0) return false;
  for (int i = frac_digits; i < 4; ++i) frac *= 10;
  const uint64_t v = whole * 10'000 + frac;
  if (v > 1'000'000) return false;
  *ppm = static_cast<uint32_t>(v);
  return true;
}

}  // namespace tessera::cuda
