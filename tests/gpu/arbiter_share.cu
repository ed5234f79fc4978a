// Real-GPU checks of tessera-node's compute arbiter (priorities, burst,
// work-conserving shares) and of MPS as tessera-node configures it. Each
// mode runs its saturating processes itself (the program re-runs itself as
// a worker, TESSERA_GPU_CHILD=1), prints one RESULT line and exits 0 (pass),
// 1 (fail) or 77 (skip, with a SKIP: line).
//   gpu_arbiter_share MODE   MODE: priority_hold | burst_lend_reclaim |
//                                  node_arbiter_ratio | mps
// Environment: TESSERA_CUDA_LIB names libtessera-cuda.so and
// TESSERA_GPU_ARBITER the gpu_arbiter program (tessera-node's ArbiterLoop
// over containers given on its command line; skip when it was not built).
// Every worker has GPU 0 through the library with its own region
// (TESSERA_REGION_DIR), one busy-board folder for all (TESSERA_GPU_BOARD_DIR),
// policy `share` and a static share; the arbiter gets
// the same containers with their priority and burst ceiling, as
// tessera-node's Allocate records would give them. Throughput is ~1 ms
// fixed-work kernels completed (Chain), against the same loop alone without the library
// (the unlimited baseline, measured first in each mode).
//
// priority_hold: a high-priority container (share 50 %) with a duty cycle,
//   5 x (work: ~200 ms of kernels, then 400 ms asleep), alone and then beside
//   a saturating low-priority one (share 50 %); arbiter interval 1 ms (the
//   --arbiter-interval-ms=1 the docs give for tight holds), idle after 50 ms
//   (the default). Pass: the high one's work phase (mean of cycles 2-5)
//   takes <= 1.03 x its time alone, and the low one's GPU time is >= 80 % of
//   the time the high one leaves the GPU idle (wall time of the high one's
//   cycles minus its work phases; the low one is still held for the 50 ms
//   idle-after of each sleep, so ~87 % is the most it can get).
// burst_lend_reclaim: container A (share 30 %, ceiling 60 %) saturates
//   alone for 2 s while B (share 70 %, no ceiling) is started but idle, then
//   B saturates for 2 s; tessera-node's defaults (interval 10 ms, idle after
//   50 ms). Pass: A alone gets its ceiling, 0.60 +- 0.05 of unlimited (it
//   borrows ~30 pp above its share and no more); once B runs A is cut back
//   to <= 0.35 (share + 5 pp, over B's last 1.5 s); and the reclaim latency,
//   from B's first launch to the end of the first 100 ms window (the gate's
//   refill window) in which B gets >= 90 % of its steady throughput, is
//   <= 300 ms. B's steady throughput against its share is reported
//   (node_arbiter_ratio checks the split).
// node_arbiter_ratio: two saturating containers with shares 30/70 and then
//   10/90 under the arbiter (defaults). Pass: the ratio of their throughputs
//   within +-10 % of the asked ratio, for each pair.
// mps: run by run.sh's builtin:mps, which starts `nvidia-cuda-mps-control
//   -d` with its pipe and log folders in a temporary folder (no GPU setting
//   is changed) and always quits it. Clients get the variables tessera-node's
//   MpsEnv (src/node/mps.cc) sets: CUDA_MPS_PIPE_DIRECTORY,
//   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
//   ("0=<MiB>M"). Throughput is an FMA-bound kernel of kFmaBlocks short
//   blocks (SM-bound, unlike a chain of one block per SM, so that a thread
//   percentage shows; SM counts round the percentages by about one SM). The
//   grid is fixed: a client with a thread percentage sees only its SMs in
//   cudaDevAttrMultiProcessorCount (38 and 92 of the H200's 132 at 30 and
//   70 %), so a grid sized from it does proportionally less work per kernel
//   and every client completes kernels at the same rate (the first H200 run).
//   Baseline: one client without a percentage; two clients without one at
//   once (reported: together about one alone); then clients at 30 % and 70 %
//   at once. Pass: the ratio of their throughputs within +-10 % of 30/70 and
//   neither above its percentage + 5 pp of the baseline (a limit, not only a
//   proportion); and a client with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M
//   is refused an allocation before it holds more than 1024 MiB, after at
//   least 256 MiB (the limit covers the client's context too: 448 MiB were
//   allocatable on the H200, whose bare context takes 518 MiB).
//   Skip without CUDA_MPS_PIPE_DIRECTORY (not run through run.sh).
//
// TESSERA_GPU_FAKE_KPS=N: the workers pretend, without CUDA, that kernels
// complete at N per second (the orchestration and the arithmetic checked
// without a GPU; the numbers then mean nothing).
//
// Every child is killed (SIGKILL) when a bounded wait ends, and dies with
// this process (PR_SET_PDEATHSIG).
#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "result_line.h"
#include "test_kernels.cuh"

namespace {

// FMA-bound: throughput follows the SMs a context may use.
__global__ void Fma(int iters, float* sink) {
  float a0 = threadIdx.x * 1e-3f, a1 = a0 + 1.0f, a2 = a0 + 2.0f, a3 = a0 + 3.0f;
  for (int i = 0; i < iters; ++i) {
    a0 = fmaf(a0, 0.9999f, 0.5f);
    a1 = fmaf(a1, 0.9999f, 0.5f);
    a2 = fmaf(a2, 0.9999f, 0.5f);
    a3 = fmaf(a3, 0.9999f, 0.5f);
  }
  if (a0 + a1 + a2 + a3 == -1.0f) *sink = a0;
}

double NowReal() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void SleepUntil(double t) {
  for (double now = NowReal(); now < t; now = NowReal()) {
    const double d = std::min(t - now, 1.0);
    timespec ts{static_cast<time_t>(d), static_cast<long>((d - static_cast<time_t>(d)) * 1e9)};
    nanosleep(&ts, nullptr);
  }
}

double EnvDouble(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atof(v) : fallback;
}

// ------------------------------------------------------------------ worker
// worker KIND SECONDS WORK_KERNELS SLEEP_MS CYCLES
// KIND chain | fma. TESSERA_GPU_BATCH launches (default 4) between two
// synchronizations. Starts at TESSERA_GPU_START_AT (CLOCK_REALTIME seconds;
// now when unset) plus TESSERA_GPU_DELAY_S. WORK_KERNELS 0: saturates for
// SECONDS, printing "s T N" at every sync (T: seconds since START_AT, N:
// kernels completed). Else CYCLES x (WORK_KERNELS kernels, then SLEEP_MS),
// printing "p T D" per work phase (its start and duration).
int FakeWorker(double kps, double seconds, long work, long sleep_ms, long cycles);

// Blocks of the fma kernel: fixed, not from the SM count the client sees.
constexpr int kFmaBlocks = 8192;

int RunWorker(const std::string& kind, double seconds, long work, long sleep_ms, long cycles) {
  if (const char* kps = std::getenv("TESSERA_GPU_FAKE_KPS")) return FakeWorker(std::atof(kps), seconds, work, sleep_ms, cycles);
  int sms = 0, khz = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  const long long chain_iters = khz / 4;  // ~1 ms: a multiply-add's latency is ~4 cycles
  float* sink = nullptr;
  CUDA_OK(cudaMalloc(&sink, sizeof(float)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto launch = [&] {
    if (kind == "fma") {
      Fma<<<kFmaBlocks, 256, 0, s>>>(4096, sink);
    } else {
      Chain<<<sms, 128, 0, s>>>(chain_iters, nullptr, sink);
    }
    CUDA_OK(cudaGetLastError());
  };
  for (int i = 0; i < 10; ++i) launch();
  CUDA_OK(cudaStreamSynchronize(s));
  if (kind == "fma") {
    // One kernel's GPU time, for the record (mps: what a client's kernel
    // takes with its thread percentage).
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    CUDA_OK(cudaEventRecord(a, s));
    launch();
    CUDA_OK(cudaEventRecord(b, s));
    CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    std::printf("kernel %.3f ms, %d SMs seen\n", ms, sms);
  }
  const double origin = EnvDouble("TESSERA_GPU_START_AT", NowReal());
  const double start = origin + EnvDouble("TESSERA_GPU_DELAY_S", 0);
  if (NowReal() > start + 0.05) std::printf("late %.3f\n", NowReal() - start);
  SleepUntil(start);
  if (work == 0) {
    const long batch = std::max(1L, std::lround(EnvDouble("TESSERA_GPU_BATCH", 4)));
    unsigned long long n = 0;
    while (NowReal() < start + seconds) {
      for (long i = 0; i < batch; ++i) launch();
      CUDA_OK(cudaStreamSynchronize(s));
      n += batch;
      std::printf("s %.6f %llu\n", NowReal() - origin, n);
    }
  } else {
    for (long c = 0; c < cycles; ++c) {
      const double t = NowReal();
      for (long i = 0; i < work; ++i) launch();
      CUDA_OK(cudaStreamSynchronize(s));
      std::printf("p %.6f %.6f\n", t - origin, NowReal() - t);
      std::fflush(stdout);
      SleepUntil(NowReal() + sleep_ms / 1000.0);
    }
  }
  std::printf("done\n");
  return 0;
}

// The same output without CUDA, as if kernels completed at `kps` per second.
int FakeWorker(double kps, double seconds, long work, long sleep_ms, long cycles) {
  const double origin = EnvDouble("TESSERA_GPU_START_AT", NowReal());
  const double start = origin + EnvDouble("TESSERA_GPU_DELAY_S", 0);
  SleepUntil(start);
  if (work == 0) {
    for (double now = NowReal(); now < start + seconds; now = NowReal()) {
      SleepUntil(now + 0.004);
      std::printf("s %.6f %.0f\n", NowReal() - origin, (NowReal() - start) * kps);
    }
  } else {
    for (long c = 0; c < cycles; ++c) {
      const double t = NowReal();
      SleepUntil(t + work / kps);
      std::printf("p %.6f %.6f\n", t - origin, NowReal() - t);
      SleepUntil(NowReal() + sleep_ms / 1000.0);
    }
  }
  std::printf("done\n");
  return 0;
}

// mps_mem: allocates 64 MiB blocks until refused or 4 GiB are held; prints
// "allocated_mib N" and "refused 0|1".
int MpsMem() {
  constexpr size_t kBlock = 64ull << 20;
  size_t held = 0;
  bool refused = false;
  while (held < (4ull << 30)) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, kBlock);
    if (e != cudaSuccess) {
      std::printf("cudaMalloc of 64 MiB after %zu MiB: %s\n", held >> 20, cudaGetErrorString(e));
      refused = e == cudaErrorMemoryAllocation;
      break;
    }
    held += kBlock;
  }
  std::printf("allocated_mib %zu\nrefused %d\n", held >> 20, refused ? 1 : 0);
  return 0;
}

// ------------------------------------------------------------------ parent
std::vector<pid_t> g_children;

void KillChildren(int) {
  for (pid_t p : g_children) kill(p, SIGKILL);
  _exit(1);
}

std::string Self() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  return self;
}

// Starts `args` with `env` (KEY=VALUE; an empty VALUE unsets) added, output
// (stdout and stderr) to `out`, stdin /dev/null.
pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, const std::string& out) {
  const pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) g_children.push_back(pid);
    return pid;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (const std::string& kv : env) {
    const size_t eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (v.empty()) {
      unsetenv(k.c_str());
    } else {
      setenv(k.c_str(), v.c_str(), 1);
    }
  }
  const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int in = open("/dev/null", O_RDONLY);
  if (fd < 0 || in < 0) _exit(127);
  dup2(fd, 1);
  dup2(fd, 2);
  dup2(in, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// Waits for `pids` until `deadline` (CLOCK_REALTIME); kills what is left.
// True when every one exited 0 in time.
bool WaitAll(const std::vector<pid_t>& pids, double deadline) {
  const double started = NowReal();
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    pid_t r = 0;
    while ((r = waitpid(p, &st, WNOHANG)) == 0 && NowReal() < deadline) usleep(5000);
    if (r == 0) {
      std::printf("a child (pid %d) did not finish within its deadline (%.1f s); killed\n", p,
                  deadline - started);
      kill(p, SIGKILL);
      waitpid(p, &st, 0);
      ok = false;
    } else if (r < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      ok = false;
    }
    g_children.erase(std::remove(g_children.begin(), g_children.end(), p), g_children.end());
  }
  return ok;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

// Every line but a worker's samples ("s T N", hundreds a second).
void PrintPrefixed(const std::string& prefix, const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("s ", 0) != 0) std::printf("%s%s\n", prefix.c_str(), line.c_str());
  }
}

// A worker's output.
struct Run {
  std::vector<std::pair<double, double>> samples;  // (t, kernels completed)
  std::vector<std::pair<double, double>> phases;   // (start, duration)
  std::string text;

  // Kernels completed by time t (linear between samples; 0 before).
  double At(double t) const {
    double pt = 0, pn = 0;
    bool first = true;
    for (const auto& [st, sn] : samples) {
      if (t <= st) {
        if (first) return 0;
        return pn + (sn - pn) * (t - pt) / (st - pt);
      }
      pt = st, pn = sn, first = false;
    }
    return pn;
  }
  // Kernels per second over [a, b].
  double Rate(double a, double b) const { return (At(b) - At(a)) / (b - a); }
};

Run Parse(const std::string& path) {
  Run r;
  r.text = ReadFile(path);
  std::istringstream in(r.text);
  for (std::string line; std::getline(in, line);) {
    double a = 0, b = 0;
    if (std::sscanf(line.c_str(), "s %lf %lf", &a, &b) == 2) r.samples.emplace_back(a, b);
    if (std::sscanf(line.c_str(), "p %lf %lf", &a, &b) == 2) r.phases.emplace_back(a, b);
  }
  return r;
}

struct Worker {
  std::string name;
  std::vector<std::string> env;
  std::string kind = "chain";
  double seconds = 0;
  double delay = 0;
  long work = 0, sleep_ms = 0, cycles = 0;
};

class Test {
 public:
  explicit Test(std::string dir) : dir_(std::move(dir)) {}

  // Runs `workers` at once from now + lead seconds, beside gpu_arbiter with
  // `arbiter_args` (none: no arbiter). False (outputs printed) on failure.
  bool RunAll(const std::vector<Worker>& workers, const std::vector<std::string>& arbiter_args,
              std::vector<Run>* runs, double lead = 2.5) {
    const int n = ++round_;
    pid_t arbiter = -1;
    const std::string arbiter_out = dir_ + "/out.arbiter." + std::to_string(n);
    if (!arbiter_args.empty()) {
      // --seconds: its own end, should this process die first.
      std::vector<std::string> args = {std::getenv("TESSERA_GPU_ARBITER"), "--trace", "--seconds", "60"};
      args.insert(args.end(), arbiter_args.begin(), arbiter_args.end());
      arbiter = Spawn(args, {}, arbiter_out);
    }
    const double start_at = NowReal() + lead;
    double end = start_at;
    std::vector<pid_t> pids;
    std::vector<std::string> outs;
    for (const Worker& w : workers) {
      std::vector<std::string> env = w.env;
      env.push_back("TESSERA_GPU_CHILD=1");
      if (lead > 0) env.push_back("TESSERA_GPU_START_AT=" + std::to_string(start_at));
      env.push_back("TESSERA_GPU_DELAY_S=" + std::to_string(w.delay));
      const std::string out = dir_ + "/out." + w.name + "." + std::to_string(n);
      outs.push_back(out);
      pids.push_back(Spawn({Self(), "worker", w.kind, std::to_string(w.seconds), std::to_string(w.work),
                            std::to_string(w.sleep_ms), std::to_string(w.cycles)},
                           env, out));
      end = std::max(end, start_at + w.delay + w.seconds + w.cycles * 2.0);
    }
    const bool ok = WaitAll(pids, end + 10.0);
    if (arbiter > 0) {
      kill(arbiter, SIGTERM);  // the arbiter prints its stats and exits
      WaitAll({arbiter}, NowReal() + 3.0);
      PrintPrefixed("arbiter: ", ReadFile(arbiter_out));
    }
    runs->clear();
    for (size_t i = 0; i < workers.size(); ++i) {
      runs->push_back(Parse(outs[i]));
      // Failed, late or complaining: the whole output.
      const std::string& text = runs->back().text;
      if (!ok || text.find("late ") != std::string::npos || text.find("cuda") != std::string::npos) {
        PrintPrefixed(workers[i].name + ": ", text);
      }
    }
    if (!ok) std::printf("FAIL: a worker failed or did not finish (outputs above)\n");
    return ok;
  }

  // Kernels per second of one worker alone, saturating for 1 s.
  double Baseline(const std::vector<std::string>& env, const std::string& kind = "chain") {
    std::vector<Run> runs;
    Worker w{"baseline", env, kind, 1.0};
    if (!RunAll({w}, {}, &runs, 0.0) || runs[0].samples.empty()) return -1;
    return runs[0].samples.back().second / runs[0].samples.back().first;
  }

  // A fresh region folder.
  std::string Region(const std::string& name) {
    const std::string d = dir_ + "/region." + name + "." + std::to_string(round_ + 1);
    mkdir(d.c_str(), 0755);
    return d;
  }

 private:
  std::string dir_;
  int round_ = 0;
};

// Every worker on the GPU shares one busy-board folder (the test's
// temporary folder, TESSERA_GPU_TMP), as every container on a node would.
// The containers' policy: `share`, or TESSERA_GPU_POLICY (e.g. `hard`, to
// tell the policy's part in a miss from the arbiter's).
std::string Policy() {
  const char* p = std::getenv("TESSERA_GPU_POLICY");
  return p != nullptr && *p != '\0' ? p : "share";
}

std::vector<std::string> LibEnv(const std::string& region, int share) {
  return {std::string("LD_PRELOAD=") + std::getenv("TESSERA_CUDA_LIB"), "TESSERA_REGION_DIR=" + region,
          "TESSERA_GPU_CORE_PERCENT_0=" + std::to_string(share), "TESSERA_GPU_CORE_POLICY=" + Policy(),
          std::string("TESSERA_GPU_BOARD_DIR=") + std::getenv("TESSERA_GPU_TMP")};
}

// key,region_dir,gpu,share%,limit%,policy,priority
std::string Container(const std::string& key, const std::string& dir, int share, int limit,
                      const std::string& priority) {
  return key + "," + dir + ",0," + std::to_string(share) + "," + std::to_string(limit) + "," + Policy() + "," +
         priority;
}

const std::vector<std::string> kNoLib = {"LD_PRELOAD="};

int PriorityHold(Test& t, ResultLine& r) {
  const double base = t.Baseline(kNoLib);
  if (base <= 0) return 1;
  const long work = std::max(20L, std::lround(0.2 * base));
  const long sleep_ms = 400, cycles = 5;
  const double hi_span = cycles * (work / base + sleep_ms / 1000.0);
  std::vector<double> mean(2, 0);
  double low_share_of_idle = 0;
  for (int beside = 0; beside < 2; ++beside) {
    const std::string hi = t.Region("hi"), lo = t.Region("lo");
    std::vector<Worker> ws = {{"hi", LibEnv(hi, 50), "chain", 0, 0.3, work, sleep_ms, cycles}};
    if (beside) ws.push_back({"lo", LibEnv(lo, 50), "chain", 0.3 + hi_span * 1.2 + 0.3});
    std::vector<Run> runs;
    if (!t.RunAll(ws, {"--interval-ms", "1", "--idle-after-ms", "50",
                       Container("hi", hi, 50, 0, "high"), Container("lo", lo, 50, 0, "low")},
                  &runs)) {
      return 1;
    }
    const auto& ph = runs[0].phases;
    if (ph.size() != static_cast<size_t>(cycles)) {
      std::printf("FAIL: the high-priority worker ran %zu of %ld cycles\n", ph.size(), cycles);
      return 1;
    }
    for (size_t i = 1; i < ph.size(); ++i) mean[beside] += ph[i].second / (ph.size() - 1);
    std::printf("%s: high-priority work phase (%ld kernels) %.1f ms (cycles:", beside ? "beside low" : "alone",
                work, mean[beside] * 1000);
    for (const auto& p : ph) std::printf(" %.1f", p.second * 1000);
    std::printf(")\n");
    if (beside) {
      const double w0 = ph.front().first, w1 = ph.back().first + ph.back().second;
      double busy = 0;
      for (const auto& p : ph) busy += p.second;
      const double idle = (w1 - w0) - busy;
      const double low_gpu = (runs[1].At(w1) - runs[1].At(w0)) / base;
      low_share_of_idle = idle > 0 ? low_gpu / idle : 0;
      std::printf("low priority: %.3f s of GPU time in the %.3f s the high one left idle (%.3f)\n", low_gpu, idle,
                  low_share_of_idle);
      r.Add("idle_s", idle);
      r.Add("low_gpu_s", low_gpu);
    }
  }
  const double slowdown = mean[1] / mean[0];
  const bool ok = slowdown <= 1.03 && low_share_of_idle >= 0.80;
  std::printf("high priority slowdown beside low: %.3f (pass <= 1.03); low's share of idle time %.3f (pass >= "
              "0.80)  %s\n",
              slowdown, low_share_of_idle, ok ? "ok" : "OFF");
  r.Add("unlimited_kernels_per_s", base);
  r.Add("work_kernels", static_cast<double>(work));
  r.Add("high_alone_ms", mean[0] * 1000);
  r.Add("high_beside_low_ms", mean[1] * 1000);
  r.Add("high_slowdown", slowdown);
  r.Add("low_share_of_idle", low_share_of_idle);
  if (!ok) std::printf("FAIL: priority hold\n");
  return ok ? 0 : 1;
}

int BurstLendReclaim(Test& t, ResultLine& r) {
  const double base = t.Baseline(kNoLib);
  if (base <= 0) return 1;
  const std::string a = t.Region("a"), b = t.Region("b");
  std::vector<Run> runs;
  if (!t.RunAll({{"a", LibEnv(a, 30), "chain", 4.0}, {"b", LibEnv(b, 70), "chain", 2.0, 2.0}},
                {Container("a", a, 30, 60, "normal"), Container("b", b, 70, 0, "normal")},
                &runs)) {
    return 1;
  }
  const Run &ra = runs[0], &rb = runs[1];
  const double lend = ra.Rate(0.5, 2.0) / base;
  const double a_after = ra.Rate(2.5, 4.0) / base;
  const double b_steady = rb.Rate(2.5, 4.0) / base;
  // The end of the first 100 ms window in which B gets 90 % of its steady
  // throughput (and, for the record, 90 % of its share).
  double reclaim = std::numeric_limits<double>::infinity(), reclaim_share = reclaim;
  for (const auto& [ts, n] : rb.samples) {
    if (ts < 2.1) continue;
    const double got = rb.Rate(ts - 0.1, ts) / base;
    if (got >= 0.9 * b_steady && ts - 2.0 < reclaim) reclaim = ts - 2.0;
    if (got >= 0.9 * 0.70 && ts - 2.0 < reclaim_share) reclaim_share = ts - 2.0;
  }
  const bool lend_ok = lend >= 0.55 && lend <= 0.65;
  const bool cut_ok = a_after <= 0.35;
  const bool reclaim_ok = reclaim <= 0.3;
  std::printf("A alone (share 30 %%, ceiling 60 %%): %.3f of unlimited  %s\n", lend, lend_ok ? "ok" : "OFF");
  std::printf("A beside B: %.3f (pass <= 0.35)  %s; B (share 70 %%): %.3f\n", a_after, cut_ok ? "ok" : "OFF",
              b_steady);
  std::printf("reclaim: B at 90 %% of its steady throughput %.0f ms after its start (pass <= 300)  %s; at 90 %% of "
              "its share: %.0f ms\n",
              reclaim * 1000, reclaim_ok ? "ok" : "OFF", reclaim_share * 1000);
  r.Add("unlimited_kernels_per_s", base);
  r.Add("a_alone", lend);
  r.Add("a_borrowed_pp", (lend - 0.30) * 100);
  r.Add("a_beside_b", a_after);
  r.Add("b_beside_a", b_steady);
  r.Add("b_of_share", b_steady / 0.70);
  r.Add("reclaim_ms", reclaim * 1000);
  r.Add("reclaim_to_share_ms", reclaim_share * 1000);
  const bool ok = lend_ok && cut_ok && reclaim_ok;
  if (!ok) std::printf("FAIL: burst lend / reclaim\n");
  return ok ? 0 : 1;
}

int NodeArbiterRatio(Test& t, ResultLine& r) {
  const double base = t.Baseline(kNoLib);
  if (base <= 0) return 1;
  r.Add("unlimited_kernels_per_s", base);
  int failures = 0;
  for (auto [sa, sb] : {std::pair{30, 70}, std::pair{10, 90}}) {
    const std::string a = t.Region("a"), b = t.Region("b");
    std::vector<Run> runs;
    if (!t.RunAll({{"a", LibEnv(a, sa), "chain", 3.0}, {"b", LibEnv(b, sb), "chain", 3.0}},
                  {Container("a", a, sa, 0, "normal"), Container("b", b, sb, 0, "normal")},
                  &runs)) {
      return 1;
    }
    const double fa = runs[0].Rate(0.5, 3.0) / base, fb = runs[1].Rate(0.5, 3.0) / base;
    const double asked = static_cast<double>(sa) / sb, got = fb > 0 ? fa / fb : -1;
    const bool ok = got > asked * 0.9 && got < asked * 1.1;
    std::printf("shares %d/%d under the arbiter: %.3f and %.3f of unlimited, ratio %.3f (asked %.3f)  %s\n", sa, sb,
                fa, fb, got, asked, ok ? "ok" : "OFF");
    const std::string tag = std::to_string(sa) + "_" + std::to_string(sb);
    r.Add("share_a_" + tag, fa);
    r.Add("share_b_" + tag, fb);
    r.Add("ratio_" + tag, got);
    failures += ok ? 0 : 1;
  }
  if (failures != 0) std::printf("FAIL: %d ratio(s) off by more than 10 %%\n", failures);
  return failures == 0 ? 0 : 1;
}

int Mps(Test& t, ResultLine& r) {
  if (std::getenv("CUDA_MPS_PIPE_DIRECTORY") == nullptr) {
    std::printf("SKIP: no CUDA_MPS_PIPE_DIRECTORY: run through tests/gpu/run.sh (builtin:mps starts the daemon)\n");
    return 77;
  }
  // MpsEnv's variables (src/node/mps.cc), the pipe folder inherited.
  const std::vector<std::string> none = {"LD_PRELOAD=", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=",
                                         "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="};
  const double base = t.Baseline(none, "fma");
  if (base <= 0) return 1;
  std::printf("MPS client alone: %.1f kernels/s\n", base);
  std::vector<Run> runs;
  auto client = [&](int percent) {
    std::vector<std::string> env = none;
    env[1] = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + std::to_string(percent);
    return env;
  };
  // What each client's output says beyond its samples (its kernel's time),
  // and where its samples lie: the first run missed its ratio unexplained.
  auto show = [](const std::string& name, const Run& run) {
    PrintPrefixed(name + ": ", run.text);
    if (!run.samples.empty()) {
      std::printf("%s: %zu samples, first at %.3f s (%.0f kernels), last at %.3f s (%.0f kernels)\n", name.c_str(),
                  run.samples.size(), run.samples.front().first, run.samples.front().second,
                  run.samples.back().first, run.samples.back().second);
    }
  };
  // Two clients without a percentage at once: together at most about one
  // client alone, when the kernel fills the GPU as this test assumes.
  if (!t.RunAll({{"free_a", none, "fma", 3.0}, {"free_b", none, "fma", 3.0}}, {}, &runs)) return 1;
  show("free_a", runs[0]);
  show("free_b", runs[1]);
  const double pair_sum = (runs[0].Rate(0.5, 3.0) + runs[1].Rate(0.5, 3.0)) / base;
  std::printf("two MPS clients without a percentage at once: together %.3f of one client alone\n", pair_sum);
  if (!t.RunAll({{"mps30", client(30), "fma", 3.0}, {"mps70", client(70), "fma", 3.0}}, {}, &runs)) return 1;
  show("mps30", runs[0]);
  show("mps70", runs[1]);
  const double fa = runs[0].Rate(0.5, 3.0) / base, fb = runs[1].Rate(0.5, 3.0) / base;
  const double asked = 30.0 / 70.0, got = fb > 0 ? fa / fb : -1;
  const bool ratio_ok = got > asked * 0.9 && got < asked * 1.1 && fa <= 0.35 && fb <= 0.75;
  std::printf("MPS 30 %% and 70 %% at once: %.3f and %.3f of one client alone, ratio %.3f (asked %.3f)  %s\n", fa,
              fb, got, asked, ratio_ok ? "ok" : "OFF");

  std::vector<std::string> mem = none;
  mem[2] = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M";
  const std::string out = std::string(std::getenv("TESSERA_GPU_TMP")) + "/mps_mem";
  std::vector<std::string> env = mem;
  env.push_back("TESSERA_GPU_CHILD=1");
  const pid_t p = Spawn({Self(), "mps_mem"}, env, out);
  const bool ran = WaitAll({p}, NowReal() + 20.0);
  const std::string text = ReadFile(out);
  PrintPrefixed("mps_mem: ", text);
  long allocated = -1;
  int refused = 0;
  if (const size_t at = text.find("allocated_mib "); at != std::string::npos) {
    std::sscanf(text.c_str() + at, "allocated_mib %ld\nrefused %d", &allocated, &refused);
  }
  const bool mem_ok = ran && refused == 1 && allocated >= 256 && allocated <= 1024;
  std::printf("MPS pinned memory limit 1024 MiB: refused after %ld MiB  %s\n", allocated, mem_ok ? "ok" : "OFF");
  r.Add("mps_alone_kernels_per_s", base);
  r.Add("mps_30", fa);
  r.Add("mps_70", fb);
  r.Add("mps_ratio", got);
  r.Add("mps_sum", fa + fb);
  r.Add("mps_pair_sum_no_percentage", pair_sum);
  r.Add("mps_mem_allocated_mib", static_cast<double>(allocated));
  const bool ok = ratio_ok && mem_ok;
  if (!ok) std::printf("FAIL: MPS %s\n", ratio_ok ? "memory limit" : "thread percentage");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (std::getenv("TESSERA_GPU_CHILD") != nullptr) {
    if (mode == "worker" && argc == 7) {
      return RunWorker(argv[2], std::atof(argv[3]), std::atol(argv[4]), std::atol(argv[5]), std::atol(argv[6]));
    }
    if (mode == "mps_mem") return MpsMem();
    return 2;
  }
  if (mode != "priority_hold" && mode != "burst_lend_reclaim" && mode != "node_arbiter_ratio" && mode != "mps") {
    std::fprintf(stderr, "usage: %s priority_hold|burst_lend_reclaim|node_arbiter_ratio|mps\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* lib = std::getenv("TESSERA_CUDA_LIB");
  const char* arbiter = std::getenv("TESSERA_GPU_ARBITER");
  if (mode != "mps") {
    if (lib == nullptr || access(lib, R_OK) != 0) {
      std::printf("TESSERA_CUDA_LIB must name libtessera-cuda.so\n");
      return 2;
    }
    if (arbiter == nullptr || access(arbiter, X_OK) != 0) {
      std::printf("SKIP: gpu_arbiter not built (TESSERA_GPU_ARBITER=%s): the standalone tree builds it only when the "
                  "nlohmann_json headers are found\n",
                  arbiter != nullptr ? arbiter : "");
      return 77;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = KillChildren;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  char tmpl[] = "/tmp/tessera-arbiter-share.XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (dir == nullptr) return 2;
  setenv("TESSERA_GPU_TMP", dir, 1);
  Test t(dir);
  ResultLine r;
  int rc = 1;
  if (mode == "priority_hold") rc = PriorityHold(t, r);
  if (mode == "burst_lend_reclaim") rc = BurstLendReclaim(t, r);
  if (mode == "node_arbiter_ratio") rc = NodeArbiterRatio(t, r);
  if (mode == "mps") rc = Mps(t, r);
  if (rc != 77) r.Print();
  const std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) std::printf("could not remove %s\n", dir);
  return rc;
}
