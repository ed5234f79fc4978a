// Simulator reports in the layout of the FGD artifact (ATC'23 "Beware of
// Fragmentation"): per-pod samples of a replay are turned into the discrete
// 0..130 "arrived workload %" columns of analysis_{allo,frag,frag_ratio}_
// discrete.csv, written and read back as CSV, compared with the published
// tables, and plotted with gnuplot. See docs/notes/fgd-replay.md, sections 5
// and 7, for where each number comes from.
// Thread-safety: pure functions over values; the file functions touch only
// the paths they are given, so concurrent calls on different paths are safe.
//
//   TESSERA_RETURN_IF_ERROR(WriteAllocCsv("out/alloc.csv", runs));
//   TESSERA_ASSIGN_OR_RETURN(std::vector<CurveRow> ours, ReadCurveCsv("out/alloc.csv"));
//   std::cout << FormatDeviationTable(CompareCurves(ours, expected, {50, 100, 130},
//                                                   DefaultPolicyAliases()));
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::sim {

// Highest arrived-workload percentage with a column (columns are 0..130).
inline constexpr int kMaxLoadPercent = 130;

// The cluster right after one pod arrival (one row of the artifact's
// analysis_allo.csv / analysis_frag.csv).
struct Sample {
  int64_t arrived_milli = 0;  // cumulative requested GPU milli, failed pods included
  int64_t used_milli = 0;     // allocated GPU milli in the cluster
  double frag_milli = 0;      // fragmented GPU milli (FGD measure, XL counted)
  double idle_milli = 0;      // idle GPU milli (sum of all FGD buckets)
};

// Where the GPU milli left unallocated at the end of a replay sit.
struct EndState {
  int64_t whole_idle_milli = 0;    // GPUs with nothing on them
  int64_t large_share_milli = 0;   // free beside a single share of >= 800 milli
  int64_t small_sliver_milli = 0;  // free under kSmallSliverMilli on any other partly used GPU
  int64_t other_sliver_milli = 0;  // free on any other partly used GPU
  // The shares placed: per GPU milli under a whole GPU, how many GPUs a
  // placed pod took at that share (a 2-GPU pod at 500 counts twice): what
  // SharePackingBound (sim/packing_bound.h) bounds the free milli of.
  std::map<int64_t, int64_t> shares_placed;
  // CPU left on the nodes, and what they have: where CPU runs out, idle
  // GPUs cannot be used whatever the placement of the shares.
  int64_t cpu_free_milli = 0;
  int64_t cpu_milli = 0;
};

// Free share under this on a partly used GPU is a sliver only the traces'
// rarest share (50 milli, 0.1-0.2 % of the pods) fits: mostly what two or three
// common shares leave (470 + 470 leaves 60, 650 + 320 leaves 30).
inline constexpr int64_t kSmallSliverMilli = 100;

// One replay: a workload under a policy with one tuning seed.
struct RunResult {
  std::string workload;  // e.g. "openb_pod_list_default"
  std::string policy;    // e.g. "fgd" or "06-FGD"
  std::string tune;      // written verbatim, e.g. "1.3"
  uint64_t seed = 0;
  int64_t total_gpus = 0;  // T: GPUs in the cluster
  std::vector<Sample> samples;  // in arrival order
  EndState end;                 // the cluster after the last arrival
};

// Column k holds the value at arrived workload k %; empty where no sample fell
// within k-1..k+1 %.
using Curve = std::array<std::optional<double>, kMaxLoadPercent + 1>;

// Discretisation, exactly as the artifact's merge scripts. Per sample:
//   arrive = round-half-even(arrived / T / 10) (an integer percent)
//   alloc  = Python round(used / T / 10, 2)
//   frag   = frag_milli as logged with %.2f
//   ratio  = 100 * frag / idle as logged with %.2f (0 when idle == 0)
// Column k averages the samples with arrive == k, or else those with
// k-1 <= arrive <= k+1, or stays empty. Means are numpy's (pairwise sum / n)
// and the final two-decimal rounding is numpy's (rint(100 x) / 100), so ties
// land where pandas put them. Every column is empty when total_gpus <= 0.
//   AllocCurve:     round(mean(alloc), 2)                  (% of GPU capacity)
//   FragCurve:      round(100 * mean(frag) / 1000 / T, 2)   (% of GPU capacity)
//   FragRatioCurve: mean(ratio), not rounded               (% of idle GPU)
Curve AllocCurve(const RunResult& run);
Curve FragCurve(const RunResult& run);
Curve FragRatioCurve(const RunResult& run);

// Write one row per run, in order, with LF line endings. Headers:
//   alloc:           workload,sc_policy,tune,seed,total_gpus,0,1,...,130
//   frag, frag ratio: workload,sc_policy,tune,seed,0,1,...,130
// Numbers are printed as Python's repr() ("95.23", "50.0"); empty columns are
// empty cells. Fail with INVALID_ARGUMENT when a name or tune holds a comma,
// quote or line break (the reader does no quoting), and INTERNAL "PATH:
// REASON" when the file cannot be written (a partial file may remain).
Status WriteAllocCsv(const std::string& path, const std::vector<RunResult>& runs);
Status WriteFragCsv(const std::string& path, const std::vector<RunResult>& runs);
Status WriteFragRatioCsv(const std::string& path, const std::vector<RunResult>& runs);
// shares.csv: workload,sc_policy,tune,seed,gpu_milli,gpus, a row per run and
// share size in EndState::shares_placed (ascending), same errors as above.
Status WriteSharesCsv(const std::string& path, const std::vector<RunResult>& runs);

// One row of a discrete CSV (any of the three files).
struct CurveRow {
  std::string workload;
  std::string policy;  // column sc_policy
  std::string tune;
  uint64_t seed = 0;
  Curve values;
};

// Parses a discrete CSV: header columns workload, sc_policy, tune and seed
// are required; total_gpus and other non-numeric columns are ignored; numeric
// columns must lie in 0..130 and may be missing (their values stay empty).
// Accepts CRLF, a UTF-8 byte-order mark and blank lines. `file_name` only
// labels errors, which are INVALID_ARGUMENT "FILE:LINE: what is wrong".
Result<std::vector<CurveRow>> ParseCurveCsv(std::string_view text, std::string_view file_name);

// Reads and parses a file; NOT_FOUND "PATH: cannot open: REASON" when it
// cannot be read, otherwise as ParseCurveCsv.
Result<std::vector<CurveRow>> ReadCurveCsv(const std::string& path);

// Our mean minus the published mean at one load point.
struct Deviation {
  std::string workload, policy;  // ours
  int seeds_ours = 0, seeds_expected = 0;  // rows with a value at `load`
  double ours_mean = 0, expected_mean = 0, diff = 0;  // NaN where a side has no seeds
  int load = 0;  // arrived workload %
};

// Our policy name -> the artifact's directory name: random -> 01-Random,
// dotprod -> 02-DotProd, clustering -> 03-GpuClustering, packing ->
// 04-GpuPacking, bestfit -> 05-BestFit, fgd -> 06-FGD.
std::map<std::string, std::string> DefaultPolicyAliases();

// For each (workload, policy) in `ours`, in order of first appearance, and
// each load in `loads` (those outside 0..130 are skipped), averages the
// values of each side over its seeds. Expected rows match when their
// sc_policy equals policy_alias[policy] (or the policy itself when it has no
// alias) and their workload equals ours after dropping any directory and
// extension; if none do, workloads ending in "_" + that name match
// ("default" finds "openb_pod_list_default"). diff = ours - expected.
std::vector<Deviation> CompareCurves(const std::vector<CurveRow>& ours,
                                     const std::vector<CurveRow>& expected,
                                     std::vector<int> loads,
                                     const std::map<std::string, std::string>& policy_alias);

// An aligned text table, one line per deviation plus a header: workload,
// policy, load, ours (seeds), expected (seeds), diff and "ok" when
// |diff| <= 1.0 ("FAIL" otherwise, "n/a" when a side is missing).
std::string FormatDeviationTable(const std::vector<Deviation>& deviations);

// Plots mean allocation % over seeds against arrived workload %, one line per
// (workload, policy), plus the ideal y = min(x, 100). Writes PNG_STEM.dat and
// PNG_STEM.gp next to `png_path` and runs gnuplot (pngcairo when it has it,
// else png). Fails with FAILED_PRECONDITION when gnuplot is not on PATH,
// INTERNAL with gnuplot's stderr when it fails or leaves no PNG, INTERNAL
// "PATH: REASON" when the side files cannot be written.
Status PlotAllocCurves(const std::vector<CurveRow>& rows, const std::string& png_path,
                       const std::string& title);

// Runs gnuplot on the script at `gp_path`, which must write `png_path`.
// Errors as PlotAllocCurves.
Status RunGnuplot(const std::string& gp_path, const std::string& png_path);
// `s` as a gnuplot single-quoted string.
std::string GnuplotString(const std::string& s);

// Python's repr() of a finite double ("0.25", "50.0", "1e-05"); exposed for
// tests and other CSV writers.
std::string FormatPythonFloat(double value);

}  // namespace tessera::sim
