#include "sim/run_jobs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

namespace tessera::sim {
namespace {

TEST(WorkerCountTest, CapsAtJobsAndDefaultsToCpuCount) {
  EXPECT_EQ(WorkerCount(4, 10), 4);
  EXPECT_EQ(WorkerCount(8, 3), 3);
  EXPECT_EQ(WorkerCount(8, 0), 0);
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(WorkerCount(0, 1000), cpus);
  EXPECT_EQ(WorkerCount(-1, 1000), cpus);
  EXPECT_EQ(WorkerCount(0, 1), 1);
}

TEST(RunJobsTest, ReturnsResultsInJobOrder) {
  // Early jobs sleep longest, so they finish last.
  auto runs = RunJobs(8, 4, [](size_t j) -> Result<std::string> {
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * (8 - j)));
    return "job" + std::to_string(j);
  });
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 8u);
  for (size_t j = 0; j < 8; ++j) EXPECT_EQ((*runs)[j], "job" + std::to_string(j));
}

TEST(RunJobsTest, NoJobsNoThreads) {
  int calls = 0;
  auto runs = RunJobs(0, 4, [&calls](size_t) -> Result<int> { return ++calls; });
  ASSERT_TRUE(runs.ok());
  EXPECT_TRUE(runs->empty());
  EXPECT_EQ(calls, 0);
}

TEST(RunJobsTest, UsesAtMostTheWorkersAskedFor) {
  std::atomic<int> running{0}, peak{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  auto runs = RunJobs(12, 3, [&](size_t j) -> Result<size_t> {
    const int now = ++running;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running;
    return j;
  });
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), 12u);
  EXPECT_LE(peak.load(), 3);
  EXPECT_LE(threads.size(), 3u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);  // workers, not the caller
}

TEST(RunJobsTest, NoMoreWorkersThanJobs) {
  std::mutex mu;
  std::set<std::thread::id> threads;
  auto runs = RunJobs(2, 16, [&](size_t j) -> Result<size_t> {
    std::lock_guard<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    return j;
  });
  ASSERT_TRUE(runs.ok());
  EXPECT_LE(threads.size(), 2u);
}

TEST(RunJobsTest, LowestFailedJobWinsAndEveryJobRuns) {
  std::atomic<int> calls{0};
  auto runs = RunJobs(10, 4, [&calls](size_t j) -> Result<int> {
    ++calls;
    // Job 7 fails first in time; job 3 has the lower number.
    if (j == 7) return InvalidArgument("job 7 failed");
    if (j == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return Internal("job 3 failed");
    }
    return static_cast<int>(j);
  });
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), StatusCode::kInternal);
  EXPECT_EQ(runs.status().message(), "job 3 failed");
  EXPECT_EQ(calls.load(), 10);
}

TEST(CreateOutputDirTest, CreatesParentsAndReportsFailure) {
  const auto base = std::filesystem::temp_directory_path() /
                    ("run_jobs_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                     std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  const std::string dir = (base / "a" / "b").string();
  EXPECT_TRUE(CreateOutputDir(dir).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_TRUE(CreateOutputDir(dir).ok());  // already there

  const std::string file = (base / "file").string();
  std::ofstream(file) << "x";
  const Status s = CreateOutputDir(file + "/sub");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message().rfind(file + "/sub: cannot create: ", 0), 0u) << s.message();
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace tessera::sim
