#include "node/mps.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/ostream_sink.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace tessera::node {
namespace {

using std::chrono::milliseconds;

// The stand-in daemon in tests/fake_mps (a shell script).
const char* kFake = TESSERA_FAKE_MPS_CONTROL;

std::vector<core::GpuInfo> Gpus() {
  std::vector<core::GpuInfo> out(2);
  out[0].index = 0;
  out[0].uuid = "GPU-a";
  out[1].index = 1;
  out[1].uuid = "GPU-b";
  return out;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// Whether process `pid` has ended: gone, or a zombie its new parent (the
// daemon of a killed supervisor is reparented) has not reaped yet.
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

template <typename P>
bool Eventually(P pred, milliseconds timeout = milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return pred();
}

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-mps-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  MpsOptions Options() {
    MpsOptions o;
    o.control = kFake;
    o.root = root_;
    o.restart_backoff = milliseconds(200);
    o.stop_grace = milliseconds(3000);
    return o;
  }
  std::shared_ptr<spdlog::logger> log_ =
      std::make_shared<spdlog::logger>("mps", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::string root_;
};

TEST_F(MpsTest, FindsTheControlProgramOrSaysWhatMpsPodsLose) {
  EXPECT_EQ(*FindMpsControl(kFake), kFake);
  auto missing = FindMpsControl("tessera-no-such-mps-control");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("MPS pods (tessera.io/isolation: mps) cannot run on this node"),
            std::string::npos)
      << missing.status().message();
  EXPECT_FALSE(FindMpsControl(root_ + "/absent").ok());
}

TEST_F(MpsTest, OneDaemonPerGpuRestartedWhenItDiesAndQuitOnStop) {
  MpsSupervisor mps(Options(), log_);
  mps.Ensure(Gpus());
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    const std::string pipe = mps.PipeDir(uuid);
    ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(pipe + "/control.pid"); })) << uuid;
    EXPECT_EQ(Read(pipe + "/devices"), uuid);  // each daemon sees only its GPU
    EXPECT_TRUE(mps.Running(uuid));
  }
  // GPU-a's daemon crashes: reported at once, started again after the back-off.
  const pid_t first = std::stoi(Read(mps.PipeDir("GPU-a") + "/control.pid"));
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return !mps.Running("GPU-a"); }));
  std::filesystem::remove(mps.PipeDir("GPU-a") + "/control.pid");
  ASSERT_TRUE(Eventually([&] {
    mps.Ensure(Gpus());
    return mps.Running("GPU-a") && std::filesystem::exists(mps.PipeDir("GPU-a") + "/control.pid");
  }));
  EXPECT_NE(std::stoi(Read(mps.PipeDir("GPU-a") + "/control.pid")), first);
  // A GPU that leaves the inventory (or turns unhealthy) loses its daemon.
  std::vector<core::GpuInfo> one = Gpus();
  one[1].healthy = false;
  mps.Ensure(one);
  EXPECT_FALSE(mps.Running("GPU-b"));
  EXPECT_FALSE(std::filesystem::exists(mps.PipeDir("GPU-b") + "/control.pid")) << "quit, not killed";
  mps.Stop();
  EXPECT_FALSE(mps.Running("GPU-a"));
  EXPECT_FALSE(std::filesystem::exists(mps.PipeDir("GPU-a") + "/control.pid"));
}

// tessera-node killed before it could quit its daemons (SIGKILL, OOM):
// the next one takes them over instead of starting a second daemon on the
// same pipe folder, so the MPS clients keep their server.
TEST_F(MpsTest, DaemonsAnEarlierSupervisorLeftAreTakenOverNotDoubled) {
  const pid_t earlier = ::fork();
  ASSERT_GE(earlier, 0);
  if (earlier == 0) {  // the earlier tessera-node: starts the daemons, then is killed
    MpsSupervisor mps(Options(), log_);
    mps.Ensure(Gpus());
    while (true) ::pause();
  }
  std::map<std::string, std::string> pids;
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    const std::string pipe = MpsPipeDir(root_, uuid);
    ASSERT_TRUE(Eventually([&] {
      return std::filesystem::exists(pipe + "/control.pid") && std::filesystem::exists(root_ + "/" + uuid + "/daemon.pid");
    })) << uuid;
    pids[uuid] = Read(pipe + "/control.pid");
    EXPECT_EQ(Read(root_ + "/" + uuid + "/daemon.pid"), pids[uuid]);
  }
  ASSERT_EQ(::kill(earlier, SIGKILL), 0);
  ASSERT_EQ(::waitpid(earlier, nullptr, 0), earlier);

  std::ostringstream lines;
  auto log = std::make_shared<spdlog::logger>("mps", std::make_shared<spdlog::sinks::ostream_sink_mt>(lines));
  MpsSupervisor mps(Options(), log);
  mps.Ensure(Gpus());
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    EXPECT_TRUE(mps.Running(uuid)) << uuid;
    EXPECT_EQ(Read(mps.PipeDir(uuid) + "/control.pid"), pids[uuid]) << "taken over, not started again";
  }
  EXPECT_NE(lines.str().find("took over the MPS control daemon of GPU GPU-a (pid " + pids["GPU-a"] + ")"),
            std::string::npos)
      << lines.str();
  EXPECT_EQ(lines.str().find("started the MPS control daemon"), std::string::npos) << lines.str();

  // A taken-over daemon that dies is noticed (it is not our child to reap)
  // and replaced by one of this supervisor's own.
  ASSERT_EQ(::kill(std::stoi(pids["GPU-a"]), SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { return !mps.Running("GPU-a"); }));
  std::filesystem::remove(mps.PipeDir("GPU-a") + "/control.pid");
  ASSERT_TRUE(Eventually([&] {
    mps.Ensure(Gpus());
    return mps.Running("GPU-a") && std::filesystem::exists(mps.PipeDir("GPU-a") + "/control.pid");
  }));
  EXPECT_NE(Read(mps.PipeDir("GPU-a") + "/control.pid"), pids["GPU-a"]);
  // Stop quits both: the one it took over as well as its own.
  mps.Stop();
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    EXPECT_FALSE(std::filesystem::exists(mps.PipeDir(uuid) + "/control.pid")) << uuid << ": quit, not killed";
    EXPECT_FALSE(std::filesystem::exists(root_ + "/" + uuid + "/daemon.pid")) << uuid;
  }
  EXPECT_TRUE(Ended(std::stoi(pids["GPU-b"]))) << "the taken-over daemon of GPU-b still runs";
}

// daemon.pid naming a process that is not the GPU's daemon (its pid taken
// by another process since): not taken over, a daemon is started.
TEST_F(MpsTest, AStalePidFileIsNotTakenOver) {
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    std::filesystem::create_directories(root_ + "/" + uuid);
    std::ofstream(root_ + "/" + uuid + "/daemon.pid") << ::getpid() << "\n";
  }
  MpsSupervisor mps(Options(), log_);
  mps.Ensure(Gpus());
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(mps.PipeDir(uuid) + "/control.pid"); })) << uuid;
    EXPECT_TRUE(mps.Running(uuid));
    EXPECT_NE(Read(mps.PipeDir(uuid) + "/control.pid"), std::to_string(::getpid()));
    EXPECT_EQ(Read(root_ + "/" + uuid + "/daemon.pid"), Read(mps.PipeDir(uuid) + "/control.pid"));
  }
  mps.Stop();
}

TEST_F(MpsTest, PlanFindsTheProgramWithAutoAndOn) {
  for (const char* mode : {"auto", "on"}) {
    auto plan = PlanMps(mode, kFake);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->enabled);
    EXPECT_EQ(plan->control, kFake);
  }
}

TEST_F(MpsTest, AProgramThatCannotStartIsRetriedOnlyAfterTheBackOff) {
  std::ostringstream lines;
  auto log = std::make_shared<spdlog::logger>("mps", std::make_shared<spdlog::sinks::ostream_sink_mt>(lines));
  MpsOptions options = Options();
  options.control = root_ + "/absent";
  options.restart_backoff = milliseconds(60000);
  MpsSupervisor mps(options, log);
  for (int i = 0; i < 5; ++i) mps.Ensure(Gpus());
  EXPECT_FALSE(mps.Running("GPU-a"));
  const std::string text = lines.str();
  size_t failures = 0;
  for (size_t at = text.find("cannot start"); at != std::string::npos; at = text.find("cannot start", at + 1)) {
    ++failures;
  }
  EXPECT_EQ(failures, 2u) << "one attempt per GPU, then the back-off: " << text;
}

TEST(MpsEnvTest, TheShareBecomesMpsLimits) {
  core::GpuShare share;
  share.index = 3;
  share.uuid = "GPU-c";
  share.mem_mib = 4096;
  share.core_milli = 255;
  auto env = MpsEnv(share);
  EXPECT_EQ(env["CUDA_MPS_PIPE_DIRECTORY"], "/var/run/tessera/mps");
  EXPECT_EQ(MpsPipeDir("/run/mps", "GPU-c"), "/run/mps/GPU-c/pipe");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "26");  // rounded up: never below the share
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=4096M");
  share.core_milli = 1;
  env = MpsEnv(share);
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "1") << "a share of 0.1 % still gets 1 %";
  // Memory alone (gpu-mem without gpu-core, gpushare's pods, HAMi's without
  // gpucores): no compute held back, as under the launch gate.
  share.core_milli = 0;
  env = MpsEnv(share);
  EXPECT_FALSE(env.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=4096M");
  // Compute alone: no memory limit.
  share.core_milli = 500;
  share.mem_mib = 0;
  env = MpsEnv(share);
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_FALSE(env.contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
}

}  // namespace
}  // namespace tessera::node
