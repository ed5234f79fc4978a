#include "node/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>


extern char** environ;

namespace tessera::node {
namespace {

bool Executable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The agent's environment with `extra` set (replacing same-named entries).
std::vector<std::string> Environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (!extra.contains(name)) env.push_back(entry);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

// Starts argv[0] in its own process group, stdin from `stdin_fd` (or
// /dev/null), stdout and stderr appended to `log_path`.
Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::string& log_path, int stdin_fd = -1) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Internal("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

// Waits up to `timeout` for `pid` to exit. True when it did (and is reaped).
bool WaitExit(pid_t pid, std::chrono::milliseconds timeout, int* status = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      if (status != nullptr) *status = st;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Waits up to `timeout` until `gone()` says a process that is not our child
// (so not one waitpid can wait for) has ended. True when it has.
template <typename Gone>
bool WaitGone(Gone gone, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!gone()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The NUL-separated entries of /proc/<pid>/<what> (cmdline, environ); empty
// when they cannot be read (gone, a zombie, not ours to read).
std::vector<std::string> ProcEntries(pid_t pid, const char* what) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + what, std::ios::binary);
  std::vector<std::string> out;
  for (std::string entry; std::getline(in, entry, '\0');) out.push_back(entry);
  return out;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

Result<std::string> FindMpsControl(const std::string& name) {
  const std::string missing = ": MPS pods (tessera.io/isolation: mps) cannot run on this node; install the NVIDIA "
                              "driver's MPS tools or start tessera-node with --mps=off";
  if (name.find('/') != std::string::npos) {
    if (Executable(name)) return name;
    return NotFound(name + " is not an executable file" + missing);
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (Executable(candidate)) return candidate;
  }
  return NotFound(name + " is not on PATH" + missing);
}

Status CheckMpsShm(const std::string& shm, const std::string& own_shm) {
  struct stat theirs {}, ours {};
  if (::stat(shm.c_str(), &theirs) != 0) {
    return NotFound("--mps-shm " + shm + ": " + std::strerror(errno) +
                    " (the folder MPS containers get at /dev/shm must exist and be this process's " + own_shm + ")");
  }
  if (::stat(own_shm.c_str(), &ours) != 0) return NotFound(own_shm + ": " + std::strerror(errno));
  if (theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino) return Status::Ok();
  return FailedPrecondition("--mps-shm " + shm + " is not this process's " + own_shm +
                            ": the MPS daemons started here would share memory with their clients in " + own_shm +
                            ", while MPS containers get " + shm +
                            " at /dev/shm, so their CUDA calls could not reach the daemons; run tessera-node with " +
                            shm + " mounted at " + own_shm + " (as the Helm chart does), or leave --mps-shm at " +
                            own_shm + " where it runs on the host");
}

Result<MpsPlan> PlanMps(const std::string& mode, const std::string& control, const std::string& shm,
                        const std::string& own_shm) {
  MpsPlan plan;
  if (mode == "off") {
    plan.reason = "--mps=off";
    return plan;
  }
  if (mode != "auto" && mode != "on") return InvalidArgument("--mps must be auto, on or off, got \"" + mode + "\"");
  Result<std::string> found = FindMpsControl(control);
  if (!found.ok()) {
    if (mode == "on") return found.status().WithContext("--mps=on");
    plan.reason = "--mps=auto found no executable " + control +
                  (control.find('/') == std::string::npos ? " on PATH" : "");
    return plan;
  }
  if (Status shared = CheckMpsShm(shm, own_shm); !shared.ok()) {
    if (mode == "on") return shared.WithContext("--mps=on");
    plan.reason = "--mps=auto found " + *found + ", but " + shared.message();
    return plan;
  }
  plan.enabled = true;
  plan.control = *found;
  plan.reason = "--mps=" + mode + " found " + *found + "; MPS containers get " + shm + " at /dev/shm";
  struct statfs fs {};
  constexpr auto kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC, linux/magic.h
  if (::statfs(shm.c_str(), &fs) == 0 && fs.f_type != kTmpfsMagic) {
    char type[32];
    std::snprintf(type, sizeof type, "0x%lx", static_cast<unsigned long>(fs.f_type));
    plan.warning = "--mps-shm " + shm + " is not a tmpfs (file system type " + type +
                   "): MPS's shared memory will be written to that file system's storage";
  }
  return plan;
}

std::string MpsPipeDir(const std::string& root, const std::string& uuid) { return root + "/" + uuid + "/pipe"; }

MpsSupervisor::MpsSupervisor(MpsOptions options, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)), log_(std::move(log)) {}

MpsSupervisor::~MpsSupervisor() { Stop(); }

std::string MpsSupervisor::PipeDir(const std::string& uuid) const { return MpsPipeDir(options_.root, uuid); }
std::string MpsSupervisor::LogDir(const std::string& uuid) const { return options_.root + "/" + uuid + "/log"; }
std::string MpsSupervisor::PidFile(const std::string& uuid) const {
  return options_.root + "/" + uuid + "/daemon.pid";
}

bool MpsSupervisor::IsDaemonOf(pid_t pid, const std::string& uuid) const {
  const std::vector<std::string> argv = ProcEntries(pid, "cmdline");
  const std::string program = std::filesystem::path(options_.control).filename();
  const bool control = std::any_of(argv.begin(), argv.end(), [&](const std::string& a) {
    return std::filesystem::path(a).filename() == program;
  });
  if (!control || std::find(argv.begin(), argv.end(), "-f") == argv.end()) return false;
  const std::vector<std::string> env = ProcEntries(pid, "environ");
  return std::find(env.begin(), env.end(), "CUDA_MPS_PIPE_DIRECTORY=" + PipeDir(uuid)) != env.end();
}

void MpsSupervisor::AdoptLocked(const std::string& uuid, Daemon& d) {
  d.looked_for = true;
  std::ifstream in(PidFile(uuid));
  long pid = 0;
  if (!(in >> pid) || pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return;
  if (!IsDaemonOf(static_cast<pid_t>(pid), uuid)) {
    log_->info("{} names pid {}, which is not GPU {}'s MPS control daemon (any more); starting one", PidFile(uuid),
               pid, uuid);
    return;
  }
  d.pid = static_cast<pid_t>(pid);
  d.adopted = true;
  log_->info("took over the MPS control daemon of GPU {} (pid {}) that an earlier tessera-node left running; its "
             "MPS clients keep their server",
             uuid, pid);
}

Status MpsSupervisor::StartLocked(const std::string& uuid, Daemon& d) {
  // A failed start waits out the back-off too, so a missing program is not retried (and logged) every pass.
  d.started = std::chrono::steady_clock::now();
  std::error_code ec;
  for (const std::string& dir : {PipeDir(uuid), LogDir(uuid)}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Internal("creating " + dir + " for the MPS daemon of GPU " + uuid + ": " + ec.message());
  }
  const std::vector<std::string> env = Environment({{"CUDA_VISIBLE_DEVICES", uuid},
                                                    {"CUDA_MPS_PIPE_DIRECTORY", PipeDir(uuid)},
                                                    {"CUDA_MPS_LOG_DIRECTORY", LogDir(uuid)}});
  TESSERA_ASSIGN_OR_RETURN(pid_t pid, Spawn({options_.control, "-f"}, env, LogDir(uuid) + "/tessera-node.out"));
  d.pid = pid;
  d.adopted = false;
  ++d.starts;
  // For a supervisor after this one, should this one die without quitting it (AdoptLocked).
  const std::string tmp = PidFile(uuid) + ".tmp";
  {
    std::ofstream out(tmp);
    if (!(out << pid << "\n" << std::flush)) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) std::filesystem::rename(tmp, PidFile(uuid), ec);
  if (ec) log_->warn("writing {}: {} (a tessera-node after this one will start a second daemon)", PidFile(uuid),
                     ec.message());
  log_->info("started the MPS control daemon for GPU {} (pid {}, pipe {}){}", uuid, pid, PipeDir(uuid),
             d.starts > 1 ? " again, start " + std::to_string(d.starts) : "");
  return Status::Ok();
}

bool MpsSupervisor::AliveLocked(const std::string& uuid, Daemon& d) {
  if (d.pid <= 0) return false;
  if (d.adopted) {
    if (::kill(d.pid, 0) == 0 && IsDaemonOf(d.pid, uuid)) return true;
    log_->warn("the MPS control daemon of GPU {} (pid {}, taken over from an earlier tessera-node) is gone; see {}",
               uuid, d.pid, LogDir(uuid));
    d.pid = -1;
    d.adopted = false;
    return false;
  }
  int status = 0;
  const pid_t r = ::waitpid(d.pid, &status, WNOHANG);
  if (r == 0) return true;
  log_->warn("the MPS control daemon of GPU {} (pid {}) {}; see {}", uuid, d.pid,
             r == d.pid ? DescribeExit(status) : "is gone", LogDir(uuid));
  d.pid = -1;
  return false;
}

void MpsSupervisor::StopLocked(const std::string& uuid, Daemon& d) {
  if (d.pid <= 0) return;
  // "quit" on the control pipe ends the daemon and its servers cleanly.
  int fds[2];
  if (::pipe(fds) == 0) {
    const std::vector<std::string> env = Environment({{"CUDA_MPS_PIPE_DIRECTORY", PipeDir(uuid)},
                                                      {"CUDA_MPS_LOG_DIRECTORY", LogDir(uuid)}});
    auto client = Spawn({options_.control}, env, LogDir(uuid) + "/tessera-node.out", fds[0]);
    ::close(fds[0]);
    const char quit[] = "quit\n";
    (void)!::write(fds[1], quit, sizeof quit - 1);
    ::close(fds[1]);
    if (client.ok() && !WaitExit(*client, options_.stop_grace)) {
      ::kill(-*client, SIGKILL);
      WaitExit(*client, std::chrono::seconds(1));
    }
  }
  int status = 0;
  const pid_t pid = d.pid;
  auto gone = [&] { return ::kill(pid, 0) != 0 || !IsDaemonOf(pid, uuid); };
  // Not our child when taken over: it is reaped by whoever adopted it.
  const auto wait = [&](std::chrono::milliseconds timeout) {
    return d.adopted ? WaitGone(gone, timeout) : WaitExit(pid, timeout, &status);
  };
  if (!wait(options_.stop_grace)) {
    log_->warn("the MPS control daemon of GPU {} (pid {}) did not quit; killing it", uuid, pid);
    ::kill(-pid, SIGKILL);
    wait(std::chrono::seconds(2));
  } else {
    log_->info("the MPS control daemon of GPU {} quit", uuid);
  }
  std::error_code ec;
  std::filesystem::remove(PidFile(uuid), ec);
  d.pid = -1;
  d.adopted = false;
}

void MpsSupervisor::Ensure(const std::vector<core::GpuInfo>& gpus) {
  MutexLock lock(mu_);
  std::set<std::string> wanted;
  for (const core::GpuInfo& g : gpus) {
    if (g.healthy && !g.uuid.empty()) wanted.insert(g.uuid);
  }
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    StopLocked(it->first, it->second);
    it = daemons_.erase(it);
  }
  const auto now = std::chrono::steady_clock::now();
  for (const std::string& uuid : wanted) {
    Daemon& d = daemons_[uuid];
    if (!d.looked_for) AdoptLocked(uuid, d);
    if (AliveLocked(uuid, d)) continue;
    if (d.started != std::chrono::steady_clock::time_point{} && now - d.started < options_.restart_backoff) continue;
    if (Status st = StartLocked(uuid, d); !st.ok()) log_->error("{}", st.message());
  }
}

bool MpsSupervisor::Running(const std::string& uuid) {
  MutexLock lock(mu_);
  auto it = daemons_.find(uuid);
  return it != daemons_.end() && AliveLocked(uuid, it->second);
}

void MpsSupervisor::Stop() {
  MutexLock lock(mu_);
  for (auto& [uuid, d] : daemons_) StopLocked(uuid, d);
  daemons_.clear();
}

std::map<std::string, std::string> MpsEnv(const core::GpuShare& share) {
  std::map<std::string, std::string> env = {{"CUDA_MPS_PIPE_DIRECTORY", kMpsPipeContainerPath}};
  // A share that names no compute (memory alone) is not held to any: unset,
  // MPS lets the client use every SM, as the launch gate would not gate it.
  if (share.core_milli > 0) {
    const int64_t percent = std::clamp<int64_t>((share.core_milli + 9) / 10, 1, 100);
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(percent);
  }
  if (share.mem_mib > 0) env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(share.mem_mib) + "M";
  return env;
}

}  // namespace tessera::node
