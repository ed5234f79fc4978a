// Several processes of one container sharing one region: racing, killed,
// sequential and concurrent. Each process is `client` (client.cc) started
// with the library preloaded (TESSERA_TEST_PRELOAD) over the fake driver;
// this test itself is not preloaded.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "region/region.h"

extern char** environ;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

class Child {
 public:
  Child(const std::string& region_dir, std::vector<std::string> args, const std::vector<std::string>& extra_env = {}) {
    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    // getenv takes the first of repeated names: extra_env comes first, so it
    // overrides the defaults after it. Contexts are free unless a test asks.
    std::vector<std::string> env(extra_env.begin(), extra_env.end());
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back(std::string("LD_PRELOAD=") + std::getenv("TESSERA_TEST_PRELOAD"));
    env.push_back("TESSERA_REGION_DIR=" + region_dir);
    env.push_back("TESSERA_GPU_MEM_LIMIT_MIB_0=64");
    env.push_back("TESSERA_GPU_CONTEXT_MIB=0");
    args.insert(args.begin(), std::getenv("TESSERA_TEST_CLIENT"));
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  ~Child() {
    CloseStdin();
    if (pid_ > 0) Wait();
    close(stdout_);
  }
  // One line of the child's output, without the newline.
  std::string ReadLine() {
    std::string line;
    char c;
    while (read(stdout_, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  void CloseStdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }
  // Exit status, or 128 + signal.
  int Wait() {
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  void Kill() { kill(pid_, SIGKILL); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
};

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-fake-cuda.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  // Free bytes of GPU 0 that a fresh process of the container sees.
  uint64_t FreeSeen(const std::vector<std::string>& env = {}) {
    Child c(dir_, {"info"}, env);
    std::string line = c.ReadLine();
    EXPECT_EQ(c.Wait(), 0);
    return std::strtoull(line.c_str(), nullptr, 10);
  }
  // What the container's processes have charged on GPU 0, read from the region.
  uint64_t RegionUsed() {
    auto r = tessera::region::Region::OpenDir(dir_);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->layout()->gpus[0].used_bytes.load() : 0;
  }
  std::string dir_;
};

// Contexts (issue 5): each process's context on a GPU is charged to the
// share, here 16 MiB, what the fake driver's contexts take.
const std::vector<std::string> kContexts16 = {"TESSERA_GPU_CONTEXT_MIB=16", "FAKE_CUDA_CONTEXT_MIB=16"};

TEST_F(ProcessTest, EachProcesssContextIsChargedToTheShare) {
  Child a(dir_, {"alloc", "10", "hold"}, kContexts16);
  ASSERT_EQ(a.ReadLine(), "ready");
  EXPECT_EQ(RegionUsed(), 26 * kMiB);  // its context and its 10 MiB
  Child b(dir_, {"ctx", "hold"}, kContexts16);
  ASSERT_EQ(b.ReadLine(), "ready");
  EXPECT_EQ(RegionUsed(), 42 * kMiB);
  // A third process sees both, and its own context: 64 - 42 - 16.
  EXPECT_EQ(FreeSeen(kContexts16), 6 * kMiB);
  b.CloseStdin();
  EXPECT_EQ(b.Wait(), 0);
  EXPECT_EQ(RegionUsed(), 26 * kMiB);  // its exit gave its context back
  a.Kill();
  EXPECT_EQ(a.Wait(), 128 + SIGKILL);
  // A killed process's context goes back with the rest of its slot.
  EXPECT_EQ(FreeSeen(kContexts16), 48 * kMiB);
  EXPECT_EQ(RegionUsed(), 0u);
}

TEST_F(ProcessTest, RacingProcessesCannotTakeContextsBeyondTheShare) {
  // The 64 MiB share holds four 16 MiB contexts. Of six processes starting
  // together, four get theirs; the others are refused with
  // CUDA_ERROR_OUT_OF_MEMORY (exit 10) and nothing is killed.
  std::vector<std::unique_ptr<Child>> kids;
  for (int i = 0; i < 6; ++i) kids.push_back(std::make_unique<Child>(dir_, std::vector<std::string>{"ctx", "hold"}, kContexts16));
  std::vector<Child*> ready, refused;
  for (auto& k : kids) (k->ReadLine() == "ready" ? ready : refused).push_back(k.get());
  EXPECT_EQ(ready.size(), 4u);
  EXPECT_EQ(RegionUsed(), 64 * kMiB);
  for (Child* k : refused) EXPECT_EQ(k->Wait(), 10);
  for (Child* k : ready) {
    k->CloseStdin();
    EXPECT_EQ(k->Wait(), 0);
  }
  EXPECT_EQ(RegionUsed(), 0u);
}

// TESSERA_GPU_MEM_VIEW=device (what gpushare-style containers get): the
// card's total, the share's free, so CONTAINER / DEV of the total is the share.
TEST_F(ProcessTest, DeviceViewShowsTheCardsTotalWithTheSharesFree) {
  auto info = [&](const std::vector<std::string>& env) {
    Child c(dir_, {"info"}, env);
    std::string line = c.ReadLine();
    EXPECT_EQ(c.Wait(), 0);
    uint64_t free_b = 0, total = 0;
    EXPECT_EQ(std::sscanf(line.c_str(), "%lu %lu", &free_b, &total), 2) << line;
    return std::pair{free_b, total};
  };
  const auto [card_free, card_total] = info({"TESSERA_CUDA_DISABLE=1"});
  Child holder(dir_, {"alloc", "16", "hold"});
  ASSERT_EQ(holder.ReadLine(), "ready");
  const auto [share_free, share_total] = info({});
  EXPECT_EQ(share_total, 64 * kMiB);
  EXPECT_EQ(share_free, 48 * kMiB);
  const auto [device_free, device_total] = info({"TESSERA_GPU_MEM_VIEW=device"});
  EXPECT_EQ(device_total, card_total);
  EXPECT_EQ(device_free, 48 * kMiB);
  EXPECT_GT(card_free, 64 * kMiB);
  holder.CloseStdin();
  EXPECT_EQ(holder.Wait(), 0);
}

TEST_F(ProcessTest, TwoRacingProcessesNeverPassTheLimitTogether) {
  for (int round = 0; round < 5; ++round) {
    Child a(dir_, {"fill", "1"});
    Child b(dir_, {"fill", "1"});
    int got = std::atoi(a.ReadLine().c_str()) + std::atoi(b.ReadLine().c_str());
    EXPECT_EQ(got, 64) << "round " << round;
    a.CloseStdin();
    b.CloseStdin();
    EXPECT_EQ(a.Wait(), 0);
    EXPECT_EQ(b.Wait(), 0);
  }
  EXPECT_EQ(FreeSeen(), 64 * kMiB);
}

TEST_F(ProcessTest, KilledLockHolderBlocksTheNextForUnderOneSecond) {
  Child holder(dir_, {"lock-and-die", dir_});
  EXPECT_EQ(holder.ReadLine(), "locked");
  EXPECT_EQ(holder.Wait(), 128 + SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  Child next(dir_, {"alloc", "8", "exit"});
  EXPECT_EQ(next.Wait(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST_F(ProcessTest, SequentialProcessesSeeTheShareEmptyAgain) {
  {
    Child a(dir_, {"alloc", "10", "exit"});  // exits without freeing
    EXPECT_EQ(a.Wait(), 0);
  }
  EXPECT_EQ(FreeSeen(), 64 * kMiB);
  {
    Child k(dir_, {"alloc", "10", "hold"});
    EXPECT_EQ(k.ReadLine(), "ready");
    k.Kill();  // no exit handler runs
    EXPECT_EQ(k.Wait(), 128 + SIGKILL);
  }
  EXPECT_EQ(FreeSeen(), 64 * kMiB);  // the dead process is reaped at attach
}

TEST_F(ProcessTest, ConcurrentProcessesSeeEachOther) {
  Child a(dir_, {"alloc", "10", "hold"});
  EXPECT_EQ(a.ReadLine(), "ready");
  EXPECT_EQ(FreeSeen(), 54 * kMiB);
  {
    Child b(dir_, {"alloc", "60", "exit"});
    EXPECT_EQ(b.Wait(), 7);  // refused: 10 + 60 > 64
  }
  {
    // One allocation the application saw fail is one refusal, however many
    // times the library tried to admit it.
    auto r = tessera::region::Region::OpenDir(dir_);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->layout()->gpus[0].oom_refusals.load(), 1u);
  }
  a.CloseStdin();
  EXPECT_EQ(a.Wait(), 0);
  EXPECT_EQ(FreeSeen(), 64 * kMiB);
}

TEST_F(ProcessTest, TheAgentsRegionLimitWinsOverTheEnvironment) {
  {
    auto r = tessera::region::Region::OpenDir(dir_);
    ASSERT_TRUE(r.ok());
    r->layout()->gpus[0].limit_bytes = 16 * kMiB;
  }
  EXPECT_EQ(FreeSeen(), 16 * kMiB);
  Child b(dir_, {"alloc", "17", "exit"});
  EXPECT_EQ(b.Wait(), 7);
}

TEST_F(ProcessTest, ABadRegionFileFallsBackToThisProcessOnly) {
  ASSERT_EQ(std::system(("head -c 100 /dev/zero > " + dir_ + "/memory.region").c_str()), 0);
  Child a(dir_, {"alloc", "10", "hold"});
  EXPECT_EQ(a.ReadLine(), "ready");
  EXPECT_EQ(FreeSeen(), 64 * kMiB);  // a private region each: not shared
  a.CloseStdin();
  EXPECT_EQ(a.Wait(), 0);
}

}  // namespace
