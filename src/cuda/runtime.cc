#include "cuda/runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "core/thread_annotations.h"
#include "cuda/driver_table.h"
#include "cuda/launch_gate.h"

namespace tessera::cuda {

constinit std::atomic<int> g_mode{kUninit};
constinit std::atomic<int> g_launch_mode{kUninit};
constinit int g_log_level = kLogWarn;

namespace {

constinit std::atomic<DlsymFn> g_real_dlsym{nullptr};

// Placement storage: constructed by init, never destroyed (no static
// constructor or destructor runs in the host process).
alignas(Config) unsigned char g_config_storage[sizeof(Config)];
alignas(Accountant) unsigned char g_acct_storage[sizeof(Accountant)];
alignas(LaunchGate) unsigned char g_gate_storage[sizeof(LaunchGate)];
constinit LaunchGate* g_gate = nullptr;
constinit Config* g_config = nullptr;
constinit Accountant* g_acct = nullptr;
constinit region::Layout* g_layout = nullptr;
constinit std::atomic<pid_t> g_slot_pid{0};
constinit pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
constinit pthread_once_t g_nvml_once = PTHREAD_ONCE_INIT;
constinit bool g_nvml_ok = false;
// Serialises re-registration in a new process (NewProcess) with fork. A
// plain pthread mutex, not annotated: it guards no field the analysis could
// check (g_slot_pid is an atomic the fast path reads without it), and it is
// taken in one fork handler and released in another.
constinit pthread_mutex_t g_proc_mu = PTHREAD_MUTEX_INITIALIZER;

DlsymFn BootstrapDlsym() {
  DlsymFn f = g_real_dlsym.load(std::memory_order_acquire);
  if (f != nullptr) return f;
  // The public dlsym may be ours; ask for glibc's by version.
  for (const char* v : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"}) {
    f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", v));
    if (f != nullptr) break;
  }
  g_real_dlsym.store(f, std::memory_order_release);
  return f;
}

void* OpenLibrary(const char* soname) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  return h != nullptr ? h : dlopen(soname, RTLD_NOW);
}

void OnExit() {
  if (g_gate != nullptr) g_gate->Stop();
  // Only the process that registered the slot gives it back (a raw-clone
  // child that runs exit handlers must not free its parent's slot).
  if (g_acct != nullptr && g_slot_pid.load() == getpid()) {
    region::ReleaseProcess(*g_layout, g_acct->slot());
  }
}

// Every lock of the library is held across fork(), in one order (process
// lock, gate, accountant), so the child, which has only the forking thread,
// finds them all free. No path takes them in another order. Not analysed:
// the locks PrepareFork takes are released by the AfterFork handlers.
void PrepareFork() TESSERA_NO_THREAD_SAFETY_ANALYSIS {
  pthread_mutex_lock(&g_proc_mu);
  if (g_gate != nullptr) g_gate->PrepareFork();
  if (g_acct != nullptr) g_acct->PrepareFork();
}
void ParentAfterFork() TESSERA_NO_THREAD_SAFETY_ANALYSIS {
  if (g_acct != nullptr) g_acct->AfterFork();
  if (g_gate != nullptr) g_gate->ParentAfterFork();
  pthread_mutex_unlock(&g_proc_mu);
}
void ChildAfterFork() TESSERA_NO_THREAD_SAFETY_ANALYSIS {
  if (g_acct != nullptr) g_acct->AfterFork();
  if (g_gate != nullptr) g_gate->ChildAfterFork();
  pthread_mutex_unlock(&g_proc_mu);
}

// The gate's clock: CLOCK_MONOTONIC, or the fake driver's virtual clock
// under TESSERA_TEST_CLOCK=fake_cuda (tests only).
GateClock ChooseClock(const Config& cfg, void* libcuda) {
  if (!cfg.fake_clock) return MonotonicClock();
  auto now = reinterpret_cast<uint64_t (*)()>(
      libcuda != nullptr ? RealDlsym(libcuda, "tessera_fake_cuda_now_us") : nullptr);
  auto sleep = reinterpret_cast<void (*)(uint64_t)>(
      libcuda != nullptr ? RealDlsym(libcuda, "tessera_fake_cuda_sleep_until_us") : nullptr);
  if (now == nullptr || sleep == nullptr) {
    TESSERA_LOG(kLogWarn, "TESSERA_TEST_CLOCK=fake_cuda without the fake driver; real clock");
    return MonotonicClock();
  }
  return GateClock{now, sleep};
}

// Takes the region: the node agent's directory, else an anonymous one. Limits
// from the environment fill GPUs the region leaves unlimited.
region::Layout* AttachRegion(const Config& cfg) {
  region::Layout* layout = nullptr;
  if (!cfg.region_dir.empty()) {
    Result<region::Region> r = region::Region::OpenDir(cfg.region_dir);
    if (r.ok()) {
      layout = r->Leak();
    } else {
      TESSERA_LOG(kLogError, "region %s unusable (%s); limits apply to this process tree only",
                  cfg.region_dir.c_str(), r.status().ToString().c_str());
    }
  }
  if (layout == nullptr && (cfg.AnyLimit() || cfg.AnyComputeLimit())) {
    Result<region::Region> r = region::Region::CreateAnonymous();
    if (!r.ok()) {
      TESSERA_LOG(kLogError, "no region (%s); not enforcing", r.status().ToString().c_str());
      return nullptr;
    }
    layout = r->Leak();
  }
  if (layout == nullptr) return nullptr;
  for (int g = 0; g < region::kMaxGpus; ++g) {
    uint64_t want = cfg.limit_bytes[g];
    uint64_t have = 0;
    if (want != 0 && !layout->gpus[g].limit_bytes.compare_exchange_strong(have, want) &&
        have != want) {
      TESSERA_LOG(kLogInfo, "GPU %d: region limit %llu bytes wins over the environment's %llu",
                  g, static_cast<unsigned long long>(have), static_cast<unsigned long long>(want));
    }
  }
  for (int g = 0; g < region::kMaxGpus; ++g) {
    ComputeBucket::Configure(layout->compute[g], cfg.core_ppm[g], cfg.core_window_us,
                             cfg.core_hard ? region::kPolicyHard : region::kPolicyShare);
  }
  return layout;
}

// Maps the busy board of each GPU with a compute share, from
// TESSERA_GPU_BOARD_DIR (config.h); a board that cannot be used is logged
// and that GPU's launches are charged as measured.
void AttachBoards(const Config& cfg, region::Layout& layout, LaunchGate& gate) {
  if (cfg.board_dir.empty()) return;
  for (int g = 0; g < region::kMaxGpus; ++g) {
    if (!ComputeBucket(layout.compute[g]).Limited()) continue;
    std::string name;
    if (cfg.has_uuid[g]) {
      char text[kGpuUuidChars + 1];
      FormatGpuUuid(cfg.uuid[g], text);
      name = text;
    } else {
      name = "gpu" + std::to_string(g);
    }
    const std::string path = cfg.board_dir + "/" + name + ".board";
    Result<region::Board*> b = region::OpenBoard(path);
    if (!b.ok()) {
      TESSERA_LOG(kLogError, "GPU %d: busy board unusable (%s); its launches are charged as measured", g,
                  b.status().ToString().c_str());
      continue;
    }
    gate.AttachBoard(g, *b);
  }
}

void InitOnce() {
  std::vector<std::string> problems;
  g_config = new (g_config_storage)
      Config(ParseConfig([](const char* n) { return secure_getenv(n); }, &problems));
  g_log_level = g_config->log_level;
  for (const std::string& p : problems) TESSERA_LOG(kLogWarn, "%s", p.c_str());

  void* libcuda = OpenLibrary("libcuda.so.1");
  int missing = ResolveDriver(libcuda, &RealDlsym);
  if (missing != 0) TESSERA_LOG(kLogDebug, "%d driver functions absent (stubs return NOT_FOUND)", missing);

  int mode = kPassThrough;
  int launch_mode = kPassThrough;
  if (!g_config->disabled) {
    region::Layout* layout = AttachRegion(*g_config);
    bool limited = false, compute_limited = false;
    for (int g = 0; layout != nullptr && g < region::kMaxGpus; ++g) {
      limited |= layout->gpus[g].limit_bytes.load() != 0;
      compute_limited |= ComputeBucket(layout->compute[g]).Limited();
    }
    if (limited || compute_limited) {
      Result<int> slot = region::RegisterProcess(*layout, getpid());
      if (!slot.ok()) {
        TESSERA_LOG(kLogError, "%s; not enforcing", slot.status().ToString().c_str());
      } else {
        g_layout = layout;
        g_acct = new (g_acct_storage) Accountant(layout, *slot);
        g_slot_pid.store(getpid());
        if (compute_limited) {
          g_gate = new (g_gate_storage) LaunchGate(layout, ChooseClock(*g_config, libcuda));
          AttachBoards(*g_config, *layout, *g_gate);
          launch_mode = kEnforce;
        }
        pthread_atfork(&PrepareFork, &ParentAfterFork, &ChildAfterFork);
        std::atexit(&OnExit);
        mode = kEnforce;
      }
    }
  }
  TESSERA_LOG(kLogInfo, "%s%s", mode == kEnforce ? "enforcing limits" : "pass-through",
              launch_mode == kEnforce ? ", launches gated" : "");
  g_launch_mode.store(launch_mode, std::memory_order_release);
  g_mode.store(mode, std::memory_order_release);
}

void NvmlInitOnce() {
  g_nvml_ok = ResolveNvml(OpenLibrary("libnvidia-ml.so.1"), &RealDlsym) == 0;
}

// Cold: the pid changed since the slot was taken (fork or raw clone).
[[gnu::cold, gnu::noinline]] void NewProcess(pid_t pid) {
  pthread_mutex_lock(&g_proc_mu);
  if (g_slot_pid.load() != pid) {
    Result<int> slot = region::RegisterProcess(*g_layout, pid);
    if (slot.ok()) {
      g_acct->ResetForNewProcess(*slot);
    } else {
      // Keep charging the inherited slot rather than not at all.
      TESSERA_LOG(kLogError, "child %d: %s", pid, slot.status().ToString().c_str());
      g_acct->ResetForNewProcess(g_acct->slot());
    }
    g_slot_pid.store(pid);
  }
  pthread_mutex_unlock(&g_proc_mu);
}

}  // namespace

int EnsureInit() {
  pthread_once(&g_init_once, &InitOnce);
  return g_mode.load(std::memory_order_acquire);
}

bool EnsureNvml() {
  EnsureInit();
  pthread_once(&g_nvml_once, &NvmlInitOnce);
  return g_nvml_ok;
}

Accountant* CurrentAccountant() {
  if (g_mode.load(std::memory_order_acquire) != kEnforce) return nullptr;
  const pid_t pid = getpid();
  if (pid != g_slot_pid.load(std::memory_order_acquire)) NewProcess(pid);
  return g_acct;
}

const Config& CurrentConfig() { return *g_config; }

LaunchGate* CurrentGate() {
  return g_launch_mode.load(std::memory_order_acquire) == kEnforce ? g_gate : nullptr;
}

int CurrentDevice() {
  CUdevice dev = -1;
  if (TESSERA_REAL(cuCtxGetDevice)(&dev) != CUDA_SUCCESS) return -1;
  return dev;
}

bool StreamCapturing(CUstream stream, bool ptsz) {
  if (stream == nullptr) stream = ptsz ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = TESSERA_REAL(cuStreamIsCapturing)(stream, &status);
  if (r == CUDA_ERROR_NOT_FOUND) return false;  // our stub: no capture in this driver
  return r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void RefreshPool(Accountant& acct, uint64_t pool) {
  const int gpu = acct.PoolGpu(pool);
  if (gpu < 0) return;
  cuuint64_t reserved = 0;
  if (TESSERA_REAL(cuMemPoolGetAttribute)(reinterpret_cast<CUmemoryPool>(pool),
                                         CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                         &reserved) == CUDA_SUCCESS) {
    acct.SetPoolReserved(pool, gpu, reserved, /*force=*/true);
  }
}

void RefreshReserves(Accountant& acct, Gpu gpu) {
  for (uint64_t pool : acct.Pools()) RefreshPool(acct, pool);
  RefreshGraph(acct, gpu);
}

void RefreshGraph(Accountant& acct, Gpu gpu) {
  cuuint64_t graph = 0;
  if (ValidGpu(gpu.index) && gpu.ordinal >= 0 &&
      TESSERA_REAL(cuDeviceGetGraphMemAttribute)(gpu.ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
                                                 &graph) == CUDA_SUCCESS) {
    acct.SetGraphReserved(gpu.index, graph);
  }
}

namespace {

// Before a refusal stands: hands back what dead processes of the container
// held and re-reads pool reserves (the driver may have released memory).
void Reclaim(Accountant& acct, Gpu gpu) {
  region::ReapDeadProcesses(*g_layout);
  RefreshReserves(acct, gpu);
}

}  // namespace

CUresult AdmitContext(Accountant& acct, Gpu gpu, uint64_t bytes, const char* api) {
  if (acct.OpenContext(gpu.index, bytes, region::Refusal::kUncounted)) return CUDA_SUCCESS;
  Reclaim(acct, gpu);
  if (acct.OpenContext(gpu.index, bytes)) return CUDA_SUCCESS;
  TESSERA_LOG(kLogWarn,
              "%s: no context on GPU %d (CUDA device %d): its %llu MiB (TESSERA_GPU_CONTEXT_MIB) do "
              "not fit the share (used %llu of %llu bytes)",
              api, gpu.index, gpu.ordinal, static_cast<unsigned long long>(bytes >> 20),
              static_cast<unsigned long long>(acct.Used(gpu.index)),
              static_cast<unsigned long long>(acct.Limit(gpu.index)));
  return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult Admit(Accountant& acct, Gpu gpu, uint64_t bytes, const char* api) {
  // The first refusal is not counted: the retry below decides.
  if (acct.Reserve(gpu.index, bytes, region::Refusal::kUncounted)) return CUDA_SUCCESS;
  Reclaim(acct, gpu);
  if (acct.Reserve(gpu.index, bytes)) return CUDA_SUCCESS;
  TESSERA_LOG(kLogInfo, "%s: %llu bytes refused on GPU %d (CUDA device %d; used %llu of %llu)", api,
              static_cast<unsigned long long>(bytes), gpu.index, gpu.ordinal,
              static_cast<unsigned long long>(acct.Used(gpu.index)),
              static_cast<unsigned long long>(acct.Limit(gpu.index)));
  return CUDA_ERROR_OUT_OF_MEMORY;
}

DlsymFn RealDlsymFn() { return BootstrapDlsym(); }

void* RealDlsym(void* handle, const char* name) {
  DlsymFn f = BootstrapDlsym();
  return f != nullptr ? f(handle, name) : nullptr;
}

void LogWrite(int level, const char* fmt, ...) {
  static constexpr const char* kLevel[] = {"error", "warning", "info", "debug"};
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), "tessera-cuda[%d] %s: ", static_cast<int>(getpid()),
                        kLevel[level < 0 ? 0 : (level > 3 ? 3 : level)]);
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : std::min<size_t>(m, sizeof(buf) - n - 2));
  buf[len++] = '\n';
  (void)!write(STDERR_FILENO, buf, len);
}

}  // namespace tessera::cuda
