// The shared-memory region of one container: per-GPU limits and usage
// counters of the container's share, and one slot per process so the usage of
// a process that died can be taken back. Created by the node agent (or by the
// first process when the agent has not), mapped by every process of the
// container through libtessera-cuda.so. The layout is versioned and checked
// (magic, version, sizes) before use.
//
// Thread-safety: counters are lock-free atomics (see admission.h); slot
// registration and reaping hold Layout::lock, a robust mutex.
//
//   TESSERA_ASSIGN_OR_RETURN(Region r, Region::OpenDir("/run/tessera/ctr"));
//   TESSERA_ASSIGN_OR_RETURN(int slot, RegisterProcess(*r.layout(), getpid()));
//   if (!Charge(*r.layout(), slot, /*gpu=*/0, bytes)) { /* over the limit */ }
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "region/robust_mutex.h"

namespace tessera::region {

inline constexpr uint64_t kMagic = 0x4e4f494745525354ull;  // "TSREGION" little-endian
inline constexpr uint32_t kLayoutVersion = 3;  // 2: compute shares; 3: arbiter grants
inline constexpr int kMaxGpus = 16;
inline constexpr int kMaxProcs = 1024;
inline constexpr const char* kFileName = "memory.region";
inline constexpr int kLockTimeoutMs = 2000;

// One GPU of the container's share.
struct GpuShare {
  std::atomic<uint64_t> limit_bytes;   // 0 = no limit on this GPU
  std::atomic<uint64_t> used_bytes;    // charged by all live processes
  std::atomic<uint64_t> peak_bytes;    // high-water mark of used_bytes
  std::atomic<uint64_t> oom_refusals;  // allocations refused at the limit
};

// Compute policy of a ComputeShare (TESSERA_GPU_CORE_POLICY).
inline constexpr uint32_t kPolicyUnset = 0;
inline constexpr uint32_t kPolicyShare = 1;  // work-conserving: the arbiter may grant more
inline constexpr uint32_t kPolicyHard = 2;   // never above the static share

// Compute share of one GPU: a token bucket of GPU time in microseconds, one
// for all processes of the container (src/cuda/compute_gate.h reads and
// refills it). The rate of refill is the node arbiter's grant while the
// arbiter is alive (Layout::arbiter), else the static share_ppm.
struct ComputeShare {
  std::atomic<uint32_t> share_ppm;     // share of the GPU in parts per million; 0 = no limit
  std::atomic<uint32_t> window_us;     // refill period
  std::atomic<int64_t> balance_us;     // tokens; negative = debt carried to later windows
  std::atomic<uint64_t> window_index;  // 1 + the last window refilled (clock / window_us); 0: none
  std::atomic<uint64_t> used_us;       // GPU time measured, all processes
  std::atomic<uint64_t> throttled_us;  // time launches waited at the gate, all processes
  std::atomic<uint64_t> launches;      // launches seen by the gate (demand for the arbiter)
  // Since version 3. Written by the container's processes:
  std::atomic<uint32_t> policy;        // kPolicy*; the first writer wins
  std::atomic<uint32_t> waiting;       // threads waiting at the gate now (demand)
  std::atomic<uint32_t> applied_ppm;   // the rate of the last refill (a drop clamps the balance)
  // Written by the arbiter only:
  std::atomic<uint32_t> grant_ppm;     // the rate to refill at while the arbiter is alive
  std::atomic<uint32_t> priority;      // 0 low, 1 normal, 2 high (what the arbiter applied)
  std::atomic<uint32_t> held;          // 1: held back for a higher-priority container
  std::atomic<uint32_t> inflight_cap_us;  // >0: admitted, unmeasured work per process at most
                                          // this (a higher priority shares the GPU); 0: none
};

// The node arbiter's liveness, one per container. The arbiter writes
// heartbeat_us (its CLOCK_MONOTONIC time, microseconds) after each pass
// over the grants; the gate follows grant_ppm only while
// now < heartbeat_us + lease_us, and falls back to share_ppm otherwise.
struct ArbiterState {
  std::atomic<uint64_t> heartbeat_us;  // 0: no arbiter ever wrote here
  std::atomic<uint64_t> lease_us;      // how long a heartbeat stays valid
  std::atomic<uint64_t> passes;        // passes of the arbiter over this region
};

// One process of the container. pid == 0: free.
struct ProcSlot {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> reserved;
  std::atomic<uint64_t> start_time;  // /proc/<pid>/stat field 22: tells PID reuse apart
  std::atomic<uint64_t> used_bytes[kMaxGpus];
};

struct Layout {
  uint64_t magic;          // kMagic, written last when the region is created
  uint32_t version;        // kLayoutVersion
  uint32_t layout_bytes;   // sizeof(Layout) of the creator
  uint32_t max_gpus;       // kMaxGpus
  uint32_t max_procs;      // kMaxProcs
  RobustMutex lock;        // guards slot claim and release, not the counters
  GpuShare gpus[kMaxGpus];
  ProcSlot procs[kMaxProcs];
  ComputeShare compute[kMaxGpus];  // since version 2
  ArbiterState arbiter;            // since version 3
};

// A mapping of a Layout. Move-only; unmaps on destruction unless Leak()ed.
class Region {
 public:
  // Maps `dir`/kFileName, creating it when absent. Creation is race-free: the
  // file is initialized under a temporary name and published with link(), so
  // a reader never sees a half-built region. Fails (and maps nothing) when
  // the file exists with another magic, version or size.
  static Result<Region> OpenDir(const std::string& dir);
  // Maps `dir`/kFileName only when it exists (NOT_FOUND otherwise), checked
  // as OpenDir checks it. For readers outside the container (tessera-node),
  // which must not create a region a process would then find half-set.
  static Result<Region> OpenExisting(const std::string& dir);
  // A fresh region in anonymous shared memory: shared with forked children
  // only. For processes started without a region directory.
  static Result<Region> CreateAnonymous();
  // Checks a mapped region of `size` bytes before any field is trusted.
  static Status Validate(const void* base, size_t size);

  Region(Region&& other) noexcept;
  Region& operator=(Region&& other) noexcept;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region();

  Layout* layout() const { return layout_; }
  // Gives up ownership: the mapping stays for the life of the process.
  Layout* Leak();

 private:
  explicit Region(Layout* layout) : layout_(layout) {}
  Layout* layout_ = nullptr;
};

// Fills a zeroed Layout. The caller publishes it afterwards.
Status InitializeLayout(Layout& layout);

// Start time of `pid` in clock ticks since boot, or 0 when it does not exist.
uint64_t ProcessStartTime(pid_t pid);

// Claims a slot for `pid` (reaping dead processes first). Returns its index;
// ResourceExhausted when all kMaxProcs slots belong to live processes.
Result<int> RegisterProcess(Layout& layout, pid_t pid);
// Gives the slot's usage back to the GPU counters and frees the slot. Only
// the slot's own process (or a reaper, once it is dead) may call this.
void ReleaseProcess(Layout& layout, int slot);
// Releases the slots of processes that no longer exist. Returns how many.
int ReapDeadProcesses(Layout& layout);

// Whether a refusal is counted in GpuShare::oom_refusals: once per
// allocation the application sees fail, so a caller that will try again
// (after reaping dead processes) passes kUncounted first.
enum class Refusal { kCounted, kUncounted };

// Admission for `slot` on `gpu`: charges the container's counter against its
// limit (one CAS), then the slot. False (nothing charged) over the limit.
bool Charge(Layout& layout, int slot, int gpu, uint64_t bytes, Refusal refusal = Refusal::kCounted);
// Charges even past the limit (memory the driver already handed out).
void ForceCharge(Layout& layout, int slot, int gpu, uint64_t bytes);
// Gives back bytes charged by `slot`; saturates at 0.
void Uncharge(Layout& layout, int slot, int gpu, uint64_t bytes);

}  // namespace tessera::region
