// The correction of measured GPU time for contexts that share a GPU at
// once, apart from any driver call. When several contexts (processes) have
// work on one GPU, the driver time-slices between them, so the events
// around a launch span the other contexts' slices too: measured on an H200,
// two saturating processes each got 0.458 of the GPU while their spans
// covered 0.998 of the wall time. Charged as measured, every container
// sharing a GPU pays for its neighbours' time (tests/gpu/RESULTS.md).
//
// ShareClock integrates this process's share of the GPU over time: between
// two samples the time counts 1 / (1 + others), where `others` is the
// number of other contexts the GPU's busy board (region/board.h) shows busy
// at the later sample (sample-and-hold backwards; the gate samples about
// every millisecond while it has work in flight, and again when it charges a
// measurement). A run measured from mark `from` (taken when its first
// launch was admitted) to mark `to` (when its completion was seen) is
// charged measured x (V(to) - V(from)) / (to - from): its span times the
// mean share this context had meanwhile. Alone on the GPU the factor is 1
// and the charge is the measurement. The model is the driver's default
// time-slicing, which gives busy contexts equal slices; its own streams are
// one context, so this process's concurrent work never counts as another.
//
// Thread-safety: none (the gate guards it with its lock).
//
//   ShareClock c;
//   c.Sample(now, OthersBusy(board, slot, now));
//   ShareClock::Mark from = c.Now();  ...  c.Sample(later, n); uint64_t us = c.Charge(m, from, c.Now());
#pragma once

#include <cstdint>

namespace tessera::cuda {

class ShareClock {
 public:
  struct Mark {
    uint64_t t_us = 0;  // gate clock
    double v_us = 0;    // this context's share integrated up to t_us
  };

  // Advances to `now_us`; the time since the last sample counts at
  // 1 / (1 + others). The first sample only sets the start. A clock that
  // went back is ignored.
  void Sample(uint64_t now_us, uint32_t others);
  Mark Now() const { return Mark{t_us_, v_us_}; }
  // The mark at `now_us` if the others seen last stayed so (no sample
  // taken); Now() when `now_us` is before the last sample.
  Mark At(uint64_t now_us) const;
  // Whether a first sample was taken.
  bool Started() const { return started_; }
  // The others seen at the last sample.
  uint32_t Others() const { return others_; }
  // The part of `measured_us` that was this context's, for a run between
  // marks `from` and `to` of this clock: measured x the mean share between
  // them; x 1 / (1 + Others()) when no time passed between them. Never more
  // than `measured_us`; at least 1 us when it is at least 1 us.
  uint64_t Charge(uint64_t measured_us, Mark from, Mark to) const;

 private:
  bool started_ = false;
  uint64_t t_us_ = 0;
  double v_us_ = 0;
  uint32_t others_ = 0;
};

}  // namespace tessera::cuda
