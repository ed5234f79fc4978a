#include "cuda/compute_gate.h"

#include <algorithm>
#include <cstring>

namespace tessera::cuda {

void ComputeBucket::Configure(region::ComputeShare& share, uint32_t share_ppm,
                              uint32_t window_us, uint32_t policy) {
  if (share_ppm == 0 || share_ppm >= kPpm) return;
  uint32_t none = 0;
  share.policy.compare_exchange_strong(none, policy);
  none = 0;
  share.window_us.compare_exchange_strong(none, window_us != 0 ? window_us : kDefaultWindowUs);
  none = 0;
  share.share_ppm.compare_exchange_strong(none, share_ppm);
}

bool ComputeBucket::Limited() const {
  const uint32_t ppm = s_.share_ppm.load(std::memory_order_relaxed);
  return ppm != 0 && ppm < kPpm;
}

bool ComputeBucket::ArbiterSeen() const {
  return a_ != nullptr && a_->heartbeat_us.load(std::memory_order_acquire) != 0;
}

bool ComputeBucket::ArbiterAlive(uint64_t now_us) const {
  if (a_ == nullptr) return false;
  const uint64_t beat = a_->heartbeat_us.load(std::memory_order_acquire);
  const uint64_t lease = a_->lease_us.load(std::memory_order_relaxed);
  if (beat == 0) return false;
  // A heartbeat from the future (another clock) is trusted only within a lease.
  return now_us < beat + lease && beat < now_us + lease;
}

bool ComputeBucket::PassThrough() const {
  return s_.policy.load(std::memory_order_relaxed) == region::kPolicyShare && !ArbiterSeen();
}

uint32_t ComputeBucket::RatePpm(uint64_t now_us) const {
  const uint32_t share = s_.share_ppm.load(std::memory_order_relaxed);
  if (!ArbiterAlive(now_us)) return share;
  uint32_t grant = s_.grant_ppm.load(std::memory_order_acquire);
  if (s_.policy.load(std::memory_order_relaxed) == region::kPolicyHard) grant = std::min(grant, share);
  return std::min(grant, kPpm);
}

void ComputeBucket::ApplyRate(uint32_t ppm, uint64_t now_us) {
  // applied_ppm holds rate + 1, so 0 means never applied (a fresh bucket).
  uint32_t last = s_.applied_ppm.load(std::memory_order_acquire);
  if (last == ppm + 1) return;
  if (!s_.applied_ppm.compare_exchange_strong(last, ppm + 1, std::memory_order_acq_rel)) return;
  if (last == 0) return;
  const uint32_t old_ppm = last - 1;
  const int64_t cap = static_cast<int64_t>(RefillAtUs(ppm));
  int64_t cur = s_.balance_us.load(std::memory_order_relaxed);
  int64_t next;
  do {
    if (ppm < old_ppm) {
      next = std::min(cur, cap);  // a hold or a smaller grant applies at once
    } else {
      // A larger grant applies from now, not from the next window: the rest
      // of this window at the new rate, minus what the old rate gave for it.
      const uint64_t w = WindowUs();
      const uint64_t left = w - now_us % w;
      const int64_t extra =
          static_cast<int64_t>((RefillAtUs(ppm) - RefillAtUs(old_ppm)) * left / w);
      next = std::max(cur, std::min(cap, cur + extra));
    }
  } while (next != cur && !s_.balance_us.compare_exchange_weak(cur, next, std::memory_order_acq_rel,
                                                               std::memory_order_relaxed));
}

uint64_t ComputeBucket::WindowUs() const {
  const uint32_t w = s_.window_us.load(std::memory_order_relaxed);
  return w != 0 ? w : kDefaultWindowUs;
}

uint64_t ComputeBucket::RefillUs() const {
  const uint64_t r = WindowUs() * s_.share_ppm.load(std::memory_order_relaxed) / kPpm;
  return r != 0 ? r : 1;
}

uint64_t ComputeBucket::RefillAtUs(uint32_t ppm) const {
  if (ppm == 0) return 0;
  const uint64_t r = WindowUs() * ppm / kPpm;
  return r != 0 ? r : 1;
}

void ComputeBucket::Refill(uint64_t now_us) {
  const uint32_t ppm = RatePpm(now_us);
  ApplyRate(ppm, now_us);
  // Stored as index + 1, so 0 means never refilled (the first sight fills).
  const uint64_t window = now_us / WindowUs() + 1;
  uint64_t last = s_.window_index.load(std::memory_order_acquire);
  while (window > last) {
    if (!s_.window_index.compare_exchange_weak(last, window, std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
      continue;  // another thread or process refilled some windows; retry the rest
    }
    const int64_t refill = static_cast<int64_t>(RefillAtUs(ppm));
    if (refill == 0) return;  // held: the window passes with nothing added
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
  const int64_t refill = static_cast<int64_t>(RefillAtUs(RatePpm(now_us)));
  if (refill == 0 || ArbiterSeen()) {
    // Held, or the grant may change at any moment: look again soon.
    const uint64_t poll = now_us + kArbiterPollUs;
    if (refill == 0) return poll;
    const int64_t short_by = static_cast<int64_t>(inflight_us) - Balance();
    const uint64_t windows =
        short_by < 0 ? 1 : std::min<uint64_t>(static_cast<uint64_t>(short_by / refill) + 1, 1u << 20);
    return std::min(poll, (now_us / w + windows) * w);
  }
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
