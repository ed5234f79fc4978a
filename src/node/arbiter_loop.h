// The node agent's per-GPU compute arbiter: every interval it reads the
// demand each container's processes publish in its region (launches through
// the gate, launches waiting at it), groups the containers' GPU slots by
// physical GPU, computes grants (arbiter.h) and writes them, with a
// heartbeat, into the regions. The launch gate follows a grant while the
// heartbeat is younger than the lease and falls back to the container's
// static share otherwise, so a dead arbiter never freezes a container.
//
// What containers exist comes from a Source callback (in tessera-node:
// RegionSource, the records Allocate and the DRA driver leave under the
// region root), so the loop runs and is tested without Kubernetes. A
// container whose region file does not exist yet (no process started) is
// skipped; the loop never creates regions.
//
// Thread-safety: Step() from one thread at a time (Start() runs it on its
// own thread); Snapshot() from any thread.
//
//   ArbiterLoop loop(RegionSource("/var/run/tessera/regions"), ArbiterLoopOptions{});
//   loop.Start();  ...  auto stats = loop.Snapshot();  ...  loop.Stop();
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "node/arbiter.h"

namespace tessera::region {
class Region;
}

namespace tessera::node {

// Slot i of a container is its i-th assigned GPU, which is CUDA ordinal i
// inside the container and compute[i] in its region.
struct ArbiterSlot {
  int gpu = 0;             // physical GPU index on the node
  uint32_t share_ppm = 0;  // the container's gpu-core share of it
  uint32_t limit_ppm = 0;  // its burst ceiling there (tessera.io/gpu-core-limit); 0: none
};

struct ArbiterContainer {
  std::string key;         // "<pod uid>/<container>": names it in stats
  std::string region_dir;  // holds region::kFileName
  std::vector<ArbiterSlot> slots;
  CorePolicy policy = CorePolicy::kShare;
  core::Priority priority = core::Priority::kNormal;
};

struct ArbiterLoopOptions {
  // Time between passes (Start()).
  std::chrono::milliseconds interval{10};
  // How long a heartbeat stays valid in the gate: past it, the static share.
  uint64_t lease_us = 300'000;
  // A container with no launch and nothing waiting for this long is idle.
  uint64_t idle_after_us = 50'000;
  // What a preemptible container's gate may keep queued on the GPU (per
  // process; at least one launch always passes): bounds how long a hold
  // takes to reach the GPU. 0: no bound.
  uint32_t preemptible_inflight_us = 2000;
  // How often the Source is asked again (0: every pass).
  uint64_t source_refresh_us = 1'000'000;
  GrantOptions grants;
  // The clock written as heartbeat: CLOCK_MONOTONIC in microseconds, as the
  // gate's, unless a test gives its own.
  std::function<uint64_t()> now_us;
};

// Per container and slot, for metrics.
struct ArbiterStats {
  std::string key;
  int slot = 0;
  int gpu = 0;
  uint32_t share_ppm = 0;
  uint32_t grant_ppm = 0;
  bool active = false;
  bool held = false;
  uint64_t used_us = 0;       // GPU time the gate measured, all processes
  uint64_t throttled_us = 0;  // time launches waited at the gate (held, over the grant, queue cap)
  uint64_t held_us = 0;       // time this arbiter has held it (from pass to pass)
  uint64_t launches = 0;
};

class ArbiterLoop {
 public:
  using Source = std::function<std::vector<ArbiterContainer>()>;

  ArbiterLoop(Source source, ArbiterLoopOptions options);
  ~ArbiterLoop();
  ArbiterLoop(const ArbiterLoop&) = delete;
  ArbiterLoop& operator=(const ArbiterLoop&) = delete;

  // One pass: reads demand, computes and writes grants and heartbeats.
  void Step() TESSERA_EXCLUDES(stats_mu_);
  // Runs Step() every interval on a thread until Stop() (or destruction).
  void Start();
  void Stop();

  std::vector<ArbiterStats> Snapshot() const TESSERA_EXCLUDES(stats_mu_);

 private:
  struct Tracked {
    ArbiterContainer spec;
    std::unique_ptr<region::Region> region;
    std::vector<uint64_t> last_launches;
    std::vector<uint32_t> last_waiting;    // ComputeShare::waiting at the last pass
    std::vector<uint64_t> last_throttled;  // ComputeShare::throttled_us at the last pass
    std::vector<uint64_t> last_active_us;  // 0: never
    std::vector<uint64_t> held_us;
    std::vector<bool> held;                 // at the last pass
  };

  void Refresh(uint64_t now);
  static void OpenIfThere(Tracked& t);
  static void Baseline(Tracked& t);

  Source source_;
  ArbiterLoopOptions options_;
  std::map<std::string, Tracked> tracked_;  // by region_dir; Step() only
  uint64_t refreshed_us_ = 0;
  uint64_t last_pass_us_ = 0;  // 0: none yet
  bool refreshed_ = false;
  mutable Mutex stats_mu_;
  std::vector<ArbiterStats> stats_ TESSERA_GUARDED_BY(stats_mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// tessera-node's settings of the arbiter (flags --arbiter-*).
struct ArbiterConfig {
  std::chrono::milliseconds interval{10};  // 0: no arbiter (shares stay static)
  uint32_t min_share_percent = 0;          // what a held container keeps, % of its share
  std::chrono::milliseconds idle_after{50};  // no launch for this long: idle
};

// The arbiter of tessera-node over the records under `region_root`, started;
// nullptr when config.interval is 0. The lease is 10 intervals, at least
// 300 ms.
std::unique_ptr<ArbiterLoop> StartArbiter(const std::string& region_root, const ArbiterConfig& config);

// The folder under the region root where the DRA driver keeps prepared
// claims (node::ClaimsRoot): <root>/dra/<claim uid>/{claim, claim.arbiter.json}.
inline constexpr const char* kClaimsFolder = "dra";

// The Source of tessera-node: every <root>/<pod uid>/<container>.arbiter.json
// that Allocate wrote (WriteArbiterRecord), with its region directory
// <root>/<pod uid>/<container>, and every
// <root>/dra/<claim uid>/claim.arbiter.json that the DRA driver wrote at
// NodePrepareResources, with its region directory <root>/dra/<claim uid>/claim.
// No other depth is read (the `dra` folder itself holds no records), and
// symlinked folders are not followed. Unreadable records are skipped.
ArbiterLoop::Source RegionSource(std::string region_root);

// The record of one container, beside (not inside) its region directory, so
// the container cannot rewrite its own priority. `dir` is the region dir.
Status WriteArbiterRecord(const std::string& region_dir, const ArbiterContainer& container);

}  // namespace tessera::node
