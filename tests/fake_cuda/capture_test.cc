// Stream capture under a compute share and a memory limit, with
// libtessera-cuda.so preloaded over the fake driver (fake_capture.cc holds
// CUDA's capture rules): TESSERA_GPU_CORE_PERCENT_0=25 (hard),
// TESSERA_GPU_MEM_LIMIT_MIB_0=64, the gate on the fake's virtual clock, and
// this process's region under a fresh directory (main) so the test reads the
// gate's counters. Checks that the gate never breaks a capture (its event
// calls on a capturing stream, or unsafe calls while a global capture runs),
// that captured work is neither held nor charged until its graph runs, and
// that stream-ordered allocations in capture are charged when the graph
// runs, not when captured.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"
#include "region/region.h"

namespace {

using fake_test::kMiB;

std::string g_dir;  // this process's region (set by main)

CUfunction Kernel(uintptr_t id, uint64_t us) {
  CUfunction f = reinterpret_cast<CUfunction>(id);
  tessera_fake_cuda_set_kernel_us(f, us);
  return f;
}

CUresult Launch(CUfunction f, CUstream s) {
  return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr);
}

const char* ModeName(CUstreamCaptureMode m) {
  switch (m) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL:
      return "global";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL:
      return "thread-local";
    default:
      return "relaxed";
  }
}

// Ends whatever capture a failed test left on `s`, so the next test starts
// without one (a global capture would break every test after it).
void EndAnyCapture(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (cuStreamIsCapturing(s, &st) != CUDA_SUCCESS || st == CU_STREAM_CAPTURE_STATUS_NONE) return;
  CUgraph g = nullptr;
  if (cuStreamEndCapture(s, &g) == CUDA_SUCCESS && g != nullptr) cuGraphDestroy(g);
}

// Runs `g` once on `s` and waits for it on the virtual clock.
CUresult RunGraph(CUgraph g, CUstream s) {
  CUgraphExec exec = nullptr;
  if (CUresult r = cuGraphInstantiateWithFlags(&exec, g, 0); r != CUDA_SUCCESS) return r;
  CUresult r = cuGraphLaunch(exec, s);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  cuGraphExecDestroy(exec);
  return r;
}

class CaptureTest : public fake_test::DeviceTest {
 protected:
  void SetUp() override {
    fake_test::DeviceTest::SetUp();
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    auto r = tessera::region::Region::OpenDir(g_dir);
    ASSERT_TRUE(r.ok());
    region_ = std::make_unique<tessera::region::Region>(std::move(r).value());
  }
  void TearDown() override {
    EndAnyCapture(stream_);
    EndAnyCapture(CU_STREAM_PER_THREAD);
    cuCtxSynchronize();
    cuStreamDestroy_v2(stream_);
  }

  tessera::region::ComputeShare& Compute() { return region_->layout()->compute[0]; }
  tessera::region::GpuShare& Memory() { return region_->layout()->gpus[0]; }

  // GPU time charged so far, once it reached `at_least` (within 10 s of
  // real time) and the gate's helper thread, which polls every millisecond
  // of real time, has stopped charging.
  uint64_t SettledUsedUs(uint64_t at_least) {
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    uint64_t last = Compute().used_us.load();
    for (int stable = 0, waits = 0; (last < at_least && waits < 2000) || stable < 10; ++waits) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const uint64_t now = Compute().used_us.load();
      stable = now == last ? stable + 1 : 0;
      last = now;
    }
    return last;
  }

  CUstream stream_ = nullptr;
  std::unique_ptr<tessera::region::Region> region_;
};

// The gate has launches in flight on the stream when the capture begins, and
// its helper polls while the capture runs: in every mode the capture ends
// with a graph, and the graph runs.
TEST_F(CaptureTest, CaptureSucceedsInEveryModeWhileGated) {
  const CUfunction k = Kernel(0x2000, 500);
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                   CU_STREAM_CAPTURE_MODE_RELAXED}) {
    SCOPED_TRACE(ModeName(mode));
    for (int i = 0; i < 3; ++i) ASSERT_EQ(Launch(k, stream_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamBeginCapture_v2(stream_, mode), CUDA_SUCCESS);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(Launch(k, stream_), CUDA_SUCCESS) << "launch " << i;
    CUlaunchConfig cfg{};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = stream_;
    EXPECT_EQ(cuLaunchKernelEx(&cfg, k, nullptr, nullptr), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the helper polls
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    EXPECT_EQ(cuStreamIsCapturing(stream_, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUgraph g = nullptr;
    EXPECT_EQ(cuStreamEndCapture(stream_, &g), CUDA_SUCCESS);
    if (g == nullptr) {
      ADD_FAILURE() << "no graph";
      continue;
    }
    EXPECT_EQ(RunGraph(g, stream_), CUDA_SUCCESS);
    cuGraphDestroy(g);
  }
}

// While this thread captures in global mode, another thread's gated launches
// on its own stream (the gate records and queries events for them) leave
// the capture intact.
TEST_F(CaptureTest, AnotherThreadsGatedLaunchesKeepAGlobalCapture) {
  const CUfunction k = Kernel(0x2001, 200), other = Kernel(0x2002, 300);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(Launch(k, stream_), CUDA_SUCCESS);
  const uint64_t events = tessera_fake_cuda_events_recorded();
  int failed = 0;
  std::thread b([&] {
    fake_test::UseDevice(0);
    CUstream s = nullptr;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
      failed = -1;
      return;
    }
    for (int i = 0; i < 20; ++i) failed += Launch(other, s) != CUDA_SUCCESS;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the helper polls
    cuStreamDestroy_v2(s);
  });
  b.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GT(tessera_fake_cuda_events_recorded(), events);  // the other thread was gated
  EXPECT_EQ(Launch(k, stream_), CUDA_SUCCESS);
  CUgraph g = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &g), CUDA_SUCCESS);
  EXPECT_EQ(RunGraph(g, stream_), CUDA_SUCCESS);
  cuGraphDestroy(g);
}

// Captured launches run nothing: with the share in debt they are not held
// (the clock does not move), and they are neither counted nor charged. The
// graph's launch is gated and charged what it ran.
TEST_F(CaptureTest, CapturedLaunchesAreNeitherHeldNorChargedTheGraphIs) {
  const uint64_t before = Compute().used_us.load();
  ASSERT_EQ(Launch(Kernel(0x2003, 70'000), stream_), CUDA_SUCCESS);  // 70 ms: debt at 25 %
  const uint64_t used0 = SettledUsedUs(before + 70'000);
  ASSERT_LT(Compute().balance_us.load(), 0);
  const uint64_t launches0 = Compute().launches.load();
  const uint64_t t0 = tessera_fake_cuda_now_us();
  const CUfunction k = Kernel(0x2004, 1000);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(Launch(k, stream_), CUDA_SUCCESS) << "launch " << i;
  EXPECT_EQ(tessera_fake_cuda_now_us(), t0);  // not held
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the helper polls
  EXPECT_EQ(Compute().used_us.load(), used0);
  EXPECT_EQ(Compute().launches.load(), launches0);
  CUgraph g = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &g), CUDA_SUCCESS);
  EXPECT_EQ(Compute().launches.load(), launches0);

  // One launch of the graph: 50 ms of kernels, admitted once the debt is
  // paid, charged as measured (the fake adds 1 us of host time at most).
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_GE(tessera_fake_cuda_now_us(), t0 + 1000);  // held for the debt
  const uint64_t charged = SettledUsedUs(used0 + 50'000) - used0;
  EXPECT_GE(charged, 50'000u);
  EXPECT_LE(charged, 50'010u);
  EXPECT_EQ(Compute().launches.load(), launches0 + 1);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
}

// A graph captured under the gate runs at the share when launched back to
// back.
TEST_F(CaptureTest, CapturedGraphRunsAtTheShare) {
  const CUfunction k = Kernel(0x2005, 500);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Launch(k, stream_), CUDA_SUCCESS);
  CUgraph g = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &g), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  constexpr uint64_t kWindowUs = 100'000;
  const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs;
  tessera_fake_cuda_sleep_until_us(t0);
  const uint64_t t1 = t0 + 100 * kWindowUs;
  while (tessera_fake_cuda_now_us() < t1) ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const double busy = static_cast<double>(tessera_fake_cuda_busy_us(0, t0, t1)) / (t1 - t0);
  EXPECT_NEAR(busy, 0.25, 0.03);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
}

// Stream-ordered allocations in capture are memory nodes: nothing is
// allocated, so nothing is admitted or charged, even over the limit; a free
// in capture releases nothing. The graph's memory is charged when it runs.
TEST_F(CaptureTest, AllocAsyncInCaptureIsChargedWhenTheGraphRuns) {
  ASSERT_EQ(Memory().used_bytes.load(), 0u);
  const uint64_t refusals = Memory().oom_refusals.load();
  ASSERT_EQ(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUdeviceptr big = 0, small = 0;
  EXPECT_EQ(cuMemAllocAsync(&big, 80 * kMiB, stream_), CUDA_SUCCESS);  // limit: 64 MiB
  EXPECT_EQ(Memory().used_bytes.load(), 0u);
  EXPECT_EQ(cuMemFreeAsync(big, stream_), CUDA_SUCCESS);
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&small, 8 * kMiB, pool, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 0u);
  EXPECT_EQ(Memory().oom_refusals.load(), refusals);
  CUgraph g = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream_, &g), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 0u);
  // Launched, the graph's pool holds 88 MiB: charged after the fact, past
  // the limit, so nothing else fits until it is trimmed.
  ASSERT_EQ(cuGraphLaunch(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 88 * kMiB);
  size_t free_b = 1, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_b, 0u);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 1 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  if (p != 0) cuMemFree_v2(p);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
  ASSERT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 0u);
}

// The same through the per-thread default stream (_ptsz entry points with a
// NULL stream) in thread-local mode.
TEST_F(CaptureTest, AllocAsyncPtszInCaptureIsChargedWhenTheGraphRuns) {
  ASSERT_EQ(Memory().used_bytes.load(), 0u);
  ASSERT_EQ(cuStreamBeginCapture_v2(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel_ptsz(Kernel(0x2006, 100), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                                nullptr),
            CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  EXPECT_EQ(cuMemAllocAsync_ptsz(&a, 72 * kMiB, nullptr), CUDA_SUCCESS);  // limit: 64 MiB
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocFromPoolAsync_ptsz(&b, 8 * kMiB, pool, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync_ptsz(a, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 0u);
  CUgraph g = nullptr;
  ASSERT_EQ(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch_ptsz(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 80 * kMiB);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
  ASSERT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(Memory().used_bytes.load(), 0u);
}

}  // namespace

int main(int argc, char** argv) {
  // A fresh region for this run, read by the runtime at the first CUDA call
  // (after this) and by the tests.
  char tmpl[] = "/tmp/tessera-capture.XXXXXX";
  const char* root = mkdtemp(tmpl);
  if (root == nullptr) return 1;
  g_dir = std::string(root) + "/ctr";
  std::filesystem::create_directories(g_dir);
  setenv("TESSERA_REGION_DIR", g_dir.c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::filesystem::remove_all(root);
  return rc;
}
