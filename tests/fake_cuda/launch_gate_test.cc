// The launch gate over the fake driver's simulated GPU time, with
// libtessera-cuda.so preloaded, TESSERA_TEST_CLOCK=fake_cuda (the gate runs
// on the fake's virtual clock, so nothing here depends on the machine's
// load) and a compute cap of TESSERA_GPU_CORE_PERCENT_0 on GPU 0 only (see
// CMakeLists.txt: one run per cap). Accuracy is the GPU time the fake
// executed per 100 ms window over a long run, against the cap.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"

namespace {

constexpr uint64_t kWindowUs = 100'000;
constexpr int kWindows = 200;  // 20 s of virtual time per run

double CapFraction() {
  const char* v = std::getenv("TESSERA_GPU_CORE_PERCENT_0");
  return v != nullptr ? std::atof(v) / 100.0 : 1.0;
}

CUfunction Kernel(uintptr_t id, uint64_t us) {
  CUfunction f = reinterpret_cast<CUfunction>(id);
  tessera_fake_cuda_set_kernel_us(f, us);
  return f;
}

// Runs `launch` back to back (a saturating program) from the next window
// boundary for kWindows windows; returns the fraction of that time the fake
// GPU spent on this program's work.
template <typename Launch>
double Saturate(int dev, Launch launch) {
  const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs;
  tessera_fake_cuda_sleep_until_us(t0);
  const uint64_t t1 = t0 + kWindows * kWindowUs;
  while (tessera_fake_cuda_now_us() < t1) {
    if (launch() != CUDA_SUCCESS) return -1;
  }
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const double got = static_cast<double>(tessera_fake_cuda_busy_us(dev, t0, t1)) / (t1 - t0);
  std::printf("  GPU %d: %.4f of %d windows busy (cap %.2f)\n", dev, got, kWindows, CapFraction());
  return got;
}

class LaunchGateTest : public fake_test::DeviceTest {
 protected:
  void SetUp() override {
    fake_test::DeviceTest::SetUp();
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSynchronize();
    cuStreamDestroy_v2(stream_);
  }
  CUstream stream_ = nullptr;
};

TEST_F(LaunchGateTest, KernelLoopGetsItsShare) {
  const CUfunction k = Kernel(0x1000, 1000);
  const double got = Saturate(0, [&] {
    return cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr);
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
}

TEST_F(LaunchGateTest, ShortKernelsOnTheDefaultStreamsGetTheShare) {
  // 50 us kernels, alternating the legacy and the per-thread default stream.
  const CUfunction k = Kernel(0x1001, 50);
  int i = 0;
  const double got = Saturate(0, [&] {
    return (i++ & 1) ? cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr)
                     : cuLaunchKernel_ptsz(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
}

TEST_F(LaunchGateTest, LongKernelsCarryTheirDebt) {
  // 70 ms kernels are longer than a 10 % window's refill: debt is carried.
  const CUfunction k = Kernel(0x1002, 70'000);
  const double got = Saturate(0, [&] {
    return cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr);
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
}

TEST_F(LaunchGateTest, GraphLaunchesAreThrottled) {
  CUgraph g;
  ASSERT_EQ(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  tessera_fake_cuda_set_graph_us(g, 5000);  // one launch: 5 ms of kernels
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  int i = 0;
  const double got = Saturate(0, [&] {
    return (i++ & 1) ? cuGraphLaunch(exec, stream_) : cuGraphLaunch_ptsz(exec, stream_);
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
}

TEST_F(LaunchGateTest, CooperativeKernelsAreGatedWholeNeverSplit) {
  const CUfunction k = Kernel(0x1003, 20'000);
  uint64_t before = tessera_fake_cuda_cooperative_launches(0, nullptr);
  uint64_t calls = 0;
  CUlaunchAttribute coop{};
  coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  coop.value.cooperative = 1;
  const double got = Saturate(0, [&] {
    ++calls;
    if (calls % 3 == 0) {
      CUlaunchConfig cfg{};
      cfg.gridDimX = 132;
      cfg.gridDimY = cfg.gridDimZ = cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.blockDimX = 256;
      cfg.hStream = stream_;
      cfg.attrs = &coop;
      cfg.numAttrs = 1;
      return cuLaunchKernelEx(&cfg, k, nullptr, nullptr);
    }
    return calls % 3 == 1
               ? cuLaunchCooperativeKernel(k, 132, 1, 1, 256, 1, 1, 0, stream_, nullptr)
               : cuLaunchCooperativeKernel_ptsz(k, 132, 1, 1, 256, 1, 1, 0, stream_, nullptr);
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
  // Each call reached the driver once, with its whole grid.
  uint64_t grid = 0;
  EXPECT_EQ(tessera_fake_cuda_cooperative_launches(0, &grid) - before, calls);
  EXPECT_EQ(grid, 132u);
}

TEST_F(LaunchGateTest, ExAndLegacyLaunchesAreGated) {
  const CUfunction k = Kernel(0x1004, 2000);
  int i = 0;
  const double got = Saturate(0, [&] {
    switch (i++ % 5) {
      case 0: {
        CUlaunchConfig cfg{};
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = stream_;
        return cuLaunchKernelEx(&cfg, k, nullptr, nullptr);
      }
      case 1: {
        CUlaunchConfig cfg{};
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        return cuLaunchKernelEx_ptsz(&cfg, k, nullptr, nullptr);
      }
      case 2:
        return cuLaunch(k);
      case 3:
        return cuLaunchGrid(k, 4, 4);
      default:
        return cuLaunchGridAsync(k, 4, 4, stream_);
    }
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
}

TEST_F(LaunchGateTest, AGpuWithoutACapIsNotGated) {
  fake_test::UseDevice(1);
  const CUfunction k = Kernel(0x1005, 1000);
  const uint64_t events = tessera_fake_cuda_events_recorded();
  const double got = Saturate(1, [&] {
    return cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
  });
  EXPECT_GT(got, 0.95);
  EXPECT_EQ(tessera_fake_cuda_events_recorded(), events);
  fake_test::UseDevice(0);
}

TEST_F(LaunchGateTest, RefusedLaunchesCostNothing) {
  const uint64_t events = tessera_fake_cuda_events_recorded();
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream_, nullptr, nullptr),
              CUDA_ERROR_INVALID_VALUE);
  }
  // At most one start event per refusal, none left queued: the gate stays open.
  EXPECT_LE(tessera_fake_cuda_events_recorded() - events, 1000u);
  const CUfunction k = Kernel(0x1006, 1000);
  EXPECT_NEAR(Saturate(0, [&] {
                return cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr);
              }),
              CapFraction(), 0.03);
}

// An admitted launch on a busy stream costs few driver calls in the
// launching thread: one capture check, one exchange of the capture mode to
// relaxed and one back (for the whole launch), the context, and the chain's
// event calls; the queue of measurements is left to the helper while the
// bucket admits.
TEST_F(LaunchGateTest, AnAdmittedLaunchMakesFewDriverCalls) {
  const CUfunction k = Kernel(0x1009, 20);
  ASSERT_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);  // its estimate is measured
  // A fresh window: the bucket admits all of them (at most 2 ms of 10 ms).
  tessera_fake_cuda_sleep_until_us((tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs);
  const char* apis[] = {"cuStreamIsCapturing", "cuThreadExchangeStreamCaptureMode",
                        "cuCtxGetCurrent", "cuEventQuery", "cuEventRecord", "cuStreamQuery"};
  uint64_t before[6];
  for (int i = 0; i < 6; ++i) before[i] = tessera_fake_cuda_thread_calls(apis[i]);
  constexpr uint64_t kLaunches = 100;
  for (uint64_t i = 0; i < kLaunches; ++i) {
    ASSERT_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
  }
  uint64_t calls[6];
  for (int i = 0; i < 6; ++i) {
    calls[i] = tessera_fake_cuda_thread_calls(apis[i]) - before[i];
    std::printf("  %s: %.2f per launch\n", apis[i], static_cast<double>(calls[i]) / kLaunches);
  }
  EXPECT_EQ(calls[0], kLaunches);
  EXPECT_EQ(calls[1], 2 * kLaunches);
  EXPECT_LE(calls[2], kLaunches);
  // The chain: at most one query per launch, and an end event only per run
  // of back-to-back launches on the busy stream.
  EXPECT_LE(calls[3] + calls[5], kLaunches + kLaunches / 10);
  EXPECT_LE(calls[4], kLaunches / 8);
}

// Back-to-back launches of several functions on one busy stream share
// events (runs), and their measured time is charged in full.
TEST_F(LaunchGateTest, MixedRunsShareEventsAndGetTheShare) {
  const CUfunction a = Kernel(0x100a, 100);
  const CUfunction b = Kernel(0x100b, 250);
  int i = 0;
  const uint64_t events = tessera_fake_cuda_events_recorded();
  uint64_t launches = 0;
  const double got = Saturate(0, [&] {
    ++launches;
    return cuLaunchKernel((i++ % 3) ? a : b, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr);
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
  const double per_launch =
      static_cast<double>(tessera_fake_cuda_events_recorded() - events) / launches;
  std::printf("  %.3f events per launch\n", per_launch);
  EXPECT_LT(per_launch, 0.5);
}

// A run left open when its stream goes idle (the program synchronizes) has
// lost its end: its launches are charged their estimates at the next launch,
// so the share still holds.
TEST_F(LaunchGateTest, RunsCutBySynchronizeAreCharged) {
  const CUfunction k = Kernel(0x100c, 40);
  int i = 0;
  const double got = Saturate(0, [&] {
    const CUresult r = cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr);
    if (r == CUDA_SUCCESS && ++i % 8 == 0) return cuStreamSynchronize(stream_);
    return r;
  });
  EXPECT_NEAR(got, CapFraction(), 0.03);
}

TEST_F(LaunchGateTest, ForkedChildIsGatedAndExits) {
  const CUfunction k = Kernel(0x1007, 1000);
  // Start the helper thread in the parent first.
  ASSERT_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
  pid_t pid = fork();
  if (pid == 0) {
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) _exit(1);
    const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs;
    tessera_fake_cuda_sleep_until_us(t0);
    const uint64_t t1 = t0 + 50 * kWindowUs;
    while (tessera_fake_cuda_now_us() < t1) {
      if (cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr) != CUDA_SUCCESS) _exit(2);
    }
    const double got = static_cast<double>(tessera_fake_cuda_busy_us(0, t0, t1)) / (t1 - t0);
    if (got > CapFraction() + 0.05 || got < CapFraction() - 0.05) _exit(3);
    exit(0);  // exit handlers run; the helper thread must not hold exit up
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

// Every launch entry point, found through dlsym and cuGetProcAddress, is our
// hook and reaches the gate (each gated launch records events).
TEST_F(LaunchGateTest, EveryLaunchSymbolRoutesToTheGate) {
  void* self = dlopen(nullptr, RTLD_NOW);
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libcuda, nullptr);
  for (const char* name :
       {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
        "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", "cuLaunch", "cuLaunchGrid",
        "cuLaunchGridAsync", "cuGraphLaunch", "cuGraphLaunch_ptsz"}) {
    void* hook = dlsym(self, name);
    Dl_info info{};
    ASSERT_TRUE(dladdr(hook, &info)) << name;
    EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos) << name;
    EXPECT_EQ(dlsym(libcuda, name), hook) << name;
    EXPECT_EQ(dlsym(RTLD_NEXT, name), hook) << name;
  }
  struct Case {
    const char* symbol;
    cuuint64_t flags;
    const char* expect;
  };
  for (const Case& c : {Case{"cuLaunchKernel", 0, "cuLaunchKernel"},
                        Case{"cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                             "cuLaunchKernel_ptsz"},
                        Case{"cuLaunchKernelEx", 0, "cuLaunchKernelEx"},
                        Case{"cuLaunchKernelEx", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                             "cuLaunchKernelEx_ptsz"},
                        Case{"cuLaunchCooperativeKernel", 0, "cuLaunchCooperativeKernel"},
                        Case{"cuLaunchCooperativeKernel",
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                             "cuLaunchCooperativeKernel_ptsz"},
                        Case{"cuLaunch", 0, "cuLaunch"}, Case{"cuLaunchGrid", 0, "cuLaunchGrid"},
                        Case{"cuLaunchGridAsync", 0, "cuLaunchGridAsync"},
                        Case{"cuGraphLaunch", 0, "cuGraphLaunch"},
                        Case{"cuGraphLaunch", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                             "cuGraphLaunch_ptsz"}}) {
    void* p = nullptr;
    ASSERT_EQ(cuGetProcAddress_v2(c.symbol, &p, 12000, c.flags, nullptr), CUDA_SUCCESS);
    Dl_info info{};
    ASSERT_TRUE(dladdr(p, &info)) << c.symbol;
    EXPECT_STREQ(info.dli_sname, c.expect);
    EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos) << c.symbol;
  }
  // Through the pointer cuGetProcAddress gave, a launch records events.
  void* p = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  const uint64_t events = tessera_fake_cuda_events_recorded();
  const CUfunction k = Kernel(0x1008, 10);
  ASSERT_EQ(reinterpret_cast<decltype(&cuLaunchKernel)>(p)(k, 1, 1, 1, 1, 1, 1, 0, stream_,
                                                           nullptr, nullptr),
            CUDA_SUCCESS);
  EXPECT_GT(tessera_fake_cuda_events_recorded(), events);
}

}  // namespace
