#include "tests/support/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <thread>

extern char** environ;

namespace tessera::testing {

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), pid_file_(std::move(other.pid_file_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Stop(SIGKILL, std::chrono::milliseconds(0));
    pid_ = std::exchange(other.pid_, -1);
    pid_file_ = std::move(other.pid_file_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { Stop(SIGTERM, std::chrono::seconds(5)); }

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv, const std::string& log_path,
                                         const std::string& pid_file) {
  if (argv.empty()) return InvalidArgument("ChildProcess::Start: empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A caller that blocks SIGINT/SIGTERM to sigwait (tessera-nodesim), or that
  // a shell started in the background with SIGINT ignored, must not pass that
  // on: the child starts with no signal blocked and both at their default.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ChildProcess child;
  const int rc = posix_spawn(&child.pid_, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    child.pid_ = -1;
    return Internal("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  if (!pid_file.empty()) {
    std::ofstream(pid_file) << child.pid_ << "\n";
    child.pid_file_ = pid_file;
  }
  return child;
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int ChildProcess::Stop(int signal, std::chrono::milliseconds grace) {
  if (pid_ <= 0) return 0;
  ::kill(-pid_, signal);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (!pid_file_.empty()) ::unlink(pid_file_.c_str());
  return status;
}

}  // namespace tessera::testing
