// fork() while another thread of the process is inside the library: the
// child, which has only the forking thread, must find every lock of the
// library free (the atfork handlers take them all before the fork). Runs with
// libtessera-cuda.so preloaded over the fake driver and a 64 MiB limit on
// GPU 0 (see CMakeLists.txt).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fake_cuda/test_util.h"

namespace {

using fake_test::kMiB;
using fake_test::Used0;

class ForkTest : public fake_test::DeviceTest {};

// Waits up to `seconds` for `pid`; kills it and returns -1 when it hangs.
int WaitOrKill(pid_t pid, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int st = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

TEST_F(ForkTest, ChildOfAProcessBusyAllocatingDoesNotHang) {
  // Allocates and frees on GPU 0 without pause: the accountant's table lock
  // and the library's other locks are taken all the time.
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    fake_test::UseDevice(0);
    while (!stop.load(std::memory_order_relaxed)) {
      CUdeviceptr p = 0;
      if (cuMemAlloc_v2(&p, 4096) == CUDA_SUCCESS) cuMemFree_v2(p);
    }
  });
  int hung = 0, failed = 0;
  for (int i = 0; i < 200 && hung == 0; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // A new process: the library registers its slot and drops the
      // parent's allocations, then accounts as usual.
      CUdeviceptr p = 0;
      const bool ok = cuMemAlloc_v2(&p, kMiB) == CUDA_SUCCESS && cuMemFree_v2(p) == CUDA_SUCCESS;
      _exit(ok ? 0 : 1);
    }
    const int rc = WaitOrKill(pid, 5);
    hung += rc == -1;
    failed += rc > 0;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(hung, 0) << "a child hung: a lock was held by a thread that does not exist in it";
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(Used0(), 0u);
}

}  // namespace
