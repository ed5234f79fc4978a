// The three kinds of series a metric family holds: Counter, Gauge and
// Histogram. Each is one time series (one label set); Family (family.h)
// creates them and keeps them at stable addresses.
//
// Thread-safety: every method may be called from any thread at once. Updates
// are lock-free (relaxed atomics): a hot path resolves its series once and
// then pays an atomic add or two per update. Reads taken while updates run
// may see some updates and not others.
//
//   Histogram& h = family->WithLabels({"filter"});  // once
//   h.Observe(0.0004);                              // per request
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::metrics {

static_assert(std::atomic<double>::is_always_lock_free, "metrics need lock-free atomic<double>");

// Only goes up (until the process restarts).
class Counter {
 public:
  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

  // `name{labels} value\n`; `labels` is FormatLabels' output.
  void Append(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::atomic<uint64_t> value_{0};
};

// Goes up and down.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

  void Append(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::atomic<double> value_{0};
};

// Counts observations into buckets with fixed upper bounds (`le`, inclusive),
// plus their sum. The +Inf bucket is implicit and holds everything, NaN too
// (which then makes the sum NaN).
class Histogram {
 public:
  // `bounds` must outlive the histogram and be sorted, finite and distinct
  // (Registry::AddHistogram checks this).
  explicit Histogram(const std::vector<double>* bounds);

  // Fast path: a binary search for the first bound >= v (none for NaN: the
  // comparison is false), one relaxed add to that bucket and one to the sum
  // (a compare-and-swap loop on x86). No lock, no allocation.
  void Observe(double v) {
    const auto it = std::partition_point(bounds_->begin(), bounds_->end(), [v](double b) { return !(v <= b); });
    const size_t i = static_cast<size_t>(it - bounds_->begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(v, std::memory_order_relaxed);
  }

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf; each counts observations <= its bound
    uint64_t count = 0;                // == cumulative.back()
    double sum = 0;
  };
  Snapshot Read() const;
  const std::vector<double>& bounds() const { return *bounds_; }

  // `name_bucket{labels,le="b"} n` per bound and +Inf, then `name_sum` and `name_count`.
  void Append(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  const std::vector<double>* bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket (not cumulative); last is +Inf only
  std::atomic<double> sum_{0};
};

}  // namespace tessera::metrics
