// tessera-sim: replays cluster traces through Tessera's placement code.
//
//   tessera-sim fgd --nodes NODES.csv --pods PODS.csv --policy fgd --seeds 42-51 --tune 1.3 --out DIR
//   tessera-sim compare --ours DIR --expected analysis_allo_discrete.csv
//   tessera-sim plot --in DIR --out alloc.png
//   tessera-sim time --nodes NODES.csv --pods PODS.csv --policy tessera,tessera-interference --seeds 42-46 --out DIR
//
// Wiring only: flags, files, threads and exit codes. Exit 0 on success, 1 on a
// runtime failure, 2 on bad input; every error is one line on stderr.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "core/dra_policy.h"
#include "core/fragmentation.h"
#include "core/policy.h"
#include "sim/packing_bound.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/run_jobs.h"
#include "sim/timed.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace tessera::sim {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitBadInput = 2;

int Fail(const Status& s, int code) {
  std::fprintf(stderr, "tessera-sim: %s\n", s.message().c_str());
  return code;
}

Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(pos, comma - pos);
    unsigned long long a = 0, b = 0;
    char tail = 0;
    if (std::sscanf(part.c_str(), "%llu-%llu%c", &a, &b, &tail) == 2 && a <= b && b - a < 100000) {
      for (auto s = a; s <= b; ++s) out.push_back(s);
    } else if (std::sscanf(part.c_str(), "%llu%c", &a, &tail) == 1) {
      out.push_back(a);
    } else {
      return InvalidArgument("--seeds: \"" + part + "\" is not a seed or a range like 42-51");
    }
    pos = comma + 1;
  }
  return out;
}

// Policy names, comma-separated; "all" stands for core::PolicyNames() (the
// policies the extender runs), "dra" for the DRA placement variants; a
// policy of the first as NAME+kube places pods without GPUs as kube-scheduler
// does (core/deployed_policy.h).
Result<std::vector<std::string>> ParsePolicies(const std::string& text) {
  std::vector<std::string> out;
  const auto known = ReplayPolicyNames();
  const auto core_names = core::PolicyNames();
  const auto dra_names = core::DraPolicyNames();
  std::string all;
  for (const auto& n : known) all += (all.empty() ? "" : ", ") + n;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string name = text.substr(pos, comma - pos);
    if (name == "all") {
      out.insert(out.end(), core_names.begin(), core_names.end());
    } else if (name == "dra") {
      out.insert(out.end(), dra_names.begin(), dra_names.end());
    } else if (std::find(core_names.begin(), core_names.end(),
                         name.ends_with(core::kDeployedSuffix) ? name.substr(0, name.size() - core::kDeployedSuffix.size())
                                                               : std::string()) != core_names.end()) {
      out.push_back(name);  // NAME+kube (core/deployed_policy.h)
    } else if (std::find(known.begin(), known.end(), name) == known.end()) {
      return InvalidArgument("unknown policy \"" + name + "\" (known: " + all +
                             ", all or dra; each of the first as NAME+kube)");
    } else {
      out.push_back(name);
    }
    pos = comma + 1;
  }
  return out;
}

// One run of a subcommand: every policy with every seed, policy-major.
struct PolicySeed {
  std::string policy;
  uint64_t seed = 0;
};
std::vector<PolicySeed> PolicySeeds(const std::vector<std::string>& policies, const std::vector<uint64_t>& seeds) {
  std::vector<PolicySeed> out;
  for (const auto& p : policies)
    for (uint64_t s : seeds) out.push_back({p, s});
  return out;
}

std::string WorkloadName(const std::string& pods_path) {
  return std::filesystem::path(pods_path).stem().string();
}

// One line per policy: means over seeds at 100 % and 130 % arrived (or the
// last load point a run reached, when it stopped just short of 130 %).
void PrintSummary(const std::vector<RunResult>& runs, const std::vector<std::string>& policies) {
  std::printf("%-18s %6s %10s %10s %12s\n", "policy", "seeds", "alloc@100", "alloc@130", "unalloc@130");
  for (const auto& p : policies) {
    double a100 = 0, a130 = 0;
    int n = 0;
    for (const auto& r : runs) {
      if (r.policy != p) continue;
      const Curve c = AllocCurve(r);
      // A small trace can end a point short of 130 %: take its last column.
      int end = kMaxLoadPercent;
      while (end > 100 && !c[end]) --end;
      if (!c[100] || !c[end]) continue;
      a100 += *c[100];
      a130 += *c[end];
      ++n;
    }
    if (n == 0) {
      std::printf("%-18s %6d %10s %10s %12s\n", p.c_str(), 0, "-", "-", "-");
      continue;
    }
    std::printf("%-18s %6d %10.2f %10.2f %12.2f\n", p.c_str(), n, a100 / n, a130 / n, 100 - a130 / n);
  }
}

// With --breakdown: where the unallocated GPUs sit at the end, means over
// seeds in % of the cluster's GPUs, how many small shares the trace has to
// fill the slivers large shares leave, the least any packing of the shares
// each run placed would leave free, and what best fit decreasing with
// hindsight leaves (SharePackingBound; computed here, after the runs, on one
// thread), and the CPU left on the nodes (% of their cores, not of GPUs).
Status PrintBreakdown(const std::vector<RunResult>& runs, const std::vector<std::string>& policies,
                      const std::vector<core::PodRequest>& pods) {
  int64_t large = 0, small = 0;
  for (const auto& p : pods) {
    if (p.containers.size() != 1 || p.containers[0].gpu_count != 1) continue;
    const int64_t m = p.containers[0].core_milli_per_gpu;
    if (m >= 800 && m < core::kCoreMilliPerGpu) ++large;
    if (m > 0 && m <= 200) ++small;
  }
  std::printf("end state, %% of GPUs: %-18s %10s %12s %12s %12s %14s %10s %10s   (trace: %lld shares >= 800 milli, "
              "%lld <= 200)\n",
              "policy", "idle GPUs", "beside>=800", "under100", "other", "packing bound", "best fit", "CPU free",
              static_cast<long long>(large), static_cast<long long>(small));
  for (const auto& p : policies) {
    double w = 0, l = 0, s = 0, o = 0, b = 0, f = 0, c = 0;
    int n = 0;
    for (const auto& r : runs) {
      if (r.policy != p || r.total_gpus == 0) continue;
      const double t = 10.0 * static_cast<double>(r.total_gpus);
      w += static_cast<double>(r.end.whole_idle_milli) / t;
      l += static_cast<double>(r.end.large_share_milli) / t;
      s += static_cast<double>(r.end.small_sliver_milli) / t;
      o += static_cast<double>(r.end.other_sliver_milli) / t;
      Result<PackingBound> bound = SharePackingBound(r.end.shares_placed);
      if (!bound.ok()) {
        return Status(bound.status().code(), r.workload + " " + p + " seed " + std::to_string(r.seed) + ": " +
                                                 bound.status().message());
      }
      b += static_cast<double>(bound->free_milli) / t;
      f += static_cast<double>(bound->fit_free_milli) / t;
      if (r.end.cpu_milli > 0) {
        c += 100.0 * static_cast<double>(r.end.cpu_free_milli) / static_cast<double>(r.end.cpu_milli);
      }
      ++n;
    }
    if (n > 0) {
      std::printf("end state, %% of GPUs: %-18s %10.2f %12.2f %12.2f %12.2f %14.2f %10.2f %10.2f\n", p.c_str(), w / n,
                  l / n, s / n, o / n, b / n, f / n, c / n);
    }
  }
  return Status::Ok();
}

struct FgdArgs {
  std::string nodes, pods, policy = "tessera", seeds = "42", out, workload;
  double tune = 1.3;
  int jobs = 0;
  bool quiet = false;
  bool breakdown = false;
  core::InterferenceOptions interference;
};

int RunFgd(const FgdArgs& args) {
  auto policies = ParsePolicies(args.policy);
  if (!policies.ok()) return Fail(policies.status(), kExitBadInput);
  auto seeds = ParseSeeds(args.seeds);
  if (!seeds.ok()) return Fail(seeds.status(), kExitBadInput);
  if (!(args.interference.fade_below_free >= 0 && args.interference.fade_below_free <= 1))
    return Fail(InvalidArgument("--fade-below-free must be in 0..1"), kExitBadInput);
  if (args.tune < 0 || args.tune > 10)
    return Fail(InvalidArgument("--tune " + std::to_string(args.tune) + " is outside 0..10"), kExitBadInput);
  auto trace = LoadTrace(args.nodes, args.pods);
  if (!trace.ok()) return Fail(trace.status(), kExitBadInput);
  const std::vector<core::NodeInfo>& nodes = trace->nodes;
  const std::vector<core::PodRequest>& pods = trace->pods;
  const int64_t gpus = trace->gpus;
  const core::TargetWorkload typical = core::TypicalWorkload(pods, 0.95);
  const std::string workload = args.workload.empty() ? WorkloadName(args.pods) : args.workload;
  char tune_text[32];
  std::snprintf(tune_text, sizeof tune_text, "%g", args.tune);

  const std::vector<PolicySeed> jobs = PolicySeeds(*policies, *seeds);
  std::mutex print_mu;
  auto runs = RunJobs(jobs.size(), args.jobs, [&](size_t j) -> Result<RunResult> {
    const auto arrivals = FgdArrivals(pods, gpus * 1000, args.tune, jobs[j].seed);
    ReplayOptions opt{jobs[j].policy, jobs[j].seed, typical, args.interference};
    ReplayStats st;
    auto run = Replay(nodes, arrivals, opt, &st);
    if (!run.ok()) return run;
    run->workload = workload;
    run->tune = tune_text;
    const Curve alloc = AllocCurve(*run);
    auto at = [&](int k) { return alloc[k] ? *alloc[k] : -1.0; };
    if (!args.quiet) {
      std::lock_guard<std::mutex> lock(print_mu);
      std::printf("%s policy=%s seed=%llu pods=%lld placed=%lld failed=%lld alloc@100=%.2f "
                  "alloc@130=%.2f unalloc@130=%.2f time=%.3fs\n",
                  workload.c_str(), jobs[j].policy.c_str(), static_cast<unsigned long long>(jobs[j].seed),
                  static_cast<long long>(st.arrived), static_cast<long long>(st.placed),
                  static_cast<long long>(st.failed), at(100), at(130), 100.0 - at(130), st.seconds);
      std::fflush(stdout);
    }
    return run;
  });
  if (!runs.ok()) return Fail(runs.status(), kExitRuntime);
  PrintSummary(*runs, *policies);
  if (args.breakdown) {
    if (Status s = PrintBreakdown(*runs, *policies, pods); !s.ok()) return Fail(s, kExitRuntime);
  }
  if (Status s = CreateOutputDir(args.out); !s.ok()) return Fail(s, kExitRuntime);
  for (const auto& [file, fn] : {std::pair{"alloc.csv", &WriteAllocCsv}, std::pair{"frag.csv", &WriteFragCsv},
                                 std::pair{"frag_ratio.csv", &WriteFragRatioCsv},
                                 std::pair{"shares.csv", &WriteSharesCsv}}) {
    Status s = fn(args.out + "/" + file, *runs);
    if (!s.ok()) return Fail(s, kExitRuntime);
  }
  return 0;
}

struct TimeArgs {
  std::string nodes, pods, policy = "tessera,tessera-interference", seeds = "42", out, workload, title;
  double speedup = 1.0;
  double node_sample = 1.0;
  bool no_history = false;
  int jobs = 0;
  bool quiet = false;
  bool plot = false;
  TimeOptions options;
};

// Means over seeds per policy, in the order the policies were named.
void PrintTimeSummary(const std::vector<TimeResult>& runs, const std::vector<std::string>& policies) {
  std::printf("%-22s %5s %8s %8s %9s %12s %11s %8s %8s\n", "policy", "seeds", "alloc%", "failed", "failGPU%",
              "highUtilGPUh", "sharedHighh", "slowdown", "p95");
  for (const auto& p : policies) {
    double alloc = 0, failed = 0, fgpu = 0, high = 0, shared = 0, slow = 0, p95 = 0;
    int n = 0;
    for (const auto& r : runs) {
      if (r.policy != p) continue;
      alloc += r.alloc_pct;
      failed += static_cast<double>(r.failed);
      fgpu += r.failed_gpu_pct;
      high += r.high_util_gpu_hours;
      shared += r.shared_high_gpu_hours;
      slow += r.mean_slowdown;
      p95 += r.p95_slowdown;
      ++n;
    }
    if (n == 0) continue;
    std::printf("%-22s %5d %8.3f %8.1f %9.3f %12.1f %11.1f %8.4f %8.4f\n", p.c_str(), n, alloc / n, failed / n,
                fgpu / n, high / n, shared / n, slow / n, p95 / n);
  }
}

int RunTime(TimeArgs args) {
  auto policies = ParsePolicies(args.policy);
  if (!policies.ok()) return Fail(policies.status(), kExitBadInput);
  auto seeds = ParseSeeds(args.seeds);
  if (!seeds.ok()) return Fail(seeds.status(), kExitBadInput);
  const core::InterferenceOptions& io = args.options.interference;
  if (!(io.ceiling > 0) || io.ceiling > 1 || io.default_factor < 0 || io.weight < 0 ||
      !(io.fade_below_free >= 0 && io.fade_below_free <= 1))
    return Fail(InvalidArgument("--ceiling must be in (0, 1], --fade-below-free in 0..1, --default-factor and "
                                "--load-weight >= 0"),
                kExitBadInput);
  const UtilizationModel& um = args.options.utilization;
  if (um.mean_low < 0 || um.mean_high > 1 || um.mean_low > um.mean_high || um.jitter < 0)
    return Fail(InvalidArgument("need 0 <= --util-low <= --util-high <= 1 and --util-jitter >= 0"), kExitBadInput);
  if (!(args.options.model.knee >= 0 && args.options.model.knee < 1) || args.options.model.slope < 0)
    return Fail(InvalidArgument("--knee must be in [0, 1), --slope >= 0"), kExitBadInput);
  auto nodes_in = ReadNodeCsv(args.nodes);
  if (!nodes_in.ok()) return Fail(nodes_in.status(), kExitBadInput);
  auto pods_in = ReadPodCsv(args.pods);
  if (!pods_in.ok()) return Fail(pods_in.status(), kExitBadInput);
  auto arrivals = TimedArrivals(*pods_in, args.speedup);
  if (!arrivals.ok()) return Fail(arrivals.status(), kExitBadInput);
  auto trace = LoadTrace(args.nodes, args.pods);  // nodes in name order and the typical workload
  if (!trace.ok()) return Fail(trace.status(), kExitBadInput);
  args.options.typical = core::TypicalWorkload(trace->pods, 0.95);
  if (!(args.node_sample > 0) || args.node_sample > 1)
    return Fail(InvalidArgument("--node-sample must be in (0, 1]"), kExitBadInput);
  const std::vector<core::NodeInfo> nodes = SampleNodes(trace->nodes, args.node_sample);
  args.options.history = !args.no_history;
  const std::string workload = args.workload.empty() ? WorkloadName(args.pods) : args.workload;

  const std::vector<PolicySeed> jobs = PolicySeeds(*policies, *seeds);
  std::mutex print_mu;
  auto runs = RunJobs(jobs.size(), args.jobs, [&](size_t j) -> Result<TimeResult> {
    TimeOptions opt = args.options;
    opt.policy = jobs[j].policy;
    opt.seed = jobs[j].seed;
    auto run = ReplayTimed(nodes, *arrivals, opt);
    if (!run.ok()) return run;
    run->workload = workload;
    if (!args.quiet) {
      std::lock_guard<std::mutex> lock(print_mu);
      std::printf("%s policy=%s seed=%llu pods=%lld placed=%lld failed=%lld alloc=%.3f%% "
                  "high_util_gpu_h=%.1f shared=%.1f slowdown=%.4f p95=%.4f time=%.2fs\n",
                  workload.c_str(), run->policy.c_str(), static_cast<unsigned long long>(run->seed),
                  static_cast<long long>(run->pods), static_cast<long long>(run->placed),
                  static_cast<long long>(run->failed), run->alloc_pct, run->high_util_gpu_hours,
                  run->shared_high_gpu_hours, run->mean_slowdown, run->p95_slowdown, run->seconds);
      std::fflush(stdout);
    }
    return run;
  });
  if (!runs.ok()) return Fail(runs.status(), kExitRuntime);
  PrintTimeSummary(*runs, *policies);
  if (Status s = CreateOutputDir(args.out); !s.ok()) return Fail(s, kExitRuntime);
  if (Status s = WriteTimeCsv(args.out + "/time.csv", *runs); !s.ok()) return Fail(s, kExitRuntime);
  if (Status s = WriteTimeSeriesCsv(args.out + "/series.csv", *runs); !s.ok()) return Fail(s, kExitRuntime);
  if (args.plot) {
    char setting[96];
    std::snprintf(setting, sizeof setting, " in time mode (%zu nodes, speedup %g), first seed per policy",
                  nodes.size(), args.speedup);
    const std::string title = args.title.empty() ? workload + setting : args.title;
    if (Status s = PlotTimeSeries(*runs, args.out + "/time.png", title); !s.ok()) return Fail(s, kExitRuntime);
  }
  return 0;
}

int RunCompare(const std::string& ours_path, const std::string& expected_path, const std::string& loads_text) {
  std::string ours_file = ours_path;
  if (std::filesystem::is_directory(ours_file)) ours_file += "/alloc.csv";
  auto ours = ReadCurveCsv(ours_file);
  if (!ours.ok()) return Fail(ours.status(), kExitBadInput);
  auto expected = ReadCurveCsv(expected_path);
  if (!expected.ok()) return Fail(expected.status(), kExitBadInput);
  std::vector<int> loads;
  for (uint64_t l : ParseSeeds(loads_text).ok() ? *ParseSeeds(loads_text) : std::vector<uint64_t>{}) {
    if (l > 130) return Fail(InvalidArgument("--loads: " + std::to_string(l) + " is above 130"), kExitBadInput);
    loads.push_back(static_cast<int>(l));
  }
  if (loads.empty()) return Fail(InvalidArgument("--loads: \"" + loads_text + "\" names no load point"), kExitBadInput);
  const auto dev = CompareCurves(*ours, *expected, loads, DefaultPolicyAliases());
  std::fputs(FormatDeviationTable(dev).c_str(), stdout);
  return 0;
}

int RunPlot(const std::string& in, const std::string& out, const std::string& title) {
  std::string file = in;
  if (std::filesystem::is_directory(file)) file += "/alloc.csv";
  auto rows = ReadCurveCsv(file);
  if (!rows.ok()) return Fail(rows.status(), kExitBadInput);
  Status s = PlotAllocCurves(*rows, out, title);
  if (!s.ok()) return Fail(s, kExitRuntime);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace tessera::sim

int main(int argc, char** argv) {
  using namespace tessera::sim;
  CLI::App app{"tessera-sim: replay GPU cluster traces through Tessera's placement policies"};
  app.require_subcommand(1);

  FgdArgs fgd;
  auto* fgd_cmd = app.add_subcommand("fgd", "FGD protocol: arrival-only replay, inflated to --tune x capacity");
  fgd_cmd->add_option("--nodes", fgd.nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  fgd_cmd->add_option("--pods", fgd.pods, "pod list CSV (openb format, 11 or 5 columns)")->required();
  fgd_cmd->add_option("--policy", fgd.policy, "policy name, comma list, all, or dra (the DRA placement variants)")->capture_default_str();
  fgd_cmd->add_option("--seeds", fgd.seeds, "seeds: 42, 42-51 or 1,5,9")->capture_default_str();
  fgd_cmd->add_option("--tune", fgd.tune, "inflate GPU demand to this x capacity (0: off)")->capture_default_str();
  fgd_cmd->add_option("--out", fgd.out, "output directory for alloc.csv, frag.csv, frag_ratio.csv, shares.csv")->required();
  fgd_cmd->add_option("--workload", fgd.workload, "workload name in the CSVs (default: pods file stem)");
  fgd_cmd->add_option("--jobs", fgd.jobs, "parallel runs (default: CPU count)");
  fgd_cmd->add_flag("--quiet", fgd.quiet, "no per-run summary lines");
  fgd_cmd->add_flag("--breakdown", fgd.breakdown,
                    "also print where the unallocated GPUs sit at the end (idle GPUs, beside large shares, slivers, "
                    "other) and the least any packing of the placed shares leaves free");
  fgd_cmd->add_option("--fade-below-free", fgd.interference.fade_below_free,
                      "tessera-interference: fade the penalty out below this free fraction of GPU compute (0: never)")
      ->capture_default_str();

  std::string ours, expected, loads = "100,130";
  auto* cmp = app.add_subcommand("compare", "mean deviation per policy and load point against FGD's results");
  cmp->add_option("--ours", ours, "our alloc.csv or the directory holding it")->required();
  cmp->add_option("--expected", expected, "analysis_allo_discrete.csv of the FGD artifact")->required();
  cmp->add_option("--loads", loads, "load points, e.g. 100,130 or 90-130")->capture_default_str();

  std::string plot_in, plot_out, title = "GPU allocation vs arrived workload";
  auto* plot = app.add_subcommand("plot", "allocation-vs-load curves to PNG (gnuplot)");
  plot->add_option("--in", plot_in, "alloc.csv or the directory holding it")->required();
  plot->add_option("--out", plot_out, "PNG to write")->required();
  plot->add_option("--title", title, "plot title");

  TimeArgs tm;
  auto* time_cmd = app.add_subcommand(
      "time", "time mode: pods arrive at creation_time and leave at deletion_time; modelled utilization "
              "and interference (docs/simulator.md)");
  time_cmd->add_option("--nodes", tm.nodes, "node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  time_cmd->add_option("--pods", tm.pods, "pod list CSV with creation_time and deletion_time")->required();
  time_cmd->add_option("--policy", tm.policy, "policy name, comma list, all, or dra (the DRA placement variants)")->capture_default_str();
  time_cmd->add_option("--seeds", tm.seeds, "seeds: 42, 42-51 or 1,5,9")->capture_default_str();
  time_cmd->add_option("--out", tm.out, "output directory for time.csv and series.csv")->required();
  time_cmd->add_option("--speedup", tm.speedup, "divide the gaps between arrivals by this (lifetimes kept)")
      ->capture_default_str();
  time_cmd->add_option("--node-sample", tm.node_sample,
                       "keep every round(1/F)-th node in name order (a smaller cluster, same mix)")
      ->capture_default_str();
  time_cmd->add_option("--ceiling", tm.options.interference.ceiling,
                       "tessera-interference: predicted GPU busy fraction to stay under")->capture_default_str();
  time_cmd->add_option("--default-factor", tm.options.interference.default_factor,
                       "tessera-interference: predicted busy / request without history")->capture_default_str();
  time_cmd->add_option("--load-weight", tm.options.interference.weight,
                       "tessera-interference: score points per % of load over the ceiling")->capture_default_str();
  time_cmd->add_option("--fade-below-free", tm.options.interference.fade_below_free,
                       "tessera-interference: fade the penalty out below this free fraction of GPU compute (0: never)")
      ->capture_default_str();
  time_cmd->add_flag("--no-history", tm.no_history, "predict every pod from its request (no workload history)");
  time_cmd->add_option("--history-alpha", tm.options.history_options.alpha, "history: EWMA weight of a new sample")
      ->capture_default_str();
  time_cmd->add_option("--history-spread", tm.options.history_options.spread_weight,
                       "history: prediction = mean + this x mean absolute deviation")->capture_default_str();
  time_cmd->add_option("--util-low", tm.options.utilization.mean_low, "model: lowest per-workload busy factor")
      ->capture_default_str();
  time_cmd->add_option("--util-high", tm.options.utilization.mean_high, "model: highest per-workload busy factor")
      ->capture_default_str();
  time_cmd->add_option("--util-jitter", tm.options.utilization.jitter, "model: per-pod +- jitter of the factor")
      ->capture_default_str();
  time_cmd->add_option("--knee", tm.options.model.knee, "model: GPU busy fraction where slowdown starts")
      ->capture_default_str();
  time_cmd->add_option("--slope", tm.options.model.slope, "model: extra slowdown at 100 % busy")
      ->capture_default_str();
  time_cmd->add_option("--workload", tm.workload, "workload name in the CSV (default: pods file stem)");
  time_cmd->add_option("--jobs", tm.jobs, "parallel runs (default: CPU count)");
  time_cmd->add_flag("--plot", tm.plot, "also draw DIR/time.png with gnuplot");
  time_cmd->add_option("--title", tm.title, "plot title");
  time_cmd->add_flag("--quiet", tm.quiet, "no per-run summary lines");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*fgd_cmd) return RunFgd(fgd);
  if (*cmp) return RunCompare(ours, expected, loads);
  if (*plot) return RunPlot(plot_in, plot_out, title);
  if (*time_cmd) return RunTime(tm);
  return 2;
}
