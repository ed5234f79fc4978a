// gpu_mps_supervisor UUID CONTROL CLIENT: tessera-node's own MPS code on a
// real GPU. What `tessera-node --mps` runs for each GPU (src/node/mps.cc,
// MpsSupervisor and MpsEnv), without the rest of the node agent:
//   1. MpsSupervisor::Ensure starts `CONTROL -f` for GPU UUID under a
//      temporary root; its control pipe must appear within 10 s and
//      Running() must say so;
//   2. a client (CLIENT, i.e. `gpu_arbiter_share mps_mem`, run with
//      TESSERA_GPU_CHILD=1) gets MpsEnv's variables for a share of 1024 MiB
//      and 50 %, the pipe folder being the host folder the node agent mounts
//      into the container; it allocates 64 MiB blocks until refused and must
//      be refused after 256-1024 MiB (MPS's pinned device memory limit, which
//      also covers the client's context, 518 MiB bare on an H200: proof that
//      the client went through this daemon, since without it nothing stops
//      the client before 4 GiB);
//   3. Stop() quits the daemon: Running() is false and no MPS control or
//      server process is left within 10 s;
//   4. a supervisor killed (SIGKILL, in a child process) after starting the
//      daemon: a second supervisor takes the daemon over (same pid in
//      daemon.pid, Running()), a client as in 2 is still held by it, and
//      Stop() leaves no MPS process.
// Prints RESULT {json}; exit 0 when all four hold, 1 otherwise.
//
// Plain C++ (src/node/mps.cc, src/core/{model,status}.cc, spdlog and fmt
// headers); no GPU setting is changed.
#include <signal.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "node/mps.h"
#include "result_line.h"

namespace {

using tessera::node::MpsEnv;
using tessera::node::MpsOptions;
using tessera::node::MpsSupervisor;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

// Processes whose name starts with nvidia-cuda-mps (control and server),
// zombies left out (a daemon of a killed supervisor is reparented, and its
// new parent may reap it late).
std::vector<std::string> MpsProcesses() {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string comm = ReadFile("/proc/" + pid + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    const std::string stat = ReadFile("/proc/" + pid + "/stat");
    const size_t close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') continue;
    if (comm.rfind("nvidia-cuda-mps", 0) == 0) found.push_back(pid + " " + comm);
  }
  return found;
}

// Runs `argv` with `env` added, output to `out`; its exit status, or -1 when
// it was still running after `seconds` (then killed).
int RunClient(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              const std::string& out, double seconds) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    if (freopen(out.c_str(), "w", stdout) == nullptr) _exit(127);
    dup2(fileno(stdout), 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A client (CLIENT mps_mem) with MpsEnv's variables for 1024 MiB and 50 % of
// GPU `uuid`, through the daemon whose pipe folder is `pipe`, its output to
// `out` (each line echoed). Whether it was refused after 256-1024 MiB (MPS's
// pinned limit: proof it went through the daemon); `allocated` and `rc` say
// how it went.
bool HeldByMps(const std::string& client, const std::string& uuid, const std::string& pipe, const std::string& out,
               long* allocated, int* rc) {
  tessera::core::GpuShare share;
  share.uuid = uuid;
  share.mem_mib = 1024;
  share.core_milli = 500;
  std::map<std::string, std::string> env = MpsEnv(share);
  std::printf("   MpsEnv for 1024 MiB, 50 %%:");
  for (const auto& [k, v] : env) std::printf(" %s=%s", k.c_str(), v.c_str());
  std::printf("\n");
  env["CUDA_MPS_PIPE_DIRECTORY"] = pipe;  // the host folder the agent mounts at kMpsPipeContainerPath
  env["TESSERA_GPU_CHILD"] = "1";
  *rc = RunClient({client, "mps_mem"}, env, out, 30.0);
  const std::string text = ReadFile(out);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) std::printf("   client: %s\n", line.c_str());
  int refused = 0;
  if (const size_t at = text.find("allocated_mib "); at != std::string::npos) {
    std::sscanf(text.c_str() + at, "allocated_mib %ld\nrefused %d", allocated, &refused);
  }
  return *rc == 0 && refused == 1 && *allocated >= 256 && *allocated <= 1024;
}

template <typename Pred>
bool WaitFor(Pred pred, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s GPU_UUID NVIDIA_CUDA_MPS_CONTROL CLIENT\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string uuid = argv[1], control = argv[2], client = argv[3];
  if (!MpsProcesses().empty()) {
    std::printf("SKIP: an MPS daemon is already running on this machine: %s\n", MpsProcesses()[0].c_str());
    return 77;
  }
  char tmpl[] = "/tmp/tessera-mps-supervisor.XXXXXX";
  const char* root = mkdtemp(tmpl);
  if (root == nullptr) return 2;
  auto log = std::make_shared<spdlog::logger>("mps", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  ResultLine r;
  bool started = false, refused_in_range = false, stopped = false;
  long allocated = -1;
  {
    MpsOptions options{control, root};
    MpsSupervisor mps(options, log);
    tessera::core::GpuInfo gpu;
    gpu.uuid = uuid;
    mps.Ensure({gpu});
    const std::string pipe = mps.PipeDir(uuid);
    started = WaitFor([&] { return std::filesystem::exists(pipe + "/control"); }, 10.0) && mps.Running(uuid);
    std::printf("1. MpsSupervisor::Ensure: control pipe %s/control %s, Running() %d  %s\n", pipe.c_str(),
                std::filesystem::exists(pipe + "/control") ? "exists" : "missing", mps.Running(uuid) ? 1 : 0,
                started ? "ok" : "OFF");
    if (started) {
      int rc = -1;
      refused_in_range = HeldByMps(client, uuid, pipe, std::string(root) + "/client.out", &allocated, &rc);
      std::printf("2. a client with MpsEnv's variables: exit %d, refused after %ld MiB of 1024  %s\n", rc, allocated,
                  refused_in_range ? "ok" : "OFF");
      const std::string control_log = ReadFile(mps.LogDir(uuid) + "/control.log");
      std::printf("   control.log: %zu bytes, last lines:\n", control_log.size());
      std::istringstream cl(control_log.size() > 1200 ? control_log.substr(control_log.size() - 1200) : control_log);
      for (std::string line; std::getline(cl, line);) std::printf("   | %s\n", line.c_str());
    }
    mps.Stop();
    const bool not_running = !mps.Running(uuid);
    const bool none_left = WaitFor([] { return MpsProcesses().empty(); }, 10.0);
    stopped = not_running && none_left;
    std::printf("3. MpsSupervisor::Stop: Running() %d, MPS processes left: %zu  %s\n", not_running ? 0 : 1,
                MpsProcesses().size(), stopped ? "ok" : "OFF");
    for (const std::string& p : MpsProcesses()) std::printf("   left: %s\n", p.c_str());
  }
  // 4. Taken over from a supervisor that was killed.
  bool taken_over = false, served_after = false, stopped_after = false;
  long allocated_after = -1;
  if (started && stopped) {
    tessera::core::GpuInfo gpu;
    gpu.uuid = uuid;
    const std::string pipe = tessera::node::MpsPipeDir(root, uuid), pid_file = std::string(root) + "/" + uuid + "/daemon.pid";
    const pid_t earlier = fork();
    if (earlier == 0) {
      auto quiet = std::make_shared<spdlog::logger>("mps-earlier");  // no sink
      MpsSupervisor first(MpsOptions{control, root}, quiet);
      first.Ensure({gpu});
      while (true) pause();
    }
    const bool up = earlier > 0 && WaitFor([&] {
      return std::filesystem::exists(pipe + "/control") && std::filesystem::exists(pid_file);
    }, 10.0);
    const std::string daemon_pid = ReadFile(pid_file);
    if (earlier > 0) {
      kill(earlier, SIGKILL);
      waitpid(earlier, nullptr, 0);
    }
    MpsSupervisor next(MpsOptions{control, root}, log);
    next.Ensure({gpu});
    taken_over = up && !daemon_pid.empty() && next.Running(uuid) && ReadFile(pid_file) == daemon_pid;
    std::printf("4. a supervisor killed after starting the daemon (pid %s): the next one took it over: %s\n",
                daemon_pid.empty() ? "?" : daemon_pid.substr(0, daemon_pid.find('\n')).c_str(),
                taken_over ? "ok" : "OFF");
    if (taken_over) {
      int rc = -1;
      served_after = HeldByMps(client, uuid, pipe, std::string(root) + "/client-after.out", &allocated_after, &rc);
      std::printf("   a client through the taken-over daemon: exit %d, refused after %ld MiB of 1024  %s\n", rc,
                  allocated_after, served_after ? "ok" : "OFF");
    }
    next.Stop();
    stopped_after = !next.Running(uuid) && WaitFor([] { return MpsProcesses().empty(); }, 10.0);
    std::printf("   Stop: MPS processes left: %zu  %s\n", MpsProcesses().size(), stopped_after ? "ok" : "OFF");
  }
  r.Add("daemon_started", started ? 1 : 0);
  r.Add("client_allocated_mib", static_cast<double>(allocated));
  r.Add("client_refused_in_range", refused_in_range ? 1 : 0);
  r.Add("daemon_stopped", stopped ? 1 : 0);
  r.Add("daemon_taken_over", taken_over ? 1 : 0);
  r.Add("client_allocated_mib_after_takeover", static_cast<double>(allocated_after));
  r.Add("daemon_stopped_after_takeover", stopped_after ? 1 : 0);
  r.Print();
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  const bool ok = started && refused_in_range && stopped && taken_over && served_after && stopped_after;
  if (!ok) std::printf("FAIL: tessera-node's MPS supervisor on this GPU (steps marked OFF above)\n");
  return ok ? 0 : 1;
}
