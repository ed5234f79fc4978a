#include "region/region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "region/admission.h"

namespace tessera::region {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tessera-region-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

constexpr uint64_t kMiB = 1 << 20;

int WaitExit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(RegionTest, CreatesOnceAndReopensTheSameState) {
  TempDir dir;
  Result<Region> a = Region::OpenDir(dir.path());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  a->layout()->gpus[0].limit_bytes = 7 * kMiB;
  Result<Region> b = Region::OpenDir(dir.path());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->layout()->gpus[0].limit_bytes.load(), 7 * kMiB);
  EXPECT_NE(a->layout(), b->layout());  // two mappings, one file
}

TEST(RegionTest, OnlyCountedRefusalsAreCounted) {
  Result<Region> r = Region::CreateAnonymous();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Layout& l = *r->layout();
  l.gpus[0].limit_bytes = kMiB;
  Result<int> slot = RegisterProcess(l, getpid());
  ASSERT_TRUE(slot.ok());
  EXPECT_FALSE(Charge(l, *slot, 0, 2 * kMiB, Refusal::kUncounted));
  EXPECT_EQ(l.gpus[0].oom_refusals.load(), 0u);
  EXPECT_FALSE(Charge(l, *slot, 0, 2 * kMiB));
  EXPECT_EQ(l.gpus[0].oom_refusals.load(), 1u);
  EXPECT_EQ(l.gpus[0].used_bytes.load(), 0u);
}

TEST(RegionTest, OpenExistingNeverCreates) {
  TempDir dir;
  Result<Region> none = Region::OpenExisting(dir.path());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/" + kFileName));
  Result<Region> made = Region::OpenDir(dir.path());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  made->layout()->gpus[1].used_bytes = 3 * kMiB;
  Result<Region> seen = Region::OpenExisting(dir.path());
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->layout()->gpus[1].used_bytes.load(), 3 * kMiB);
}

TEST(RegionTest, RejectsWrongSizeMagicAndVersion) {
  TempDir dir;
  const std::string path = dir.path() + "/" + kFileName;
  { std::ofstream(path) << "too small"; }
  Result<Region> r = Region::OpenDir(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("size"), std::string::npos);

  std::vector<unsigned char> buf(sizeof(Layout), 0);
  Layout* l = reinterpret_cast<Layout*>(buf.data());
  EXPECT_FALSE(Region::Validate(l, buf.size()).ok());  // magic 0
  l->magic = kMagic;
  l->version = kLayoutVersion + 1;
  l->layout_bytes = sizeof(Layout);
  l->max_gpus = kMaxGpus;
  l->max_procs = kMaxProcs;
  Status st = Region::Validate(l, buf.size());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("version"), std::string::npos);
  l->version = kLayoutVersion;
  EXPECT_TRUE(Region::Validate(l, buf.size()).ok());
  EXPECT_FALSE(Region::Validate(l, buf.size() - 1).ok());
}

// A region of layout 2 (before the arbiter's fields) is refused, not misread.
TEST(RegionTest, RejectsTheLayoutBeforeArbiterGrants) {
  std::vector<unsigned char> buf(sizeof(Layout), 0);
  Layout* l = reinterpret_cast<Layout*>(buf.data());
  l->magic = kMagic;
  l->version = 2;
  l->layout_bytes = static_cast<uint32_t>(offsetof(Layout, arbiter));
  l->max_gpus = kMaxGpus;
  l->max_procs = kMaxProcs;
  EXPECT_FALSE(Region::Validate(l, buf.size()).ok());
  EXPECT_FALSE(Region::Validate(l, offsetof(Layout, arbiter)).ok());
}

TEST(RegionTest, ANewRegionHasNoArbiterAndNoGrants) {
  TempDir dir;
  Result<Region> r = Region::OpenDir(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Layout& l = *r->layout();
  EXPECT_EQ(l.version, 3u);
  EXPECT_EQ(l.arbiter.heartbeat_us.load(), 0u);
  EXPECT_EQ(l.arbiter.lease_us.load(), 0u);
  for (const ComputeShare& c : l.compute) {
    EXPECT_EQ(c.grant_ppm.load(), 0u);
    EXPECT_EQ(c.policy.load(), kPolicyUnset);
    EXPECT_EQ(c.waiting.load(), 0u);
    EXPECT_EQ(c.applied_ppm.load(), 0u);
  }
}

TEST(RegionTest, ConcurrentCreatorsShareOneRegion) {
  TempDir dir;
  std::vector<pid_t> kids;
  for (int i = 0; i < 6; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      Result<Region> r = Region::OpenDir(dir.path());
      if (!r.ok()) _exit(2);
      r->layout()->gpus[1].used_bytes.fetch_add(1);
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) EXPECT_EQ(WaitExit(k), 0);
  Result<Region> r = Region::OpenDir(dir.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->layout()->gpus[1].used_bytes.load(), 6u);
}

TEST(AdmissionTest, LimitIsExactAndUnchargeSaturates) {
  std::atomic<uint64_t> used{0};
  EXPECT_TRUE(TryCharge(used, 10, 10));
  EXPECT_FALSE(TryCharge(used, 10, 1));
  EXPECT_EQ(Uncharge(used, 4), 6u);
  EXPECT_FALSE(TryCharge(used, 10, 5));
  EXPECT_TRUE(TryCharge(used, 10, 4));
  EXPECT_EQ(Uncharge(used, 100), 0u);  // never wraps
  EXPECT_FALSE(TryCharge(used, 10, 11));
  EXPECT_TRUE(TryCharge(used, 0, ~0ull));  // limit 0: unlimited
}

TEST(AdmissionTest, ThreadsNeverPassTheLimitTogether) {
  std::atomic<uint64_t> used{0}, peak{0};
  constexpr uint64_t kLimit = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        uint64_t n = 1 + (i * 7 + t) % 97;
        if (TryCharge(used, kLimit, n)) {
          RaisePeak(peak, used.load());
          Uncharge(used, n);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(peak.load(), kLimit);
  EXPECT_EQ(used.load(), 0u);
}

TEST(RegionTest, ProcessesRacingFillTheLimitExactly) {
  Result<Region> r = Region::CreateAnonymous();
  ASSERT_TRUE(r.ok());
  Layout& l = *r->layout();
  l.gpus[0].limit_bytes = 64 * kMiB;
  int done[2], go[2];
  ASSERT_EQ(pipe(done), 0);
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      close(go[1]);
      Result<int> slot = RegisterProcess(l, getpid());
      if (!slot.ok()) _exit(2);
      while (Charge(l, *slot, 0, kMiB)) {
      }
      char c = 1;
      if (write(done[1], &c, 1) != 1) _exit(3);
      (void)!read(go[0], &c, 1);  // stay alive until the parent has looked
      _exit(0);
    }
    kids.push_back(pid);
  }
  close(go[0]);
  for (int i = 0; i < 4; ++i) {
    char c;
    ASSERT_EQ(read(done[0], &c, 1), 1);
  }
  EXPECT_EQ(l.gpus[0].used_bytes.load(), 64 * kMiB);
  EXPECT_EQ(l.gpus[0].peak_bytes.load(), 64 * kMiB);
  uint64_t by_slots = 0;
  for (const ProcSlot& s : l.procs) by_slots += s.used_bytes[0].load();
  EXPECT_EQ(by_slots, 64 * kMiB);
  EXPECT_GE(l.gpus[0].oom_refusals.load(), 4u);
  close(go[1]);
  for (pid_t k : kids) EXPECT_EQ(WaitExit(k), 0);
  // The children exited without releasing: reaping gives everything back.
  EXPECT_EQ(ReapDeadProcesses(l), 4);
  EXPECT_EQ(l.gpus[0].used_bytes.load(), 0u);
  close(done[0]);
  close(done[1]);
}

TEST(RegionTest, DeadLockHolderDoesNotBlockTheNextOne) {
  Result<Region> r = Region::CreateAnonymous();
  ASSERT_TRUE(r.ok());
  Layout& l = *r->layout();
  pid_t pid = fork();
  if (pid == 0) {
    if (!RobustMutex::IsHeld(l.lock.Lock(1000))) _exit(2);
    raise(SIGKILL);  // dies holding the lock
    _exit(3);
  }
  EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  RobustMutex::LockResult res = l.lock.Lock(5000);
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(res, RobustMutex::LockResult::kRecovered);
  EXPECT_LT(waited, std::chrono::seconds(1));
  l.lock.Unlock();
  EXPECT_EQ(l.lock.Lock(100), RobustMutex::LockResult::kAcquired);
  l.lock.Unlock();
}

TEST(RegionTest, LiveHolderTimesOut) {
  Result<Region> r = Region::CreateAnonymous();
  ASSERT_TRUE(r.ok());
  Layout& l = *r->layout();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    l.lock.Lock(1000);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(l.lock.Lock(200), RobustMutex::LockResult::kTimedOut);
  kill(pid, SIGKILL);
  WaitExit(pid);
  EXPECT_EQ(l.lock.Lock(1000), RobustMutex::LockResult::kRecovered);
  l.lock.Unlock();
  close(ready[0]);
  close(ready[1]);
}

TEST(RegionTest, SlotUnchargeNeverTakesFromOthers) {
  Result<Region> r = Region::CreateAnonymous();
  ASSERT_TRUE(r.ok());
  Layout& l = *r->layout();
  Result<int> a = RegisterProcess(l, getpid());
  ASSERT_TRUE(a.ok());
  l.procs[*a].used_bytes[2] = 0;
  ASSERT_TRUE(Charge(l, *a, 2, 100));
  l.gpus[2].used_bytes += 50;  // another process's charge
  Uncharge(l, *a, 2, 1000);    // a free larger than what the slot holds
  EXPECT_EQ(l.gpus[2].used_bytes.load(), 50u);
  EXPECT_EQ(l.procs[*a].used_bytes[2].load(), 0u);
  ReleaseProcess(l, *a);
  EXPECT_EQ(l.procs[*a].pid.load(), 0);
}

TEST(RegionTest, StartTimeTellsLiveFromGone) {
  EXPECT_NE(ProcessStartTime(getpid()), 0u);
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  WaitExit(pid);
  EXPECT_EQ(ProcessStartTime(pid), 0u);
}

}  // namespace
}  // namespace tessera::region
