// MPS for tessera.io/isolation: mps. MpsSupervisor runs one NVIDIA MPS
// control daemon (`nvidia-cuda-mps-control -f`) per GPU, each with its own
// pipe and log folders under a root, starts again any that exits (after a
// back-off), and quits them when it stops. A daemon an earlier tessera-node
// left running (it was killed before it could quit them) is taken over, not
// doubled: its MPS clients keep their server. MpsEnv gives an MPS container
// the variables that make its share MPS's limits.
//
// Thread-safety: MpsSupervisor's methods may be called from any thread.
//
//   TESSERA_ASSIGN_OR_RETURN(std::string control, FindMpsControl("nvidia-cuda-mps-control"));
//   MpsSupervisor mps(MpsOptions{control, "/var/run/tessera/mps"}, log);
//   mps.Ensure(gpus);             // every resync: start what is missing or died
//   if (mps.Running(uuid)) ...    // the GPU's inventory mps flag
#pragma once

#include <spdlog/logger.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"

namespace tessera::node {

struct MpsOptions {
  std::string control;  // path of nvidia-cuda-mps-control (FindMpsControl)
  std::string root = "/var/run/tessera/mps";  // <root>/<gpu uuid>/{pipe,log}
  std::chrono::milliseconds restart_backoff{2000};  // least time between two start attempts of one GPU's daemon
  std::chrono::milliseconds stop_grace{5000};       // after "quit", before SIGKILL
};

// `name` when it holds a '/', else the first executable `name` on $PATH.
// NOT_FOUND saying that MPS pods cannot run on this node.
Result<std::string> FindMpsControl(const std::string& name);

// What tessera-node --mps decided: whether this node runs MPS, and with
// which control program.
struct MpsPlan {
  bool enabled = false;
  std::string control;  // FindMpsControl's path when enabled
  std::string reason;   // one sentence for the log: why MPS is on or off
  std::string warning;  // when enabled: a doubt worth a warning in the log ("" when none)
};

// MPS clients and their server share memory through files in /dev/shm, so a
// container's MPS client works only if its /dev/shm is the folder its
// daemon's server uses as /dev/shm. Allocate mounts the host folder `shm`
// (tessera-node --mps-shm) at /dev/shm in MPS containers; the daemons
// tessera-node starts inherit its own /dev/shm, `own_shm`. So `shm` must be
// that very folder: on the host the default /dev/shm, in a pod the host
// folder mounted at /dev/shm (and visible at its own path too, as the chart
// mounts it). OK when the two name one folder (same device and inode);
// FAILED_PRECONDITION naming both when they do not; NOT_FOUND when `shm`
// cannot be read.
Status CheckMpsShm(const std::string& shm, const std::string& own_shm = "/dev/shm");

// `mode` "off": disabled; "auto": enabled when FindMpsControl(control) finds
// the program and CheckMpsShm(shm, own_shm) passes, else disabled (the
// reason says what was missing or wrong); "on": enabled, or the first of
// those two errors (tessera-node must not start). When enabled, `warning`
// says so if `shm` is not a tmpfs (MPS's shared memory would live on disk).
// INVALID_ARGUMENT for any other mode.
Result<MpsPlan> PlanMps(const std::string& mode, const std::string& control, const std::string& shm = "/dev/shm",
                        const std::string& own_shm = "/dev/shm");

// The host folder of GPU `uuid`'s daemon pipes under `root`
// (MpsSupervisor::PipeDir; Allocate mounts it into MPS containers).
std::string MpsPipeDir(const std::string& root, const std::string& uuid);

class MpsSupervisor {
 public:
  MpsSupervisor(MpsOptions options, std::shared_ptr<spdlog::logger> log);
  MpsSupervisor(const MpsSupervisor&) = delete;
  MpsSupervisor& operator=(const MpsSupervisor&) = delete;
  // Stop().
  ~MpsSupervisor();

  // Starts a daemon for each healthy GPU of `gpus` that has none running (a
  // daemon that exited is reaped and logged first; one is started again only
  // after the back-off), and stops the daemons of GPUs no longer listed. The
  // first time it sees a GPU it takes over the daemon an earlier supervisor
  // started for it (<root>/<uuid>/daemon.pid names it) if that still runs:
  // the control program (-f) with the GPU's pipe folder in its environment.
  void Ensure(const std::vector<core::GpuInfo>& gpus) TESSERA_EXCLUDES(mu_);
  // Whether the daemon of GPU `uuid` is running now.
  bool Running(const std::string& uuid) TESSERA_EXCLUDES(mu_);
  // Host folders of GPU `uuid`'s daemon.
  std::string PipeDir(const std::string& uuid) const;
  std::string LogDir(const std::string& uuid) const;
  // Quits every daemon ("quit" to its control pipe), then SIGKILLs what is
  // left after stop_grace.
  void Stop() TESSERA_EXCLUDES(mu_);

 private:
  struct Daemon {
    pid_t pid = -1;
    bool adopted = false;       // started by an earlier supervisor: not our child, so never waited for
    bool looked_for = false;    // whether an earlier supervisor's daemon was looked for
    std::chrono::steady_clock::time_point started{};  // the last start attempted, failed or not
    int starts = 0;                                    // successful starts
  };
  // A daemon's start, take-over, liveness check (reaping it when it exited)
  // and stop; `d` is an entry of daemons_.
  Status StartLocked(const std::string& uuid, Daemon& d) TESSERA_REQUIRES(mu_);
  void AdoptLocked(const std::string& uuid, Daemon& d) TESSERA_REQUIRES(mu_);
  bool AliveLocked(const std::string& uuid, Daemon& d) TESSERA_REQUIRES(mu_);
  void StopLocked(const std::string& uuid, Daemon& d) TESSERA_REQUIRES(mu_);
  // Whether process `pid` is GPU `uuid`'s daemon: the control program run
  // with -f and the GPU's pipe folder in its environment.
  bool IsDaemonOf(pid_t pid, const std::string& uuid) const;
  std::string PidFile(const std::string& uuid) const;  // <root>/<uuid>/daemon.pid

  const MpsOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  Mutex mu_;
  std::map<std::string, Daemon> daemons_ TESSERA_GUARDED_BY(mu_);  // by GPU uuid
};

// Where an MPS container finds its daemon's pipe folder, and the folder it
// shares with its daemon's server (MpsPlan, CheckMpsShm).
inline constexpr const char* kMpsPipeContainerPath = "/var/run/tessera/mps";
inline constexpr const char* kMpsShmContainerPath = "/dev/shm";

// The variables that give an MPS container its share: the pipe folder, the
// share's compute as MPS's active thread percentage (rounded up; unset when
// the share names no compute, as a share of memory alone: MPS then allows
// every SM) and its memory as the pinned device memory limit of device 0 (an
// MPS container sees one GPU; unset when the share names no memory).
std::map<std::string, std::string> MpsEnv(const core::GpuShare& share);

}  // namespace tessera::node
