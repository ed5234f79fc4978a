// The per-GPU compute arbiter's decision, apart from any I/O: given the
// containers sharing one GPU (their gpu-core shares, policies, priorities
// and whether each is active now), the rate each may use, in parts per
// million of the GPU. The node agent's ArbiterLoop (arbiter_loop.h) feeds it
// from the containers' regions and writes the result back; the launch gate
// in libtessera-cuda.so refills its bucket at that rate.
//
// Rules, in order:
//   1. Priority: let P be the highest priority among active containers.
//      Every container below P (active or not) is held: it gets
//      min_share_percent of its own share (default 0: nothing), so a
//      low-priority job cannot slow a high-priority one beyond that floor.
//   2. Guarantee: every active container at P gets its share.
//   3. Work conservation: what is left (idle containers' shares, held
//      containers' shares above their floor, unassigned capacity) is divided
//      among the active `share`-policy containers at P, in proportion to
//      their shares. `hard` containers never get more than their share, and
//      a container with a burst ceiling (tessera.io/gpu-core-limit) never
//      more than that ceiling; what one cannot take goes to the others.
//   4. Idle containers not held get 0 while anyone is active (the gate of a
//      container that becomes active shows it waiting, and the next pass
//      grants it); when nobody is active everyone gets their share.
// Shares above 100 % in total are scaled down first; grants are rounded
// down, so they never sum above 100 %.
//
//   std::vector<GrantEntry> gpu0 = {{300'000, CorePolicy::kShare, core::Priority::kNormal, true},
//                                   {700'000, CorePolicy::kShare, core::Priority::kNormal, false}};
//   std::vector<Grant> g = ComputeGrants(gpu0, {});  // g[0].ppm == 1'000'000
#pragma once

#include <cstdint>
#include <vector>

#include "core/model.h"

namespace tessera::node {

inline constexpr uint32_t kGrantPpm = 1'000'000;

enum class CorePolicy { kShare, kHard };

struct GrantOptions {
  // What a held container keeps, in percent of its own share (0-100).
  uint32_t min_share_percent = 0;
};

// One container on the GPU.
struct GrantEntry {
  uint32_t share_ppm = 0;  // its gpu-core share of this GPU
  // Its burst ceiling on this GPU (`share` policy); 0: none (the whole GPU).
  uint32_t limit_ppm = 0;
  CorePolicy policy = CorePolicy::kShare;
  core::Priority priority = core::Priority::kNormal;
  bool active = false;  // launched or waited at the gate recently
};

struct Grant {
  uint32_t ppm = 0;   // the rate it may use
  bool held = false;  // held back for a higher-priority container
  // A container of higher priority shares the GPU (active or not): the gate
  // keeps little work queued, so a hold takes effect on the GPU quickly.
  bool preemptible = false;
};

// The grants for `entries`, in their order. Pure.
std::vector<Grant> ComputeGrants(const std::vector<GrantEntry>& entries, const GrantOptions& options);

}  // namespace tessera::node
