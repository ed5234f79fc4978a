#include "sim/timed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <queue>
#include <tuple>

#include "core/ledger.h"
#include "sim/replay.h"
#include "core/placer.h"
#include "core/policy.h"
#include "core/random.h"
#include "sim/report.h"
#include "sim/workload.h"

namespace tessera::sim {
namespace {

// Busy fractions are kept in millionths of a GPU so that adding and removing
// shares returns a GPU exactly to where it was.
constexpr int64_t kMicro = 1000000;

uint64_t Fnv1a(uint64_t seed, const std::string& text) {
  uint64_t h = 1469598103934665603ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// The fraction of one GPU a share of `core_milli` keeps busy at `factor`.
int64_t ShareBusyMicro(int64_t core_milli, double factor) {
  const int64_t request = core_milli > 0 ? core_milli : core::kCoreMilliPerGpu;
  return std::llround(factor * static_cast<double>(request) * (kMicro / 1000));
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Internal(path + ": cannot open for writing");
  out << text;
  out.close();
  if (!out) return Internal(path + ": write failed");
  return Status::Ok();
}

}  // namespace

std::string ShapeWorkload(const TracePod& pod) {
  return "shape/" + std::to_string(pod.cpu_milli) + "/" + std::to_string(pod.memory_mib) + "/" +
         std::to_string(pod.num_gpu) + "/" + std::to_string(pod.gpu_milli) + "/" + pod.qos;
}

std::vector<core::NodeInfo> SampleNodes(std::vector<core::NodeInfo> nodes, double fraction) {
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  if (!(fraction > 0) || fraction >= 1) return nodes;
  const size_t k = std::max<size_t>(1, static_cast<size_t>(std::llround(1.0 / fraction)));
  std::vector<core::NodeInfo> out;
  for (size_t i = 0; i < nodes.size(); i += k) out.push_back(std::move(nodes[i]));
  return out;
}

Result<std::vector<TimedPod>> TimedArrivals(const std::vector<TracePod>& pods, double speedup) {
  if (!(speedup > 0)) return InvalidArgument("speedup must be positive, not " + std::to_string(speedup));
  std::vector<const TracePod*> order;
  for (const TracePod& p : pods) {
    if (p.creation_time < 0 || p.deletion_time < 0)
      return InvalidArgument("pod " + p.name + " has no creation_time or deletion_time; time mode needs both");
    order.push_back(&p);
  }
  std::sort(order.begin(), order.end(), [](const TracePod* a, const TracePod* b) {
    return std::tie(a->creation_time, a->name) < std::tie(b->creation_time, b->name);
  });
  std::vector<TimedPod> out;
  out.reserve(order.size());
  const int64_t first = order.empty() ? 0 : order.front()->creation_time;
  for (const TracePod* p : order) {
    TimedPod t;
    t.request = ToPodRequest(*p);
    t.arrival_s = first + std::llround(static_cast<double>(p->creation_time - first) / speedup);
    t.departure_s = t.arrival_s + (p->deletion_time - p->creation_time);
    t.workload = ShapeWorkload(*p);
    out.push_back(std::move(t));
  }
  return out;
}

double BusyFactor(const UtilizationModel& model, uint64_t seed, const std::string& workload,
                  const std::string& pod_key) {
  core::Rng w(Fnv1a(seed, workload));
  const double mean = model.mean_low + (model.mean_high - model.mean_low) * w.Uniform();
  core::Rng p(Fnv1a(seed ^ 0x5bd1e995ULL, pod_key));
  const double jitter = model.jitter * (2 * p.Uniform() - 1);
  return std::clamp(mean + jitter, 0.05, 1.0);
}

double Slowdown(const InterferenceModel& model, double busy) {
  const double span = std::max(1e-9, 1.0 - model.knee);
  const double ramp = std::clamp((std::min(busy, 1.0) - model.knee) / span, 0.0, 1.0);
  return std::max(1.0, busy) * (1.0 + model.slope * ramp);
}

Result<TimeResult> ReplayTimed(const std::vector<core::NodeInfo>& nodes, const std::vector<TimedPod>& pods,
                               const TimeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  core::GpuLoadBook book;
  core::PolicyConfig config;
  config.workload = options.typical;
  config.interference = options.interference;
  config.load = &book;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<core::PlacementPolicy> policy, MakeReplayPolicy(options.policy, config));
  core::Ledger ledger;
  for (const auto& n : nodes) TESSERA_RETURN_IF_ERROR(ledger.AddNode(n));
  core::Placer placer = SeededPlacer(*policy, ledger.nodes().size(), options.seed);
  core::WorkloadHistory history(options.history_options);

  // Global GPU numbering: node i's GPU g is gpu_base[i] + g.
  std::vector<int> gpu_base;
  int total_gpus = 0;
  for (const auto& n : ledger.nodes()) {
    gpu_base.push_back(total_gpus);
    total_gpus += static_cast<int>(n.info.gpus.size());
  }
  const int64_t knee_micro = std::llround(options.model.knee * kMicro);
  std::vector<int64_t> busy(total_gpus, 0);          // modelled busy, micro
  std::vector<std::vector<int>> on_gpu(total_gpus);  // placed jobs (pod indexes)

  struct Job {
    bool placed = false;
    double factor = 0;
    std::vector<std::pair<int, int64_t>> gpus;  // (global GPU, busy micro)
    double slow_integral = 0;
    double slow_now = 1;
    int64_t since = 0;
    int64_t gpu_milli = 0;
  };
  std::vector<Job> jobs(pods.size());

  TimeResult out;
  out.policy = options.policy;
  out.seed = options.seed;
  out.pods = static_cast<int64_t>(pods.size());
  if (pods.empty()) return out;
  const int64_t w0 = pods.front().arrival_s;
  int64_t w1 = pods.back().arrival_s;
  if (w1 == w0) {
    for (const TimedPod& p : pods) w1 = std::max(w1, p.departure_s);
  }
  out.window_s = w1 - w0;
  const double capacity_milli = static_cast<double>(total_gpus) * core::kCoreMilliPerGpu;

  // State integrated over time.
  int64_t now = w0;
  int64_t alloc_milli = 0;
  int high = 0, shared_high = 0;
  int64_t busy_total = 0;  // micro
  double alloc_integral = 0, high_integral = 0, shared_high_integral = 0, busy_integral = 0;
  int64_t next_series = w0;
  auto advance = [&](int64_t t) {
    // A sample at T shows the state after every event at T: it is taken
    // once time moves past T.
    while (options.series_step_s > 0 && next_series < t && next_series <= w1) {
      TimeSample s;
      s.t = next_series - w0;
      s.alloc_pct = capacity_milli > 0 ? 100.0 * static_cast<double>(alloc_milli) / capacity_milli : 0;
      s.high_gpus = high;
      s.shared_high_gpus = shared_high;
      out.series.push_back(s);
      next_series += options.series_step_s;
    }
    const int64_t a = std::max(now, w0), b = std::min(t, w1);
    if (b > a) {
      const double dt = static_cast<double>(b - a);
      alloc_integral += dt * static_cast<double>(alloc_milli);
      high_integral += dt * high;
      shared_high_integral += dt * shared_high;
      busy_integral += dt * static_cast<double>(busy_total) / kMicro;
    }
    now = std::max(now, t);
  };
  // Credits every job on `gpus` with its slowdown up to `t`.
  auto credit = [&](const std::vector<std::pair<int, int64_t>>& gpus, int64_t t) {
    for (const auto& [g, unused] : gpus)
      for (int j : on_gpu[g]) {
        jobs[j].slow_integral += jobs[j].slow_now * static_cast<double>(t - jobs[j].since);
        jobs[j].since = t;
      }
  };
  auto refresh = [&](const std::vector<std::pair<int, int64_t>>& gpus) {
    for (const auto& [g, unused] : gpus)
      for (int j : on_gpu[g]) {
        // Relative to running alone: a job's own load is not interference.
        double s = 1;
        for (const auto& [h, own] : jobs[j].gpus)
          s = std::max(s, Slowdown(options.model, static_cast<double>(busy[h]) / kMicro) /
                              Slowdown(options.model, static_cast<double>(own) / kMicro));
        jobs[j].slow_now = s;
      }
  };
  // Call with on_gpu already updated for an arrival, not yet for a departure.
  auto change = [&](const std::vector<std::pair<int, int64_t>>& gpus, int sign, int sharers_delta) {
    for (const auto& [g, b] : gpus) {
      const int sharers = static_cast<int>(on_gpu[g].size());
      const bool was = busy[g] > knee_micro;
      const bool was_shared = was && sharers - (sign > 0 ? sharers_delta : 0) >= 2;
      busy[g] += sign * b;
      busy_total += sign * b;
      const bool is = busy[g] > knee_micro;
      const bool is_shared = is && sharers - (sign < 0 ? sharers_delta : 0) >= 2;
      high += is - was;
      shared_high += is_shared - was_shared;
    }
  };

  // Events after arrivals: (time, kind, pod). Departures (kind 0) come
  // before samples (1) and arrivals at the same second, so a leaving pod's
  // room is free for one arriving then.
  using Event = std::tuple<int64_t, int, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  int64_t requested_milli = 0, failed_milli = 0;
  size_t next_arrival = 0;
  while (next_arrival < pods.size() || !events.empty()) {
    const bool take_event = !events.empty() &&
                            (next_arrival == pods.size() || std::get<0>(events.top()) <= pods[next_arrival].arrival_s);
    if (take_event) {
      const auto [t, kind, i] = events.top();
      events.pop();
      advance(t);
      Job& job = jobs[i];
      const TimedPod& pod = pods[i];
      if (kind == 1) {  // first usage sample
        if (options.history && !job.gpus.empty()) {
          const double measured = static_cast<double>(job.gpus.front().second) / kMicro;
          history.Observe(pod.workload, measured, t);
          // The running pod's own load is now known, as the extender learns it
          // from tessera.io/usage: re-book it, and bump its node's version so
          // the placer recomputes that node's cached scores.
          const core::Assignment* held = ledger.FindAssignment(pod.request.key);
          if (held != nullptr) {
            book.Expect(pod.request.key, core::PredictBusy(pod.request, measured, 1.0));
            book.Place(pod.request, *held);
            const core::NodeState* node = ledger.FindNode(held->node);
            TESSERA_RETURN_IF_ERROR(ledger.UpdateNode(node->info));
          }
        }
        continue;
      }
      credit(job.gpus, t);
      change(job.gpus, -1, 1);
      for (const auto& [g, unused] : job.gpus) std::erase(on_gpu[g], i);
      refresh(job.gpus);
      alloc_milli -= job.gpu_milli;
      TESSERA_RETURN_IF_ERROR(ledger.Forget(pod.request.key));
      book.Release(pod.request.key);
      continue;
    }
    const int i = static_cast<int>(next_arrival++);
    const TimedPod& pod = pods[i];
    advance(pod.arrival_s);
    const int64_t milli = PodGpuMilli(pod.request);
    requested_milli += milli;
    const std::optional<double> measured =
        options.history ? history.Predict(pod.workload, pod.arrival_s) : std::nullopt;
    book.Expect(pod.request.key, core::PredictBusy(pod.request, measured, options.interference.default_factor));
    Result<core::Assignment> a = placer.Place(pod.request, ledger);
    if (!a.ok()) {
      ++out.failed;
      failed_milli += milli;
      book.Release(pod.request.key);
      continue;
    }
    Status s = ledger.Assume(pod.request, *a);
    if (!s.ok()) return Internal("placer chose a placement the ledger refuses: " + s.ToString());
    book.Place(pod.request, *a);
    ++out.placed;
    Job& job = jobs[i];
    job.placed = true;
    job.gpu_milli = milli;
    job.factor = BusyFactor(options.utilization, options.seed, pod.workload, pod.request.key);
    const int node = ledger.NodeIndex(a->node);
    for (const auto& ca : a->containers) {
      int64_t core_milli = 0;
      for (const auto& c : pod.request.containers)
        if (c.name == ca.name) core_milli = c.core_milli_per_gpu;
      for (const auto& share : ca.gpus)
        job.gpus.push_back({gpu_base[node] + share.index, ShareBusyMicro(core_milli, job.factor)});
    }
    alloc_milli += milli;
    job.since = pod.arrival_s;
    credit(job.gpus, pod.arrival_s);
    for (const auto& [g, unused] : job.gpus) on_gpu[g].push_back(i);
    change(job.gpus, +1, 1);
    refresh(job.gpus);
    events.emplace(pod.departure_s, 0, i);
    if (!job.gpus.empty())
      events.emplace(std::min(pod.arrival_s + options.sample_after_s, pod.departure_s), 1, i);
  }
  // The series runs to the end of the window even when nothing happens there.
  advance(std::max(now, w1) + 1);

  std::vector<double> slow;
  for (size_t i = 0; i < pods.size(); ++i) {
    const Job& job = jobs[i];
    if (!job.placed || job.gpus.empty()) continue;
    const int64_t life = pods[i].departure_s - pods[i].arrival_s;
    slow.push_back(life > 0 ? job.slow_integral / static_cast<double>(life) : job.slow_now);
  }
  out.gpu_jobs = static_cast<int64_t>(slow.size());
  if (!slow.empty()) {
    double sum = 0;
    int64_t slowed = 0;
    for (double v : slow) {
      sum += v;
      slowed += v > 1.01;
    }
    out.mean_slowdown = sum / static_cast<double>(slow.size());
    out.slowed_pct = 100.0 * static_cast<double>(slowed) / static_cast<double>(slow.size());
    std::sort(slow.begin(), slow.end());
    const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(slow.size())));
    out.p95_slowdown = slow[std::clamp<size_t>(rank, 1, slow.size()) - 1];
  }
  out.failed_gpu_pct = requested_milli > 0 ? 100.0 * static_cast<double>(failed_milli) / static_cast<double>(requested_milli) : 0;
  if (out.window_s > 0 && capacity_milli > 0) {
    out.alloc_pct = 100.0 * alloc_integral / (static_cast<double>(out.window_s) * capacity_milli);
  }
  out.high_util_gpu_hours = high_integral / 3600.0;
  out.shared_high_gpu_hours = shared_high_integral / 3600.0;
  out.busy_gpu_hours = busy_integral / 3600.0;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Status WriteTimeCsv(const std::string& path, const std::vector<TimeResult>& results) {
  std::string text =
      "workload,policy,seed,pods,placed,failed,failed_gpu_pct,alloc_pct,high_util_gpu_hours,shared_high_gpu_hours,"
      "busy_gpu_hours,"
      "gpu_jobs,mean_slowdown,p95_slowdown,slowed_pct\n";
  for (const TimeResult& r : results) {
    text += r.workload + "," + r.policy + "," + std::to_string(r.seed) + "," + std::to_string(r.pods) + "," +
            std::to_string(r.placed) + "," + std::to_string(r.failed) + "," + Fixed(r.failed_gpu_pct, 4) + "," +
            Fixed(r.alloc_pct, 4) + "," + Fixed(r.high_util_gpu_hours, 3) + "," +
            Fixed(r.shared_high_gpu_hours, 3) + "," + Fixed(r.busy_gpu_hours, 3) +
            "," + std::to_string(r.gpu_jobs) + "," + Fixed(r.mean_slowdown, 5) + "," + Fixed(r.p95_slowdown, 5) +
            "," + Fixed(r.slowed_pct, 3) + "\n";
  }
  return WriteFile(path, text);
}

Status WriteTimeSeriesCsv(const std::string& path, const std::vector<TimeResult>& results) {
  std::string text = "policy,seed,hour,alloc_pct,high_gpus,shared_high_gpus\n";
  for (const TimeResult& r : results)
    for (const TimeSample& s : r.series)
      text += r.policy + "," + std::to_string(r.seed) + "," + Fixed(static_cast<double>(s.t) / 3600.0, 3) + "," +
              Fixed(s.alloc_pct, 4) + "," + std::to_string(s.high_gpus) + "," + std::to_string(s.shared_high_gpus) +
              "\n";
  return WriteFile(path, text);
}

Status PlotTimeSeries(const std::vector<TimeResult>& results, const std::string& png_path,
                      const std::string& title) {
  const std::filesystem::path png(png_path);
  const std::string dat_path = std::filesystem::path(png).replace_extension(".dat").string();
  const std::string gp_path = std::filesystem::path(png).replace_extension(".gp").string();
  std::string data, alloc_plots, high_plots, shared_plots;
  std::vector<std::string> seen;
  int block = 0;
  for (const TimeResult& r : results) {
    if (std::find(seen.begin(), seen.end(), r.policy) != seen.end()) continue;
    seen.push_back(r.policy);
    data += "# " + r.policy + " seed " + std::to_string(r.seed) + "\n";
    for (const TimeSample& s : r.series)
      data += Fixed(static_cast<double>(s.t) / 3600.0, 3) + " " + Fixed(s.alloc_pct, 4) + " " +
              std::to_string(s.high_gpus) + " " + std::to_string(s.shared_high_gpus) + "\n";
    data += "\n\n";
    const std::string sep = block == 0 ? "" : ", \\\n     ";
    const std::string src = GnuplotString(dat_path) + " index " + std::to_string(block);
    alloc_plots += sep + src + " using 1:2 with lines lw 2 title " + GnuplotString(r.policy);
    high_plots += sep + src + " using 1:3 with lines lw 2 title " + GnuplotString(r.policy);
    shared_plots += sep + src + " using 1:4 with lines lw 2 title " + GnuplotString(r.policy);
    ++block;
  }
  const std::string script =
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo noenhanced size 1200,1200\n"
      "} else {\n"
      "  set terminal png noenhanced size 1200,1200\n"
      "}\n"
      "set output " + GnuplotString(png_path) + "\n"
      "set multiplot layout 3,1 title " + GnuplotString(title) + "\n"
      "set grid\nset key left top\n"
      "set ylabel 'GPUs above the knee, 2+ pods'\n"
      "plot " + shared_plots + "\n"
      "set ylabel 'GPUs above the knee, all'\n"
      "plot " + high_plots + "\n"
      "set xlabel 'hours since the first arrival'\n"
      "set ylabel 'allocated GPU core (% of capacity)'\n"
      "plot " + alloc_plots + "\n"
      "unset multiplot\n";
  TESSERA_RETURN_IF_ERROR(WriteFile(dat_path, data));
  TESSERA_RETURN_IF_ERROR(WriteFile(gp_path, script));
  return RunGnuplot(gp_path, png_path);
}

}  // namespace tessera::sim
