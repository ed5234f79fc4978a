#include "node/periodic.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tessera::node {
namespace {

using std::chrono::milliseconds;

TEST(PeriodicLoopTest, RunsThePassEveryIntervalUntilStopped) {
  std::atomic<int> passes{0};
  PeriodicLoop loop(milliseconds(20), [&] { ++passes; });
  loop.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (passes.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  loop.Stop();
  const int after_stop = passes.load();
  EXPECT_GE(after_stop, 3);
  std::this_thread::sleep_for(milliseconds(80));
  EXPECT_EQ(passes.load(), after_stop);
  loop.Stop();  // idempotent
}

TEST(PeriodicLoopTest, FirstPassWaitsOneIntervalAndStopDoesNotWaitForTheNext) {
  std::atomic<int> passes{0};
  PeriodicLoop loop(std::chrono::hours(1), [&] { ++passes; });
  loop.Start();
  std::this_thread::sleep_for(milliseconds(30));
  const auto before = std::chrono::steady_clock::now();
  loop.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(1));
  EXPECT_EQ(passes.load(), 0);
}

}  // namespace
}  // namespace tessera::node
