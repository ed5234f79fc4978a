// The accounting behind the launch gate, apart from any driver call: a token
// bucket of GPU time on a region::ComputeShare (shared by the container's
// processes), and an estimate of launches not yet measured. The gate
// (launch_gate.h) admits a launch while the bucket's balance exceeds the
// estimated cost of this process's work still in flight, and charges each
// launch by the GPU time its events measured once it completed.
//
// The rate of refill: while the node arbiter is alive (its heartbeat in
// region::ArbiterState is younger than its lease, on the gate's clock) the
// arbiter's grant_ppm; otherwise the static share_ppm. Policy `share`
// (work-conserving) is not gated at all until an arbiter has written to the
// region once (nothing knows what is idle: the container may use the whole
// GPU, as before the arbiter existed); once one has, a stale arbiter means
// the static share, as for `hard`. A grant of 0 holds the container: no
// launch passes, and a waiting launch re-reads the grant every
// kArbiterPollUs. When the rate drops, the balance is cut to one refill at
// the new rate, so a hold takes effect at the next launch, not after the
// tokens saved at the old rate are spent.
//
// Thread-safety: ComputeBucket is lock-free (region atomics) and safe from
// any thread or process; LaunchEstimate is not (the gate guards it).
//
//   ComputeBucket b(layout->compute[gpu]);
//   b.Refill(now_us);
//   if (b.Admits(inflight_us)) launch(); else sleep_until(b.NextAdmitUs(now_us, inflight_us));
//   ...  b.Charge(measured_us);   // when the launch's events completed
#pragma once

#include <cstdint>

#include "region/region.h"

namespace tessera::cuda {

inline constexpr uint32_t kPpm = 1'000'000;
inline constexpr uint32_t kDefaultWindowUs = 100'000;
// While an arbiter is alive, a waiting launch re-reads its grant this often.
inline constexpr uint64_t kArbiterPollUs = 1000;

class ComputeBucket {
 public:
  // `share` and `arbiter` outlive the bucket. Without `arbiter` the bucket
  // always refills from the static share.
  explicit ComputeBucket(region::ComputeShare& share,
                         const region::ArbiterState* arbiter = nullptr)
      : s_(share), a_(arbiter) {}

  // Sets the share, window and policy when the region has none (the first
  // process, or the node agent, wins; later values are ignored). share_ppm 0
  // or >= kPpm: no limit. window_us 0: kDefaultWindowUs.
  static void Configure(region::ComputeShare& share, uint32_t share_ppm, uint32_t window_us,
                        uint32_t policy = region::kPolicyHard);

  // Whether the GPU has a static share below the whole GPU (the gate exists).
  bool Limited() const;
  // Whether launches pass ungated now: `share` policy and no arbiter has
  // ever written to the region.
  bool PassThrough() const;
  // Whether an arbiter's heartbeat is valid at `now_us`.
  bool ArbiterAlive(uint64_t now_us) const;
  // Whether an arbiter has ever written to the region.
  bool ArbiterSeen() const;
  // The refill rate at `now_us` (above), parts per million of the GPU.
  uint32_t RatePpm(uint64_t now_us) const;
  uint64_t WindowUs() const;
  // Tokens added per window at the static share: share x window, at least 1 us.
  uint64_t RefillUs() const;
  // Tokens added per window at `ppm`: 0 for 0 (held), else at least 1 us.
  uint64_t RefillAtUs(uint32_t ppm) const;

  // Adds one refill (at RatePpm(now_us)) per window begun since the last refill (windows are
  // aligned to multiples of window_us on the clock), capping the balance at
  // one refill: idle time is not saved up beyond one window's burst. Debt is
  // paid back by later refills first. Any process may refill; each window is
  // added once (compare-and-swap on window_index).
  void Refill(uint64_t now_us);
  // Spends `us` of measured GPU time; the balance may go negative (debt).
  void Charge(uint64_t us);
  int64_t Balance() const;
  // Whether a launch may pass while `inflight_us` of this process's admitted
  // work is still unmeasured (estimated): balance - inflight > 0.
  bool Admits(uint64_t inflight_us) const;
  // The start of the first window whose refill makes Admits(inflight_us)
  // true, counting refills only (not measurements still to come); while an
  // arbiter has been seen, at most kArbiterPollUs away (its grant may change).
  uint64_t NextAdmitUs(uint64_t now_us, uint64_t inflight_us) const;

 private:
  // A change of rate since the last refill: a lower rate cuts the balance to
  // one refill at it; a higher one adds the rest of the current window's
  // difference, so a released container need not wait for the next window.
  void ApplyRate(uint32_t ppm, uint64_t now_us);

  region::ComputeShare& s_;
  const region::ArbiterState* a_;
};

// Expected GPU time of a launch not yet measured: a moving average of the
// measured launches (new samples weigh 1/4), kDefaultUs before the first.
class LaunchEstimate {
 public:
  static constexpr uint64_t kDefaultUs = 100;
  uint64_t Us() const { return have_ ? avg_us_ : kDefaultUs; }
  // Whether any launch has been measured yet.
  bool Known() const { return have_; }
  void Observe(uint64_t measured_us);

 private:
  bool have_ = false;
  uint64_t avg_us_ = 0;
};

// Parses a percentage as the node agent writes it ("30", "12.5", up to four
// decimals) into parts per million. False when it is not in [0, 100].
bool ParseSharePercent(const char* s, uint32_t* ppm);

}  // namespace tessera::cuda
