// Tests for the FGD-artifact reports: discretisation, CSV round trip, the
// published tables, comparison and plotting.
#include "sim/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera::sim {
namespace {

namespace fs = std::filesystem;

constexpr char kExpectedDir[] = "../shared/data/alibaba-gpu-v2023/fgd-expected-results/";

std::string LoadHeader(bool with_total_gpus) {
  std::string h = "workload,sc_policy,tune,seed";
  if (with_total_gpus) h += ",total_gpus";
  for (int k = 0; k <= 130; ++k) h += "," + std::to_string(k);
  return h;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A fresh directory under gtest's temp dir.
std::string TempDirFor(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tessera_report_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

RunResult MakeRun(int64_t total_gpus, std::vector<Sample> samples) {
  return RunResult{"openb_pod_list_default", "fgd", "1.3", 42, total_gpus, std::move(samples), {}};
}

TEST(ReportCurveTest, ArrivedPercentRoundsHalfToEvenAndFallsBackToWindow) {
  // T = 100 GPUs: arrived 500 milli = 0.5 % -> 0; 1.5 % -> 2; 2.5 % -> 2.
  const RunResult run = MakeRun(100, {{500, 100, 0, 0}, {1500, 200, 0, 0}, {2500, 400, 0, 0}});
  const Curve c = AllocCurve(run);
  ASSERT_TRUE(c[0].has_value());
  EXPECT_DOUBLE_EQ(*c[0], 0.1);
  ASSERT_TRUE(c[1].has_value());  // no exact sample: window 0..2 takes all three
  EXPECT_DOUBLE_EQ(*c[1], 0.23);
  ASSERT_TRUE(c[2].has_value());
  EXPECT_DOUBLE_EQ(*c[2], 0.3);
  ASSERT_TRUE(c[3].has_value());  // window 2..4
  EXPECT_DOUBLE_EQ(*c[3], 0.3);
  EXPECT_FALSE(c[4].has_value());
  EXPECT_FALSE(c[130].has_value());
}

TEST(ReportCurveTest, SampleRoundingIsPythonsColumnRoundingIsNumpys) {
  // 26750 / 1000 / 10 = 2.675 (really 2.67499..): Python's round gives 2.67.
  EXPECT_DOUBLE_EQ(*AllocCurve(MakeRun(1000, {{0, 26750, 0, 0}}))[0], 2.67);
  // mean(2.67, 2.68) = 2.675: numpy's rint(267.5) / 100 gives 2.68.
  EXPECT_DOUBLE_EQ(*AllocCurve(MakeRun(100, {{0, 2670, 0, 0}, {0, 2680, 0, 0}}))[0], 2.68);
}

TEST(ReportCurveTest, FragAndFragRatio) {
  // T = 10 GPUs. Logged frag 1234.57 and 2000.00; ratios 33.33 and 0 (idle 0).
  const RunResult run = MakeRun(10, {{0, 0, 1234.567, 3703.701}, {0, 0, 2000.0, 0.0}});
  const Curve frag = FragCurve(run);
  ASSERT_TRUE(frag[0].has_value());
  EXPECT_DOUBLE_EQ(*frag[0], 16.17);  // 100 * 1617.285 / 1000 / 10 = 16.17285
  const Curve ratio = FragRatioCurve(run);
  ASSERT_TRUE(ratio[0].has_value());
  EXPECT_DOUBLE_EQ(*ratio[0], (33.33 + 0.0) / 2);  // not rounded
  EXPECT_FALSE(frag[5].has_value());
  EXPECT_FALSE(ratio[5].has_value());
}

TEST(ReportCurveTest, NoGpusGivesEmptyCurves) {
  const RunResult run = MakeRun(0, {{0, 0, 0, 0}});
  for (const auto& v : AllocCurve(run)) EXPECT_FALSE(v.has_value());
}

TEST(ReportFormatTest, PythonRepr) {
  EXPECT_EQ(FormatPythonFloat(95.23), "95.23");
  EXPECT_EQ(FormatPythonFloat(50.0), "50.0");
  EXPECT_EQ(FormatPythonFloat(100.0), "100.0");
  EXPECT_EQ(FormatPythonFloat(0.25), "0.25");
  EXPECT_EQ(FormatPythonFloat(0.0), "0.0");
  EXPECT_EQ(FormatPythonFloat(-2.5), "-2.5");
  EXPECT_EQ(FormatPythonFloat(1234567.0), "1234567.0");
  EXPECT_EQ(FormatPythonFloat(5.60642857142857), "5.60642857142857");
  EXPECT_EQ(FormatPythonFloat(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatPythonFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatPythonFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatPythonFloat(1e16), "1e+16");
  EXPECT_EQ(FormatPythonFloat(1.5e300), "1.5e+300");
  EXPECT_EQ(FormatPythonFloat(9999999999999998.0), "9999999999999998.0");
}

TEST(ReportCsvTest, WriteReadRoundTrip) {
  const std::string dir = TempDirFor("roundtrip");
  RunResult a = MakeRun(100, {{500, 100, 10.5, 100}, {1500, 200, 20.25, 80}, {2500, 400, 30, 60}});
  RunResult b = a;
  b.seed = 43;
  b.policy = "random";
  b.samples.push_back({130000, 9000, 1.0, 3.0});  // 130 %
  const std::vector<RunResult> runs = {a, b};

  const std::string alloc = dir + "/alloc.csv", frag = dir + "/frag.csv",
                    ratio = dir + "/ratio.csv";
  ASSERT_TRUE(WriteAllocCsv(alloc, runs).ok());
  ASSERT_TRUE(WriteFragCsv(frag, runs).ok());
  ASSERT_TRUE(WriteFragRatioCsv(ratio, runs).ok());
  EXPECT_EQ(FirstLine(alloc), LoadHeader(true));
  EXPECT_EQ(FirstLine(frag), LoadHeader(false));
  EXPECT_EQ(FirstLine(ratio), LoadHeader(false));

  std::ifstream in(alloc);
  std::string line;
  std::getline(in, line);
  std::getline(in, line);
  EXPECT_TRUE(line.starts_with("openb_pod_list_default,fgd,1.3,42,100,0.1,0.23,0.3,0.3,,,")) << line;

  struct Case {
    std::string path;
    Curve (*curve)(const RunResult&);
  };
  for (const Case& c : {Case{alloc, &AllocCurve}, Case{frag, &FragCurve}, Case{ratio, &FragRatioCurve}}) {
    SCOPED_TRACE(c.path);
    Result<std::vector<CurveRow>> rows = ReadCurveCsv(c.path);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 2u);
    for (size_t i = 0; i < runs.size(); ++i) {
      const CurveRow& r = (*rows)[i];
      EXPECT_EQ(r.workload, runs[i].workload);
      EXPECT_EQ(r.policy, runs[i].policy);
      EXPECT_EQ(r.tune, "1.3");
      EXPECT_EQ(r.seed, runs[i].seed);
      EXPECT_EQ(r.values, c.curve(runs[i]));  // repr round-trips exactly
    }
    EXPECT_FALSE((*rows)[0].values[130].has_value());
    EXPECT_TRUE((*rows)[1].values[130].has_value());
  }
}

TEST(ReportCsvTest, SharesCsvHasARowPerRunAndShareSize) {
  RunResult a = MakeRun(10, {});
  a.end.shares_placed = {{470, 3}, {810, 2}};
  RunResult b = a;
  b.seed = 43;
  b.end.shares_placed = {};  // placed no shares: no rows
  const std::string path = TempDirFor("shares") + "/shares.csv";
  ASSERT_TRUE(WriteSharesCsv(path, {a, b}).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "workload,sc_policy,tune,seed,gpu_milli,gpus\n"
            "openb_pod_list_default,fgd,1.3,42,470,3\n"
            "openb_pod_list_default,fgd,1.3,42,810,2\n");
  a.policy = "x\ny";
  EXPECT_EQ(WriteSharesCsv(path, {a}).code(), StatusCode::kInvalidArgument);
}

TEST(ReportCsvTest, RejectsCellsTheReaderCannotSplit) {
  RunResult run = MakeRun(1, {});
  run.workload = "a,b";
  const Status s = WriteAllocCsv(TempDirFor("comma") + "/x.csv", {run});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ReportCsvTest, ParseErrorsNameFileAndLine) {
  const std::string header = LoadHeader(false);
  std::string row = "w,p,1.3,42";
  for (int k = 0; k <= 130; ++k) row += k == 7 ? ",abc" : ",1.0";

  Result<std::vector<CurveRow>> r = ParseCurveCsv(header + "\n\n" + row + "\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("t.csv:3: column 7: 'abc'"), std::string::npos)
      << r.status().message();

  r = ParseCurveCsv("workload,tune,seed,0\nw,1.3,1,2\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.csv:1: missing column 'sc_policy'"), std::string::npos);

  r = ParseCurveCsv("workload,sc_policy,tune,seed,0\nw,p,1.3,1\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.csv:2: has 4 fields, header has 5"), std::string::npos);

  r = ParseCurveCsv("workload,sc_policy,tune,seed,131\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside 0..130"), std::string::npos);

  r = ParseCurveCsv("workload,sc_policy,tune,seed,0\nw,p,1.3,-1,2\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.csv:2: seed"), std::string::npos);

  r = ParseCurveCsv("", "t.csv");
  EXPECT_FALSE(r.ok());

  EXPECT_EQ(ReadCurveCsv("/nonexistent/x.csv").status().code(), StatusCode::kNotFound);
}

TEST(ReportCsvTest, ParsesCrlfBomAndMissingColumns) {
  const Result<std::vector<CurveRow>> r = ParseCurveCsv(
      "\xEF\xBB\xBFworkload,sc_policy,tune,seed,total_gpus,0,130\r\nw,p,1.3,7,6212,,99.5\r\n\r\n",
      "t.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].seed, 7u);
  EXPECT_FALSE((*r)[0].values[0].has_value());
  EXPECT_FALSE((*r)[0].values[1].has_value());
  EXPECT_EQ((*r)[0].values[130], 99.5);
}

CurveRow Row(std::string workload, std::string policy, uint64_t seed, int load, double v) {
  CurveRow r;
  r.workload = std::move(workload);
  r.policy = std::move(policy);
  r.tune = "1.3";
  r.seed = seed;
  r.values[load] = v;
  return r;
}

TEST(ReportCompareTest, AveragesSeedsAndMatchesAliases) {
  const std::vector<CurveRow> ours = {
      Row("openb_pod_list_default", "fgd", 42, 50, 40.0),
      Row("openb_pod_list_default", "fgd", 43, 50, 42.0),
      Row("gpushare40", "packing", 42, 50, 10.0),
  };
  const std::vector<CurveRow> expected = {
      Row("openb_pod_list_default", "06-FGD", 42, 50, 40.0),
      Row("openb_pod_list_default", "06-FGD", 43, 50, 41.0),
      Row("openb_pod_list_default", "06-FGD", 44, 50, 42.5),
      Row("openb_pod_list_default", "01-Random", 42, 50, 0.0),
      Row("openb_pod_list_gpushare40", "04-GpuPacking", 42, 50, 12.0),
  };
  const std::vector<Deviation> d =
      CompareCurves(ours, expected, {50, 60, 131}, DefaultPolicyAliases());
  ASSERT_EQ(d.size(), 4u);  // 2 groups x loads 50 and 60; 131 skipped
  EXPECT_EQ(d[0].workload, "openb_pod_list_default");
  EXPECT_EQ(d[0].policy, "fgd");
  EXPECT_EQ(d[0].load, 50);
  EXPECT_EQ(d[0].seeds_ours, 2);
  EXPECT_EQ(d[0].seeds_expected, 3);
  EXPECT_DOUBLE_EQ(d[0].ours_mean, 41.0);
  EXPECT_DOUBLE_EQ(d[0].expected_mean, 41.166666666666664);
  EXPECT_NEAR(d[0].diff, -0.1666666, 1e-6);
  EXPECT_EQ(d[1].load, 60);
  EXPECT_EQ(d[1].seeds_ours, 0);
  EXPECT_TRUE(std::isnan(d[1].diff));
  EXPECT_EQ(d[2].policy, "packing");  // "gpushare40" found "openb_pod_list_gpushare40"
  EXPECT_EQ(d[2].seeds_expected, 1);
  EXPECT_DOUBLE_EQ(d[2].diff, -2.0);

  const std::string table = FormatDeviationTable(d);
  std::istringstream lines(table);
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  ASSERT_EQ(all.size(), 5u);
  const size_t ok_col = all[0].rfind("ok");
  EXPECT_EQ(all[1].substr(ok_col), "ok");
  EXPECT_EQ(all[2].substr(ok_col), "n/a");
  EXPECT_EQ(all[3].substr(ok_col), "FAIL");
  EXPECT_NE(all[1].find("41.00 (2)"), std::string::npos) << table;
  EXPECT_NE(all[1].find("41.17 (3)"), std::string::npos) << table;
  EXPECT_NE(all[3].find("-2.00"), std::string::npos) << table;
}

TEST(ReportCompareTest, DefaultAliases) {
  const auto a = DefaultPolicyAliases();
  EXPECT_EQ(a.size(), 6u);
  EXPECT_EQ(a.at("random"), "01-Random");
  EXPECT_EQ(a.at("dotprod"), "02-DotProd");
  EXPECT_EQ(a.at("clustering"), "03-GpuClustering");
  EXPECT_EQ(a.at("packing"), "04-GpuPacking");
  EXPECT_EQ(a.at("bestfit"), "05-BestFit");
  EXPECT_EQ(a.at("fgd"), "06-FGD");
}

TEST(ReportExpectedTest, ReadsPublishedAllocationTable) {
  const std::string path = std::string(kExpectedDir) + "analysis_allo_discrete.csv";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  EXPECT_EQ(FirstLine(path), LoadHeader(true));
  const Result<std::vector<CurveRow>> rows = ReadCurveCsv(path);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->size(), 780u);

  std::vector<CurveRow> ours;  // pretend the published FGD rows are ours
  for (const CurveRow& r : *rows) {
    if (r.workload == "openb_pod_list_default" && r.policy == "06-FGD") {
      ours.push_back(r);
      ours.back().policy = "fgd";
    }
  }
  ASSERT_EQ(ours.size(), 10u);
  const std::vector<Deviation> d = CompareCurves(ours, *rows, {130}, DefaultPolicyAliases());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].seeds_expected, 10);
  EXPECT_NEAR(d[0].expected_mean, 100 - 4.61, 0.05);
  EXPECT_DOUBLE_EQ(d[0].diff, 0.0);
}

TEST(ReportExpectedTest, FragHeadersMatchOurs) {
  for (const char* name : {"analysis_frag_discrete.csv", "analysis_frag_ratio_discrete.csv"}) {
    const std::string path = std::string(kExpectedDir) + name;
    if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
    EXPECT_EQ(FirstLine(path), LoadHeader(false));
    const Result<std::vector<CurveRow>> rows = ReadCurveCsv(path);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_EQ(rows->size(), 780u);
  }
}

// Our number format reproduces every cell of the published tables verbatim.
TEST(ReportExpectedTest, PythonReprMatchesPublishedCells) {
  for (const char* name : {"analysis_allo_discrete.csv", "analysis_frag_discrete.csv",
                           "analysis_frag_ratio_discrete.csv"}) {
    const std::string path = std::string(kExpectedDir) + name;
    if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // header
    int checked = 0;
    while (std::getline(in, line)) {
      std::istringstream cells(line);
      std::string cell;
      for (int i = 0; std::getline(cells, cell, ','); ++i) {
        if (i < 5 || cell.empty()) continue;  // index columns (and total_gpus)
        ASSERT_EQ(FormatPythonFloat(std::strtod(cell.c_str(), nullptr)), cell) << name;
        ++checked;
      }
    }
    EXPECT_GT(checked, 780 * 125) << name;
  }
}

TEST(ReportPlotTest, WritesPng) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  const std::string dir = TempDirFor("plot");
  std::vector<CurveRow> rows;
  for (uint64_t seed : {42u, 43u}) {
    CurveRow r = Row("openb_pod_list_default", "fgd", seed, 0, 0.25);
    for (int k = 1; k <= 130; ++k) r.values[k] = std::min<double>(k, 90.0 + seed % 2);
    rows.push_back(r);
  }
  rows.push_back(Row("it's_a \"workload\"", "random", 42, 10, 10.0));
  const std::string png = dir + "/alloc.png";
  const Status s = PlotAllocCurves(rows, png, "Allocation vs arrived 'load' _x_");
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 0u);
  EXPECT_TRUE(fs::exists(dir + "/alloc.gp"));
  EXPECT_TRUE(fs::exists(dir + "/alloc.dat"));
}

}  // namespace
}  // namespace tessera::sim
