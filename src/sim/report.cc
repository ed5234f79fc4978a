// Discrete FGD-artifact curves: computation, CSV I/O, comparison, plotting.
// The rounding and averaging steps mirror pandas/numpy on purpose; each helper
// says which Python operation it stands for.
#include "sim/report.h"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>

namespace tessera::sim {
namespace {

constexpr int kColumns = kMaxLoadPercent + 1;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Python's round(x, 2) on a float, and equally Go's "%.2f" read back by
// pandas: the correctly rounded two-decimal value (ties to even on the exact
// binary value), as glibc's printf produces it.
double CorrectlyRound2(double x) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.2f", x);
  return std::strtod(buf, nullptr);
}

// numpy's round(x, 2): rint(x * 100) / 100, which rounds the scaled binary
// value, so 2.675 becomes 2.68 where Python's round gives 2.67.
double NumpyRound2(double x) { return std::nearbyint(x * 100.0) / 100.0; }

// numpy's float64 add.reduce: pairwise summation, unrolled by 8 in blocks of
// at most 128 values.
double PairwiseSum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (size_t j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2) + PairwiseSum(a + n2, n - n2);
}

// pandas Series.mean() of a float64 column without NaNs.
double NumpyMean(const std::vector<double>& v) {
  return (0.0 + PairwiseSum(v.data(), v.size())) / static_cast<double>(v.size());
}

// Per-sample value, then the per-column aggregate of the selected values.
using SampleValue = std::function<double(const Sample&, double total_gpus)>;
using ColumnValue = std::function<double(const std::vector<double>&, double total_gpus)>;

Curve Discretise(const RunResult& run, const SampleValue& value, const ColumnValue& column) {
  Curve curve;
  if (run.total_gpus <= 0) return curve;
  const double t = static_cast<double>(run.total_gpus);
  std::vector<double> arrive, values;
  arrive.reserve(run.samples.size());
  values.reserve(run.samples.size());
  for (const Sample& s : run.samples) {
    // Python round(x, 0) on a float: ties to even, exactly as nearbyint.
    arrive.push_back(std::nearbyint(static_cast<double>(s.arrived_milli) / t / 10.0));
    values.push_back(value(s, t));
  }
  std::vector<double> picked;
  for (int k = 0; k < kColumns; ++k) {
    picked.clear();
    for (size_t i = 0; i < arrive.size(); ++i) {
      if (arrive[i] == k) picked.push_back(values[i]);
    }
    if (picked.empty()) {
      for (size_t i = 0; i < arrive.size(); ++i) {
        if (arrive[i] >= k - 1 && arrive[i] <= k + 1) picked.push_back(values[i]);
      }
    }
    if (!picked.empty()) curve[k] = column(picked, t);
  }
  return curve;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Internal(path + ": cannot open for writing: " + std::strerror(errno));
  errno = 0;
  const size_t written = std::fwrite(text.data(), 1, text.size(), f);
  const int write_errno = errno;
  if (std::fclose(f) != 0 || written != text.size()) {
    return Internal(path + ": write failed: " + std::strerror(write_errno ? write_errno : errno));
  }
  return Status::Ok();
}

Status CheckCell(const std::string& what, const std::string& value) {
  if (value.find_first_of(",\"\r\n") != std::string::npos) {
    return InvalidArgument(what + " '" + value + "' holds a comma, quote or line break");
  }
  return Status::Ok();
}

Status WriteCurves(const std::string& path, const std::vector<RunResult>& runs,
                   bool with_total_gpus, Curve (*curve_of)(const RunResult&)) {
  std::string out = "workload,sc_policy,tune,seed";
  if (with_total_gpus) out += ",total_gpus";
  for (int k = 0; k < kColumns; ++k) out += "," + std::to_string(k);
  out += '\n';
  for (const RunResult& run : runs) {
    TESSERA_RETURN_IF_ERROR(CheckCell("workload", run.workload));
    TESSERA_RETURN_IF_ERROR(CheckCell("policy", run.policy));
    TESSERA_RETURN_IF_ERROR(CheckCell("tune", run.tune));
    out += run.workload + ',' + run.policy + ',' + run.tune + ',' + std::to_string(run.seed);
    if (with_total_gpus) out += ',' + std::to_string(run.total_gpus);
    for (const std::optional<double>& v : curve_of(run)) {
      out += ',';
      if (v) out += FormatPythonFloat(*v);
    }
    out += '\n';
  }
  return WriteTextFile(path, out);
}

Status LineError(std::string_view file, size_t line, const std::string& what) {
  return InvalidArgument(std::string(file) + ":" + std::to_string(line) + ": " + what);
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// "dir/openb_pod_list_default.csv" -> "openb_pod_list_default".
std::string WorkloadKey(const std::string& workload) {
  return std::filesystem::path(workload).stem().string();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Mean of rows' values at `load`, and how many rows had one.
std::pair<double, int> MeanAt(const std::vector<const CurveRow*>& rows, int load) {
  double sum = 0;
  int n = 0;
  for (const CurveRow* r : rows) {
    if (r->values[load]) {
      sum += *r->values[load];
      ++n;
    }
  }
  return {n > 0 ? sum / n : kNaN, n};
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A gnuplot single-quoted string: only the quote itself needs doubling.
std::string GnuplotQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\n' || c == '\r') c = ' ';
    out += (c == '\'') ? std::string("''") : std::string(1, c);
  }
  return out + "'";
}

}  // namespace

std::string FormatPythonFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // "-d.ddde+XX"
  const size_t e_pos = sci.find('e');
  std::string_view mant = sci.substr(0, e_pos);
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(),
                  exp10);
  std::string out;
  if (!mant.empty() && mant[0] == '-') {
    out = "-";
    mant.remove_prefix(1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  if (exp10 < -4 || exp10 >= 16) {  // repr switches to exponent form here
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + e;
  }
  if (exp10 < 0) return out + "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  const size_t int_len = static_cast<size_t>(exp10) + 1;
  if (digits.size() <= int_len) return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

Curve AllocCurve(const RunResult& run) {
  return Discretise(
      run,
      [](const Sample& s, double t) {
        return CorrectlyRound2(static_cast<double>(s.used_milli) / t / 10.0);
      },
      [](const std::vector<double>& v, double) { return NumpyRound2(NumpyMean(v)); });
}

Curve FragCurve(const RunResult& run) {
  return Discretise(
      run, [](const Sample& s, double) { return CorrectlyRound2(s.frag_milli); },
      [](const std::vector<double>& v, double t) {
        return NumpyRound2(100.0 * NumpyMean(v) / 1000.0 / t);
      });
}

Curve FragRatioCurve(const RunResult& run) {
  return Discretise(
      run,
      [](const Sample& s, double) {
        return CorrectlyRound2(s.idle_milli == 0 ? 0.0 : 100.0 * s.frag_milli / s.idle_milli);
      },
      [](const std::vector<double>& v, double) { return NumpyMean(v); });
}

Status WriteAllocCsv(const std::string& path, const std::vector<RunResult>& runs) {
  return WriteCurves(path, runs, /*with_total_gpus=*/true, &AllocCurve);
}

Status WriteFragCsv(const std::string& path, const std::vector<RunResult>& runs) {
  return WriteCurves(path, runs, /*with_total_gpus=*/false, &FragCurve);
}

Status WriteFragRatioCsv(const std::string& path, const std::vector<RunResult>& runs) {
  return WriteCurves(path, runs, /*with_total_gpus=*/false, &FragRatioCurve);
}

Status WriteSharesCsv(const std::string& path, const std::vector<RunResult>& runs) {
  std::string out = "workload,sc_policy,tune,seed,gpu_milli,gpus\n";
  for (const RunResult& run : runs) {
    TESSERA_RETURN_IF_ERROR(CheckCell("workload", run.workload));
    TESSERA_RETURN_IF_ERROR(CheckCell("policy", run.policy));
    TESSERA_RETURN_IF_ERROR(CheckCell("tune", run.tune));
    for (const auto& [milli, gpus] : run.end.shares_placed) {
      out += run.workload + ',' + run.policy + ',' + run.tune + ',' + std::to_string(run.seed) + ',' +
             std::to_string(milli) + ',' + std::to_string(gpus) + '\n';
    }
  }
  return WriteTextFile(path, out);
}

Result<std::vector<CurveRow>> ParseCurveCsv(std::string_view text, std::string_view file_name) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  enum : int { kWorkload = -1, kPolicy = -2, kTune = -3, kSeed = -4, kIgnored = -5 };
  std::vector<int> column_of;  // per header field: a load 0..130 or one of the above
  std::vector<CurveRow> rows;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::vector<std::string_view> fields = SplitFields(line);
    if (column_of.empty()) {  // header
      std::map<int, int> seen;  // column id -> 1
      for (std::string_view name : fields) {
        int id = kIgnored;
        if (name == "workload") id = kWorkload;
        else if (name == "sc_policy") id = kPolicy;
        else if (name == "tune") id = kTune;
        else if (name == "seed") id = kSeed;
        else if (!name.empty() && name.find_first_not_of("0123456789") == std::string_view::npos) {
          auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
          if (ec != std::errc() || id > kMaxLoadPercent) {
            return LineError(file_name, line_no, "column '" + std::string(name) + "' is outside 0..130");
          }
        }
        if (id != kIgnored && seen[id]++ > 0) {
          return LineError(file_name, line_no, "repeated column '" + std::string(name) + "'");
        }
        column_of.push_back(id);
      }
      const std::pair<int, const char*> required[] = {
          {kWorkload, "workload"}, {kPolicy, "sc_policy"}, {kTune, "tune"}, {kSeed, "seed"}};
      for (const auto& [id, name] : required) {
        if (!seen.contains(id)) {
          return LineError(file_name, line_no, std::string("missing column '") + name + "'");
        }
      }
      continue;
    }
    if (fields.size() != column_of.size()) {
      return LineError(file_name, line_no, "has " + std::to_string(fields.size()) +
                                               " fields, header has " +
                                               std::to_string(column_of.size()));
    }
    CurveRow row;
    for (size_t i = 0; i < fields.size(); ++i) {
      const std::string_view f = fields[i];
      const int id = column_of[i];
      if (id == kWorkload) row.workload = f;
      else if (id == kPolicy) row.policy = f;
      else if (id == kTune) row.tune = f;
      else if (id == kSeed) {
        auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), row.seed);
        if (ec != std::errc() || p != f.data() + f.size()) {
          return LineError(file_name, line_no, "seed '" + std::string(f) + "' is not an unsigned integer");
        }
      } else if (id >= 0 && !f.empty()) {
        double v = 0;
        auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
        if (ec != std::errc() || p != f.data() + f.size() || !std::isfinite(v)) {
          return LineError(file_name, line_no, "column " + std::to_string(id) + ": '" +
                                                   std::string(f) + "' is not a finite number");
        }
        row.values[id] = v;
      }
    }
    rows.push_back(std::move(row));
  }
  if (column_of.empty()) return LineError(file_name, line_no, "no header line");
  return rows;
}

Result<std::vector<CurveRow>> ReadCurveCsv(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return NotFound(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return NotFound(path + ": cannot open: read error");
  return ParseCurveCsv(text, path);
}

std::map<std::string, std::string> DefaultPolicyAliases() {
  return {{"random", "01-Random"},         {"dotprod", "02-DotProd"},
          {"clustering", "03-GpuClustering"}, {"packing", "04-GpuPacking"},
          {"bestfit", "05-BestFit"},       {"fgd", "06-FGD"}};
}

std::vector<Deviation> CompareCurves(const std::vector<CurveRow>& ours,
                                     const std::vector<CurveRow>& expected,
                                     std::vector<int> loads,
                                     const std::map<std::string, std::string>& policy_alias) {
  std::vector<std::pair<std::string, std::string>> groups;  // first-appearance order
  for (const CurveRow& r : ours) {
    std::pair<std::string, std::string> key{r.workload, r.policy};
    if (std::find(groups.begin(), groups.end(), key) == groups.end()) groups.push_back(key);
  }
  std::vector<Deviation> out;
  for (const auto& [workload, policy] : groups) {
    const auto alias = policy_alias.find(policy);
    const std::string their_policy = alias == policy_alias.end() ? policy : alias->second;
    const std::string key = WorkloadKey(workload);
    std::vector<const CurveRow*> mine, theirs, theirs_by_suffix;
    for (const CurveRow& r : ours) {
      if (r.workload == workload && r.policy == policy) mine.push_back(&r);
    }
    for (const CurveRow& r : expected) {
      if (r.policy != their_policy) continue;
      const std::string their_key = WorkloadKey(r.workload);
      if (their_key == key) theirs.push_back(&r);
      else if (EndsWith(their_key, "_" + key)) theirs_by_suffix.push_back(&r);
    }
    if (theirs.empty()) theirs = std::move(theirs_by_suffix);
    for (int load : loads) {
      if (load < 0 || load > kMaxLoadPercent) continue;
      Deviation d;
      d.workload = workload;
      d.policy = policy;
      d.load = load;
      std::tie(d.ours_mean, d.seeds_ours) = MeanAt(mine, load);
      std::tie(d.expected_mean, d.seeds_expected) = MeanAt(theirs, load);
      d.diff = d.ours_mean - d.expected_mean;
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::string FormatDeviationTable(const std::vector<Deviation>& deviations) {
  auto number = [](double v, int seeds) {
    if (std::isnan(v)) return std::string("-");
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f (%d)", v, seeds);
    return std::string(buf);
  };
  std::vector<std::array<std::string, 7>> cells;
  cells.push_back({"workload", "policy", "load", "ours (seeds)", "expected (seeds)", "diff", "ok"});
  for (const Deviation& d : deviations) {
    char diff[32] = "-";
    if (!std::isnan(d.diff)) std::snprintf(diff, sizeof(diff), "%+.2f", d.diff);
    const char* ok = std::isnan(d.diff) ? "n/a" : (std::fabs(d.diff) <= 1.0 ? "ok" : "FAIL");
    cells.push_back({d.workload, d.policy, std::to_string(d.load), number(d.ours_mean, d.seeds_ours),
                     number(d.expected_mean, d.seeds_expected), diff, ok});
  }
  std::array<size_t, 7> width{};
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool right = i >= 2 && i <= 5;  // numbers right-aligned
      const std::string pad(width[i] - row[i].size(), ' ');
      line += right ? pad + row[i] : row[i] + pad;
      if (i + 1 < row.size()) line += "  ";
    }
    while (line.ends_with(' ')) line.pop_back();
    out += line + '\n';
  }
  return out;
}

Status PlotAllocCurves(const std::vector<CurveRow>& rows, const std::string& png_path,
                       const std::string& title) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return FailedPrecondition("gnuplot not found on PATH (install gnuplot-nox)");
  }
  std::filesystem::path png(png_path);
  const std::string dat_path = std::filesystem::path(png).replace_extension(".dat").string();
  const std::string gp_path = std::filesystem::path(png).replace_extension(".gp").string();

  std::vector<std::pair<std::string, std::string>> groups;
  for (const CurveRow& r : rows) {
    std::pair<std::string, std::string> key{r.workload, r.policy};
    if (std::find(groups.begin(), groups.end(), key) == groups.end()) groups.push_back(key);
  }
  std::string data, plots = "ideal(x) with lines dashtype 2 lc rgb 'black' title 'ideal'";
  int block = 0;
  for (const auto& [workload, policy] : groups) {
    std::vector<const CurveRow*> members;
    for (const CurveRow& r : rows) {
      if (r.workload == workload && r.policy == policy) members.push_back(&r);
    }
    std::string points;
    for (int k = 0; k < kColumns; ++k) {
      const auto [mean, n] = MeanAt(members, k);
      if (n > 0) points += std::to_string(k) + " " + FormatPythonFloat(mean) + "\n";
    }
    if (points.empty()) continue;
    data += "# " + workload + " " + policy + "\n" + points + "\n\n";
    plots += ", \\\n     " + GnuplotQuote(dat_path) + " index " + std::to_string(block++) +
             " using 1:2 with lines lw 2 title " + GnuplotQuote(workload + " / " + policy);
  }
  const std::string script =
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo noenhanced size 1200,800\n"
      "} else {\n"
      "  set terminal png noenhanced size 1200,800\n"
      "}\n"
      "set output " + GnuplotQuote(png_path) + "\n"
      "set title " + GnuplotQuote(title) + "\n"
      "set xlabel 'Arrived workload (% of GPU capacity)'\n"
      "set ylabel 'GPU allocation (% of GPU capacity, mean over seeds)'\n"
      "set xrange [0:130]\nset yrange [0:105]\nset samples 131\n"
      "set key left top\nset grid\n"
      "ideal(x) = x < 100 ? x : 100\n"
      "plot " + plots + "\n";
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dat_path, data));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(gp_path, script));

  return RunGnuplot(gp_path, png_path);
}

std::string GnuplotString(const std::string& s) { return GnuplotQuote(s); }

Status RunGnuplot(const std::string& gp_path, const std::string& png_path) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return FailedPrecondition("gnuplot not found on PATH (install gnuplot-nox)");
  }
  const std::filesystem::path png(png_path);
  std::error_code ec;
  std::filesystem::remove(png, ec);  // so a stale PNG cannot pass for a new one
  const std::string command = "gnuplot " + ShellQuote(gp_path) + " 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return Internal("cannot run gnuplot: " + std::string(std::strerror(errno)));
  std::string output;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int rc = pclose(pipe);
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    return Internal("gnuplot " + gp_path + " failed (status " + std::to_string(rc) + "): " + output);
  }
  const auto size = std::filesystem::file_size(png, ec);
  if (ec || size == 0) return Internal("gnuplot " + gp_path + " wrote no image to " + png_path + ": " + output);
  return Status::Ok();
}

}  // namespace tessera::sim
