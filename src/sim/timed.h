// Time mode: replays a trace in trace time. Pods arrive at their creation
// time and leave at their deletion time (released from the ledger); a pod
// that fits nowhere on arrival fails (no queue, as in FGD's protocol). Pods
// are placed through the same Placer, policy and Ledger as the scheduler.
//
// The trace records no GPU utilization, so it is *modelled* (see
// docs/simulator.md): every pod keeps a fixed share of its request busy, drawn
// per workload and per pod from the seed; a GPU's busy fraction is the sum
// over its shares. Jobs on a GPU busier than the interference knee progress
// slower than they would alone; the report gives each job's time-weighted
// slowdown next to the allocation ratio. The run is open-loop: a slowed job still leaves at its
// trace deletion time, its slowdown is how much longer it would have needed.
// Pure logic over values; thread-safe for distinct calls.
//
//   TESSERA_ASSIGN_OR_RETURN(auto pods, TimedArrivals(trace_pods, /*speedup=*/1.0));
//   TESSERA_ASSIGN_OR_RETURN(TimeResult r, ReplayTimed(nodes, pods, options));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fragmentation.h"
#include "core/load.h"
#include "core/model.h"
#include "core/status.h"
#include "sim/trace.h"

namespace tessera::sim {

// A pod with its life in (possibly compressed) trace seconds.
struct TimedPod {
  core::PodRequest request;
  int64_t arrival_s = 0;
  int64_t departure_s = 0;  // >= arrival_s
  std::string workload;     // history key: pods of one workload behave alike
};

// The trace has no owners, so pods of one shape (CPU, memory, GPU count and
// share, QoS) stand in for one workload: "shape/CPU/MEM/NGPU/MILLI/QOS".
std::string ShapeWorkload(const TracePod& pod);

// Every k-th node in name order, k = round(1 / fraction) (all for fraction
// >= 1): a smaller cluster of the same mix, so the trace's real arrival
// times contend for GPUs. The same nodes for every policy and seed.
std::vector<core::NodeInfo> SampleNodes(std::vector<core::NodeInfo> nodes, double fraction);

// Pods ordered by creation time (then name), each arriving at
// first + (creation - first) / speedup and staying for its trace lifetime
// (deletion - creation). speedup > 1 compresses the gaps between arrivals,
// which raises the load; 1 replays trace time. INVALID_ARGUMENT when a pod
// has no creation or deletion time, or speedup is not positive.
Result<std::vector<TimedPod>> TimedArrivals(const std::vector<TracePod>& pods, double speedup);

// The modelled busy fraction of a pod: the share of its GPU request its
// kernels keep busy. Each workload gets a mean drawn uniformly from
// [mean_low, mean_high], each pod its workload's mean plus a uniform jitter in
// [-jitter, +jitter], clamped to [0.05, 1]. A share's busy fraction of its
// GPU is factor x its core request / 1000 (a whole GPU: factor).
struct UtilizationModel {
  double mean_low = 0.2;
  double mean_high = 1.0;
  double jitter = 0.1;
};

// Deterministic in (seed, workload, pod key), on every platform.
double BusyFactor(const UtilizationModel& model, uint64_t seed, const std::string& workload,
                  const std::string& pod_key);

// How a GPU's combined busy fraction slows the jobs on it: not at all up to
// `knee`, then linearly up to 1 + slope at 100 % busy; above 100 % (only
// possible when shares are not throttled) additionally by the oversubscription.
// The knee is also the line above which a GPU counts as highly utilized.
// A job's slowdown on a GPU is Slowdown(the GPU's busy) / Slowdown(its own
// busy): a job alone is never slowed, whatever its own load; on several GPUs
// the worst counts.
struct InterferenceModel {
  double knee = 0.70;
  double slope = 1.0;
};
double Slowdown(const InterferenceModel& model, double busy);

struct TimeOptions {
  std::string policy = "tessera";
  uint64_t seed = 42;
  core::TargetWorkload typical;             // FGD's target workload
  core::InterferenceOptions interference;   // tessera-interference's knobs
  // Predict pods from a per-workload history fed with the modelled
  // utilization of earlier pods, and re-book a running pod at its measured
  // load once it is sampled; off: every pod is booked from its request x
  // interference.default_factor for its whole life.
  bool history = true;
  core::WorkloadHistoryOptions history_options;
  // A placed pod is measured once, this long after it starts (or when it
  // leaves, if sooner), as the node agent's first usage sample would.
  int64_t sample_after_s = 300;
  UtilizationModel utilization;
  InterferenceModel model;
  // Spacing of the time series in the result.
  int64_t series_step_s = 3600;
};

struct TimeSample {
  int64_t t = 0;            // seconds since the first arrival
  double alloc_pct = 0;     // allocated GPU core, % of the cluster's
  int high_gpus = 0;        // GPUs busier than the knee
  int shared_high_gpus = 0; // of those, GPUs with two or more pods
};

struct TimeResult {
  std::string workload;
  std::string policy;
  uint64_t seed = 0;
  int64_t pods = 0, placed = 0, failed = 0;
  double failed_gpu_pct = 0;       // GPU milli of failed pods, % of all requested
  // Over the arrival window (first to last arrival):
  double alloc_pct = 0;            // time-weighted mean allocated GPU core, % of capacity
  double high_util_gpu_hours = 0;  // GPU-hours with busy > knee
  double shared_high_gpu_hours = 0;  // of those, hours with two or more pods on the GPU
  double busy_gpu_hours = 0;       // modelled busy GPU-hours (sum of busy fractions)
  int64_t window_s = 0;
  // Over every placed GPU pod's life:
  int64_t gpu_jobs = 0;
  double mean_slowdown = 1, p95_slowdown = 1;
  double slowed_pct = 0;           // jobs with slowdown > 1.01, %
  double seconds = 0;              // wall time of the run
  std::vector<TimeSample> series;
};

// Replays `pods` (arrival order) on `nodes`. Fails only on bad input
// (unknown policy, duplicate node) or a broken invariant.
Result<TimeResult> ReplayTimed(const std::vector<core::NodeInfo>& nodes, const std::vector<TimedPod>& pods,
                               const TimeOptions& options);

// One row per result: workload,policy,seed,pods,placed,failed,failed_gpu_pct,
// alloc_pct,high_util_gpu_hours,shared_high_gpu_hours,busy_gpu_hours,gpu_jobs,mean_slowdown,
// p95_slowdown,slowed_pct. INTERNAL "PATH: REASON" when it cannot be written.
Status WriteTimeCsv(const std::string& path, const std::vector<TimeResult>& results);
// The time series: policy,seed,hour,alloc_pct,high_gpus,shared_high_gpus.
Status WriteTimeSeriesCsv(const std::string& path, const std::vector<TimeResult>& results);
// Three panels over trace hours, one line per policy (its first seed):
// GPUs above the knee shared by two or more pods, all GPUs above the knee,
// and allocated GPU %. Same gnuplot needs as PlotAllocCurves.
Status PlotTimeSeries(const std::vector<TimeResult>& results, const std::string& png_path,
                      const std::string& title);

}  // namespace tessera::sim
