// A child process for tests and benchmarks: started with posix_spawn in its own
// process group, stopped (SIGTERM, then SIGKILL) when the handle goes away, so
// a failing test leaves nothing running.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();

  // Runs argv[0] (a path) with stdout and stderr appended to `log_path`.
  // When `pid_file` is set the pid is written there (cluster-down.sh reaps
  // anything listed in the cluster's pids/ folder).
  static Result<ChildProcess> Start(const std::vector<std::string>& argv, const std::string& log_path,
                                    const std::string& pid_file = "");

  pid_t pid() const { return pid_; }
  bool running();
  // Sends `signal` to the process group and waits up to `grace` for the exit;
  // SIGKILL after that. Returns the wait status (0 when already reaped).
  int Stop(int signal, std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  pid_t pid_ = -1;
  std::string pid_file_;
};

}  // namespace tessera::testing
