// The node arbiter and the launch gate together, over the fake driver's
// virtual clock. This process is container A (libtessera-cuda.so preloaded,
// TESSERA_GPU_CORE_PERCENT_0=30, policy share, its region under a fresh
// directory); container B (share 70, same GPU) is another region whose
// demand the test writes, as B's processes would. The arbiter is the real
// ArbiterLoop, stepped every kTickUs of virtual time by the fake's tick
// (even while A sleeps in its gate) and after each launch, with its clock
// on the virtual one: everything is deterministic.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"
#include "node/arbiter_loop.h"
#include "region/region.h"

namespace {

using tessera::core::Priority;
using tessera::node::ArbiterContainer;
using tessera::node::ArbiterLoop;
using tessera::node::ArbiterLoopOptions;
using tessera::node::ArbiterSlot;
using tessera::node::CorePolicy;

constexpr uint64_t kWindowUs = 100'000;
constexpr uint64_t kTickUs = 1000;          // the fake's tick: 1 ms
constexpr uint64_t kArbiterEveryUs = 10'000;  // arbiter passes: every 10 ms
constexpr uint64_t kLeaseUs = 300'000;

std::string g_root;  // set by main()

std::string DirA() { return g_root + "/pod-a/main"; }
std::string DirB() { return g_root + "/pod-b/main"; }

CUfunction Kernel(uintptr_t id, uint64_t us) {
  CUfunction f = reinterpret_cast<CUfunction>(id);
  tessera_fake_cuda_set_kernel_us(f, us);
  return f;
}

class ArbiterGateTest : public fake_test::DeviceTest {
 protected:
  void SetUp() override {
    fake_test::DeviceTest::SetUp();
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    std::filesystem::create_directories(DirB());
    a_ = std::make_unique<tessera::region::Region>(std::move(tessera::region::Region::OpenDir(DirA())).value());
    b_ = std::make_unique<tessera::region::Region>(std::move(tessera::region::Region::OpenDir(DirB())).value());
    // B's processes configured it as A's configured A (from the environment).
    tessera::region::ComputeShare& cb = b_->layout()->compute[0];
    cb.share_ppm = 700'000;
    cb.window_us = static_cast<uint32_t>(kWindowUs);
    cb.policy = tessera::region::kPolicyShare;
    // Start each test from a quiet GPU and an arbiter long dead.
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    tessera_fake_cuda_advance_us(2 * kLeaseUs);
    for (auto* r : {a_.get(), b_.get()}) {
      if (r->layout()->arbiter.heartbeat_us.load() != 0) r->layout()->arbiter.lease_us = kLeaseUs;
    }
    tessera_fake_cuda_set_tick(kTickUs, &ArbiterGateTest::OnTick, this);
  }
  void TearDown() override {
    tessera_fake_cuda_set_tick(0, nullptr, nullptr);
    cuCtxSynchronize();
    cuStreamDestroy_v2(stream_);
    loop_.reset();
  }

  void StartArbiter(Priority a_priority = Priority::kNormal, Priority b_priority = Priority::kNormal,
                    CorePolicy a_policy = CorePolicy::kShare, uint64_t lease_us = kLeaseUs,
                    uint64_t idle_after_us = 50'000) {
    ArbiterLoopOptions o;
    o.now_us = [] { return tessera_fake_cuda_now_us(); };
    o.lease_us = lease_us;
    o.idle_after_us = idle_after_us;
    o.source_refresh_us = 0;
    loop_ = std::make_unique<ArbiterLoop>(
        [=, a_limit = a_limit_ppm_] {
          ArbiterContainer a, b;
          a.key = "a";
          a.region_dir = DirA();
          a.slots = {ArbiterSlot{0, 300'000, a_limit}};
          a.priority = a_priority;
          a.policy = a_policy;
          b.key = "b";
          b.region_dir = DirB();
          b.slots = {ArbiterSlot{0, 700'000, 0}};
          b.priority = b_priority;
          return std::vector{a, b};
        },
        o);
    next_pass_us_ = 0;
    Poll(tessera_fake_cuda_now_us());
  }
  void CrashArbiter() { loop_.reset(); }

  static void OnTick(uint64_t now_us, void* self) { static_cast<ArbiterGateTest*>(self)->Poll(now_us); }

  // Every tick: B's demand as the test set it, and an arbiter pass when one
  // is due (its clock is the virtual one).
  void Poll(uint64_t now) {
    if (crash_at_us_ != 0 && now >= crash_at_us_) {
      held_at_crash_ = a_->layout()->compute[0].held.load() != 0;
      crash_at_us_ = 0;
      CrashArbiter();
    }
    if (b_busy_until_us_ > now) b_->layout()->compute[0].launches.fetch_add(1);
    if (loop_ != nullptr && now >= next_pass_us_) {
      loop_->Step();
      next_pass_us_ = (now / kArbiterEveryUs + 1) * kArbiterEveryUs;
      const bool held = a_->layout()->compute[0].held.load() != 0;
      if (held && hold_written_us_ == 0) hold_written_us_ = now;
    }
    if (reclaim_watch_ && reclaimed_at_us_ == 0 && a_->layout()->compute[0].grant_ppm.load() == 300'000u) {
      reclaimed_at_us_ = now;
    }
    if (hold_written_us_ != 0 && launches_1ms_after_hold_ == 0 && now >= hold_written_us_ + kTickUs) {
      launches_1ms_after_hold_ = tessera_fake_cuda_launches(0);
    }
  }

  // Saturates GPU 0 with `launch` for `windows` windows from the next
  // window boundary; the fraction of that time the GPU ran this work.
  template <typename Launch>
  double Saturate(int windows, Launch launch) {
    const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs;
    tessera_fake_cuda_sleep_until_us(t0);
    const uint64_t t1 = t0 + windows * kWindowUs;
    while (tessera_fake_cuda_now_us() < t1) {
      if (launch() != CUDA_SUCCESS) return -1;
      Poll(tessera_fake_cuda_now_us());
    }
    const double got = static_cast<double>(tessera_fake_cuda_busy_us(0, t0, t1)) / (t1 - t0);
    std::printf("  %d windows from %.3f s: %.4f busy, grant %u ppm\n", windows, t0 / 1e6, got,
                a_->layout()->compute[0].grant_ppm.load());
    return got;
  }
  double SaturateKernel(int windows) {
    const CUfunction k = Kernel(0x2000, 1000);
    return Saturate(windows, [&] { return cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr); });
  }

  CUstream stream_ = nullptr;
  std::unique_ptr<tessera::region::Region> a_, b_;
  std::unique_ptr<ArbiterLoop> loop_;
  uint64_t next_pass_us_ = 0;
  uint64_t b_busy_until_us_ = 0;  // B launches until then
  uint32_t a_limit_ppm_ = 0;      // A's burst ceiling (tessera.io/gpu-core-limit); 0: none
  bool reclaim_watch_ = false;    // note when A's grant is back at its 30 % request
  uint64_t reclaimed_at_us_ = 0;
  uint64_t hold_written_us_ = 0;
  uint64_t launches_1ms_after_hold_ = 0;
  uint64_t crash_at_us_ = 0;  // the arbiter dies at the first poll from then on
  bool held_at_crash_ = false;
};

TEST_F(ArbiterGateTest, AloneAShareContainerGetsTheWholeGpu) {
  if (a_->layout()->arbiter.heartbeat_us.load() == 0) {
    // No arbiter has ever written here: `share` is not gated (no events),
    // only counted, so an arbiter that starts sees the demand.
    const uint64_t events = tessera_fake_cuda_events_recorded();
    const uint64_t launches = a_->layout()->compute[0].launches.load();
    EXPECT_GT(SaturateKernel(3), 0.95);
    EXPECT_EQ(tessera_fake_cuda_events_recorded(), events);
    EXPECT_GT(a_->layout()->compute[0].launches.load(), launches);
  }
  StartArbiter();
  SaturateKernel(2);  // the arbiter sees A active
  EXPECT_GT(SaturateKernel(20), 0.95);
  EXPECT_EQ(a_->layout()->compute[0].grant_ppm.load(), 1'000'000u);
}

TEST_F(ArbiterGateTest, AloneAHardContainerGetsItsCap) {
  StartArbiter(Priority::kNormal, Priority::kNormal, CorePolicy::kHard);
  SaturateKernel(2);
  EXPECT_NEAR(SaturateKernel(20), 0.30, 0.03);
  EXPECT_EQ(a_->layout()->compute[0].grant_ppm.load(), 300'000u);
}

TEST_F(ArbiterGateTest, BothSaturatingShareThirtySeventy) {
  b_busy_until_us_ = UINT64_MAX;
  StartArbiter();
  SaturateKernel(2);
  const double a = SaturateKernel(20);
  const uint32_t b_grant = b_->layout()->compute[0].grant_ppm.load();
  EXPECT_NEAR(a, 0.30, 0.03);
  EXPECT_EQ(b_grant, 700'000u);
  // B's gate enforces its grant as A's does: the ratio of GPU time is A's
  // measured time to B's grant.
  const double ratio = a / (b_grant / 1e6);
  EXPECT_NEAR(ratio, 30.0 / 70.0, 0.1 * 30.0 / 70.0);
  b_busy_until_us_ = 0;
}

TEST_F(ArbiterGateTest, ABurstContainerBorrowsUpToItsCeilingAndGivesItBack) {
  // A: gpu-core 30 with tessera.io/gpu-core-limit 60; B (70) idle.
  a_limit_ppm_ = 600'000;
  StartArbiter();
  SaturateKernel(2);
  EXPECT_NEAR(SaturateKernel(20), 0.60, 0.03);
  EXPECT_EQ(a_->layout()->compute[0].grant_ppm.load(), 600'000u);
  // B becomes active: A is back at its request within one arbiter pass
  // (the pass that first sees B's launches).
  reclaim_watch_ = true;
  b_busy_until_us_ = UINT64_MAX;
  const uint64_t b_start = tessera_fake_cuda_now_us();
  const double mixed = SaturateKernel(2);
  ASSERT_NE(reclaimed_at_us_, 0u) << mixed;
  std::printf("  grant back at the request %.1f ms after B became active\n", (reclaimed_at_us_ - b_start) / 1e3);
  EXPECT_LE(reclaimed_at_us_ - b_start, kArbiterEveryUs + kTickUs);
  EXPECT_NEAR(SaturateKernel(20), 0.30, 0.03);
  // B idle again: A borrows again once B counts as idle (50 ms).
  b_busy_until_us_ = 0;
  SaturateKernel(2);
  EXPECT_NEAR(SaturateKernel(20), 0.60, 0.03);
}

TEST_F(ArbiterGateTest, GraphLaunchesFollowTheGrant) {
  b_busy_until_us_ = UINT64_MAX;
  StartArbiter();
  CUgraph g;
  ASSERT_EQ(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  tessera_fake_cuda_set_graph_us(g, 5000);
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  auto launch = [&] { return cuGraphLaunch(exec, stream_); };
  Saturate(2, launch);
  EXPECT_NEAR(Saturate(20, launch), 0.30, 0.03);
  b_busy_until_us_ = 0;  // B idle: the graphs get the whole GPU
  Saturate(2, launch);
  EXPECT_GT(Saturate(20, launch), 0.95);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
}

TEST_F(ArbiterGateTest, CooperativeKernelsFollowTheGrantWhole) {
  b_busy_until_us_ = UINT64_MAX;
  StartArbiter();
  const CUfunction k = Kernel(0x2001, 20'000);
  const uint64_t before = tessera_fake_cuda_cooperative_launches(0, nullptr);
  uint64_t calls = 0;
  auto launch = [&] {
    ++calls;
    return cuLaunchCooperativeKernel(k, 132, 1, 1, 256, 1, 1, 0, stream_, nullptr);
  };
  Saturate(2, launch);
  EXPECT_NEAR(Saturate(20, launch), 0.30, 0.03);
  uint64_t grid = 0;
  EXPECT_EQ(tessera_fake_cuda_cooperative_launches(0, &grid) - before, calls);
  EXPECT_EQ(grid, 132u);
  b_busy_until_us_ = 0;
}

TEST_F(ArbiterGateTest, HighPriorityHoldsLowWithinAMillisecondAndReleases) {
  StartArbiter(Priority::kLow, Priority::kHigh);
  SaturateKernel(2);
  EXPECT_GT(SaturateKernel(5), 0.95);  // alone: all of it
  // B (high) is active for 500 ms from the next tick on.
  const uint64_t t_b = tessera_fake_cuda_now_us();
  b_busy_until_us_ = t_b + 500'000;
  hold_written_us_ = 0;
  const CUfunction k = Kernel(0x2000, 1000);
  while (tessera_fake_cuda_now_us() < t_b + 1'100'000) {
    ASSERT_EQ(cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
    Poll(tessera_fake_cuda_now_us());
  }
  ASSERT_NE(hold_written_us_, 0u);
  std::printf("  hold written %.1f ms after B became active\n", (hold_written_us_ - t_b) / 1e3);
  EXPECT_LE(hold_written_us_ - t_b, kArbiterEveryUs + kTickUs);
  // A is preemptible (B, of higher priority, shares the GPU): it keeps at
  // most 2 ms queued, so its work stops on the GPU within that of the hold.
  const uint64_t drained = tessera_fake_cuda_busy_us(0, hold_written_us_, hold_written_us_ + 100'000);
  std::printf("  A's work already queued at the hold ran %.1f ms more\n", drained / 1e3);
  EXPECT_LE(drained, 3000u);
  EXPECT_EQ(tessera_fake_cuda_busy_us(0, hold_written_us_ + 3000, t_b + 500'000), 0u)
      << "A ran while held";
  // A resumed once B went idle (idle_after 50 ms + a pass) and the debt of
  // its work that ran after the hold was paid: the GPU is A's again.
  const double after =
      static_cast<double>(tessera_fake_cuda_busy_us(0, t_b + 700'000, t_b + 1'000'000)) / 300'000;
  EXPECT_GT(after, 0.95);
  EXPECT_GT(a_->layout()->compute[0].throttled_us.load(), 300'000u);
}

TEST_F(ArbiterGateTest, ALowContainerFillsTheIdleGpuWithKernelsOverHalfTheInflightCap) {
  // tests/gpu priority_hold measured 59 % of the idle time used: a
  // low-priority container keeps at most 2 ms (the arbiter's in-flight cap)
  // unmeasured, so ~1.2 ms kernels pass one at a time, and a gate that
  // looked again only every millisecond left the GPU idle between them.
  StartArbiter(Priority::kLow, Priority::kHigh);
  const CUfunction k = Kernel(0x2001, 1200);
  auto launch = [&] { return cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr); };
  Saturate(2, launch);
  ASSERT_EQ(a_->layout()->compute[0].inflight_cap_us.load(), 2000u);
  EXPECT_GT(Saturate(10, launch), 0.90);
}

TEST_F(ArbiterGateTest, HeldLaunchesPassNoGateAfterAMillisecond) {
  StartArbiter(Priority::kLow, Priority::kHigh);
  SaturateKernel(2);
  const uint64_t t_b = tessera_fake_cuda_now_us();
  b_busy_until_us_ = t_b + 300'000;
  hold_written_us_ = 0;
  launches_1ms_after_hold_ = 0;
  const CUfunction k = Kernel(0x2000, 1000);
  uint64_t launches_at_release = 0;
  while (tessera_fake_cuda_now_us() < t_b + 500'000) {
    ASSERT_EQ(cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
    Poll(tessera_fake_cuda_now_us());
    if (launches_at_release == 0 && a_->layout()->compute[0].held.load() == 0 && hold_written_us_ != 0) {
      launches_at_release = tessera_fake_cuda_launches(0);
    }
  }
  ASSERT_NE(hold_written_us_, 0u);
  ASSERT_NE(launches_1ms_after_hold_, 0u);
  // The launch that returns after the release is counted once it passes:
  // one launch at most between 1 ms after the hold and the release.
  EXPECT_LE(launches_at_release - launches_1ms_after_hold_, 1u);
}

TEST_F(ArbiterGateTest, ADeadArbiterFallsBackToTheStaticShareAndARestartResumes) {
  StartArbiter(Priority::kLow, Priority::kHigh);
  SaturateKernel(2);
  EXPECT_GT(SaturateKernel(5), 0.95);
  // B (high) is active from now on; the hold is written, then the arbiter
  // dies (from the tick: A is waiting in its gate by then).
  b_busy_until_us_ = UINT64_MAX;
  const uint64_t t_crash = tessera_fake_cuda_now_us() + 50'000;
  crash_at_us_ = t_crash;
  const CUfunction k = Kernel(0x2000, 1000);
  while (tessera_fake_cuda_now_us() < t_crash + kLeaseUs + 200'000) {
    ASSERT_EQ(cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
    Poll(tessera_fake_cuda_now_us());
  }
  EXPECT_TRUE(held_at_crash_);
  EXPECT_EQ(loop_, nullptr);
  // Not frozen: the lease ran out and A refills from its static 30 %.
  EXPECT_NEAR(SaturateKernel(20), 0.30, 0.03);
  // A new arbiter (B idle now): A gets the whole GPU again.
  b_busy_until_us_ = 0;
  StartArbiter(Priority::kLow, Priority::kHigh);
  SaturateKernel(2);
  EXPECT_GT(SaturateKernel(20), 0.95);
}

// Container B as a second process (this program again, role "b"): its own
// preloaded gate on its own region and its own fake GPU and virtual clock.
// Two processes' virtual clocks are unrelated, so here the arbiter's lease
// and idle time are made unbounded: B trusts the heartbeat whatever its
// clock says, and neither container turns idle between passes. What is left
// is deterministic: both active, grants 30/70, each gate enforcing its own.
TEST_F(ArbiterGateTest, TwoProcessesSaturatingShareThirtySeventy) {
  constexpr uint64_t kForever = uint64_t{1} << 50;
  StartArbiter(Priority::kNormal, Priority::kNormal, CorePolicy::kShare, kForever, kForever);
  const std::string out = g_root + "/b.out", stop = g_root + "/b.stop", go = g_root + "/b.go";
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("TESSERA_TEST_ROLE", "b", 1);
    setenv("TESSERA_REGION_DIR", DirB().c_str(), 1);
    setenv("TESSERA_GPU_CORE_PERCENT_0", "70", 1);
    execl("/proc/self/exe", "fake_cuda_arbiter_test", out.c_str(), stop.c_str(), go.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  // A launches (active) until B is active and both grants are in place.
  const CUfunction k = Kernel(0x2000, 1000);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int i = 0;
  auto both_active = [&] {
    int active = 0;
    for (const auto& st : loop_->Snapshot()) active += st.active ? 1 : 0;
    return active == 2;
  };
  while (!both_active()) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "B never became active";
    ASSERT_EQ(cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, stream_, nullptr, nullptr), CUDA_SUCCESS);
    Poll(tessera_fake_cuda_now_us());
    if (++i % 64 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(a_->layout()->compute[0].grant_ppm.load(), 300'000u);
  EXPECT_EQ(b_->layout()->compute[0].grant_ppm.load(), 700'000u);
  { std::ofstream(go) << "go\n"; }  // B measures from now on
  // A ran alone at the whole GPU until B showed up; the window it had
  // already been charged for at 100 % is paid back at 30 % (up to 100/30
  // windows with no launch), as any container cut back pays. Measure after.
  SaturateKernel(4);
  const double a = SaturateKernel(20);
  // B measures once it has seen its grant, then launches until told to stop.
  while (!std::filesystem::exists(out)) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "B did not measure";
    SaturateKernel(1);  // A stays active while B measures
  }
  { std::ofstream(stop) << "stop\n"; }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  double b = 0;
  std::ifstream(out) >> b;
  std::printf("  A (30 %%): %.4f, B (70 %%): %.4f, ratio %.4f (asked %.4f)\n", a, b, a / b, 30.0 / 70.0);
  EXPECT_NEAR(a, 0.30, 0.03);
  EXPECT_NEAR(b, 0.70, 0.03);
  EXPECT_NEAR(a / b, 30.0 / 70.0, 0.1 * 30.0 / 70.0);
}

// Role "b": launches until argv[3] exists (the parent saw both active),
// measures 20 windows, writes the busy fraction to argv[1] and launches on
// until argv[2] exists.
int RunB(const char* out, const char* stop, const char* go) {
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  CUcontext ctx = nullptr;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 3;
  CUstream s;
  if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 4;
  auto region = tessera::region::Region::OpenDir(DirB());
  if (!region.ok()) return 5;
  const CUfunction k = Kernel(0x3000, 1000);
  auto launch = [&] { return cuLaunchKernel(k, 64, 1, 1, 128, 1, 1, 0, s, nullptr, nullptr); };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int i = 0;
  while (!std::filesystem::exists(go)) {
    if (std::chrono::steady_clock::now() > give_up) return 6;
    if (launch() != CUDA_SUCCESS) return 7;  // active: the arbiter sees it
    if (++i % 64 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (region->layout()->compute[0].grant_ppm.load() != 700'000) return 11;
  // Settle as A does: work admitted before this grant is charged when it
  // completes, and paid back at 70 % first.
  const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 5) * kWindowUs;
  while (tessera_fake_cuda_now_us() < t0) {
    if (launch() != CUDA_SUCCESS) return 12;
  }
  const uint64_t t1 = t0 + 20 * kWindowUs;
  while (tessera_fake_cuda_now_us() < t1) {
    if (launch() != CUDA_SUCCESS) return 8;
  }
  const double got = static_cast<double>(tessera_fake_cuda_busy_us(0, t0, t1)) / (t1 - t0);
  {
    std::ofstream tmp(std::string(out) + ".tmp");
    tmp << got << "\n";
  }
  std::filesystem::rename(std::string(out) + ".tmp", out);
  for (i = 0; !std::filesystem::exists(stop); ++i) {
    if (std::chrono::steady_clock::now() > give_up) return 9;
    if (launch() != CUDA_SUCCESS) return 10;
    if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cuCtxSynchronize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* role = std::getenv("TESSERA_TEST_ROLE"); role != nullptr && std::string(role) == "b") {
    if (argc < 4) return 1;
    g_root = std::filesystem::path(argv[1]).parent_path().string();
    return RunB(argv[1], argv[2], argv[3]);
  }
  // A fresh region root for this run; A's region is the runtime's (it reads
  // TESSERA_REGION_DIR at the first CUDA call, after this).
  char tmpl[] = "/tmp/tessera-arbiter-gate.XXXXXX";
  g_root = mkdtemp(tmpl);
  std::filesystem::create_directories(DirA());
  setenv("TESSERA_REGION_DIR", DirA().c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::filesystem::remove_all(g_root);
  return rc;
}
