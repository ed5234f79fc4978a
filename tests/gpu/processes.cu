// Several processes under libtessera-cuda.so on a real GPU.
//   gpu_processes fork   a process with CUDA initialized, a memory limit and
//                        a compute share, and a thread allocating, launching
//                        and freeing in a loop, forks 8 times. Each child
//                        (which must not use CUDA) resolves a hooked name with
//                        dlsym, calls cuMemGetInfo (any answer but a hang) and
//                        exits, half through exit(), half through _exit().
//                        The parent must not hang, each child must exit 0
//                        within 10 s, and afterwards the parent's accounting
//                        is what it holds, the limit still stops it, and
//                        kernels still launch.
//   gpu_processes two    two processes sharing TESSERA_REGION_DIR, both with
//                        their contexts up, fill GPU 0 with cuMemAlloc at
//                        once: together they stop at the limit less the two
//                        contexts' charges; once one exits, the other can
//                        take the limit less its own context's.
// Run with the library preloaded and TESSERA_GPU_MEM_LIMIT_MIB_0 set (fork:
// also TESSERA_GPU_CORE_PERCENT_0 and TESSERA_GPU_CORE_POLICY=hard; two:
// TESSERA_REGION_DIR). Exit 0 pass, 1 fail, 2 usage.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "result_line.h"
#include "share_view.h"

namespace {

constexpr size_t kBlock = 64 * kMiB;

__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Allocates kBlock at a time until refused; returns what it got.
std::vector<CUdeviceptr> Fill() {
  std::vector<CUdeviceptr> held;
  CUdeviceptr p;
  while (held.size() < 10000 && cuMemAlloc(&p, kBlock) == CUDA_SUCCESS) held.push_back(p);
  return held;
}

void FreeAll(std::vector<CUdeviceptr>& held) {
  for (CUdeviceptr p : held) cuMemFree(p);
  held.clear();
}

// Waits up to `seconds` for `pid`; kills it if still running. Returns the
// wait status, or -1 when it had to be killed.
int WaitOrKill(pid_t pid, int seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

int ForkTest() {
  const size_t limit = LimitBytes();
  int khz = 0;
  cudaSetDevice(0);
  cudaFree(nullptr);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  const size_t used_start = Used();
  CUdeviceptr base;
  if (cuMemAlloc(&base, 4 * kBlock) != CUDA_SUCCESS) {
    std::printf("FAIL: first allocation refused\n");
    return 1;
  }
  const size_t used_before = Used();
  std::atomic<bool> stop{false};
  std::atomic<long> iterations{0};
  std::thread churn([&] {
    cudaSetDevice(0);
    while (!stop.load()) {
      CUdeviceptr p;
      if (cuMemAlloc(&p, kBlock) == CUDA_SUCCESS) {
        Spin<<<1, 32>>>(khz / 10);  // ~100 us
        cudaDeviceSynchronize();
        cuMemFree(p);
      }
      ++iterations;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int children_ok = 0;
  constexpr int kForks = 8;
  for (int i = 0; i < kForks; ++i) {
    std::fflush(stdout);  // nothing buffered for a child's exit() to print again
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(10);
      void* sym = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
      size_t f = 0, t = 0;
      const CUresult r = cuMemGetInfo(&f, &t);
      std::printf("child %d: dlsym(cuMemAlloc_v2) %s, cuMemGetInfo -> %d\n", i,
                  sym != nullptr ? "found" : "NULL", static_cast<int>(r));
      std::fflush(stdout);
      if (i % 2 == 0) std::exit(sym != nullptr ? 0 : 1);
      _exit(sym != nullptr ? 0 : 1);
    }
    const int status = WaitOrKill(pid, 10);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++children_ok;
    } else {
      std::printf("FAIL: child %d %s\n", i,
                  status == -1 ? "hung (killed after 10 s)"
                  : WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited non-zero");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  churn.join();
  cudaDeviceSynchronize();
  const size_t used_after = Used();
  bool ok = children_ok == kForks;
  if (used_after != used_before) {
    std::printf("FAIL: charged %zu bytes after the forks, %zu before\n", used_after, used_before);
    ok = false;
  }
  std::vector<CUdeviceptr> held = Fill();
  const size_t filled = Used();
  if (filled > limit || filled + 2 * kBlock < limit) {
    std::printf("FAIL: filled to %zu MiB with a limit of %zu MiB\n", filled / kMiB, limit / kMiB);
    ok = false;
  }
  FreeAll(held);
  for (int i = 0; i < 20; ++i) Spin<<<1, 32>>>(khz / 10);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("FAIL: kernels after the forks\n");
    ok = false;
  }
  cuMemFree(base);
  std::printf("fork: %d/%d children ok, churn %ld iterations, used %zu -> %zu MiB, filled %zu MiB\n",
              children_ok, kForks, iterations.load(), used_before / kMiB, used_after / kMiB,
              filled / kMiB);
  ResultLine r;
  r.Add("forks", kForks);
  r.Add("children_ok", children_ok);
  r.Add("churn_iterations", static_cast<double>(iterations.load()));
  r.Add("used_start_mib", static_cast<double>(used_start / kMiB));
  r.Add("used_before_mib", static_cast<double>(used_before / kMiB));
  r.Add("used_after_mib", static_cast<double>(used_after / kMiB));
  r.Add("filled_mib", static_cast<double>(filled / kMiB));
  r.Print();
  return ok ? 0 : 1;
}

// One of the two processes: bring its context up, say "ready", then obey
// "fill" (fill, report what it holds) / "exit" lines.
int TwoChild() {
  cudaSetDevice(0);
  cudaFree(nullptr);
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<CUdeviceptr> held;
  char line[64];
  std::string cmd;
  if (std::fgets(line, sizeof line, stdin) != nullptr) cmd = std::string(line).substr(0, std::strcspn(line, "\n"));
  while (cmd == "fill") {
    std::vector<CUdeviceptr> more = Fill();
    held.insert(held.end(), more.begin(), more.end());
    std::printf("%zu\n", held.size() * kBlock / kMiB);
    std::fflush(stdout);
    if (std::fgets(line, sizeof line, stdin) == nullptr) break;
    cmd = std::string(line).substr(0, std::strcspn(line, "\n"));
  }
  FreeAll(held);
  return 0;
}

struct Child {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;
};

Child Spawn(const char* self) {
  int in[2], out[2];
  Child c;
  if (pipe(in) != 0 || pipe(out) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl("/proc/self/exe", self, "two-child", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c.to = fdopen(in[1], "w");
  c.from = fdopen(out[0], "r");
  return c;
}

long ReadMiB(Child& c) {
  char line[64];
  return std::fgets(line, sizeof line, c.from) != nullptr ? std::atol(line) : -1;
}

bool ReadReady(Child& c) {
  char line[64];
  return std::fgets(line, sizeof line, c.from) != nullptr && std::strncmp(line, "ready", 5) == 0;
}

void Say(Child& c, const char* what) {
  std::fprintf(c.to, "%s\n", what);
  std::fflush(c.to);
}

int TwoTest(const char* self) {
  if (std::getenv("TESSERA_REGION_DIR") == nullptr) {
    std::fprintf(stderr, "two: TESSERA_REGION_DIR must be set\n");
    return 2;
  }
  const long limit_mib = static_cast<long>(LimitBytes() / kMiB);
  const long block_mib = static_cast<long>(kBlock / kMiB);
  const long context_mib = static_cast<long>(ContextBytes() / kMiB);
  Child a = Spawn(self), b = Spawn(self);
  // Both contexts first (each charged context_mib), then both fill at once.
  const bool ready = ReadReady(a) && ReadReady(b);
  Say(a, "fill");
  Say(b, "fill");
  const long a_mib = ReadMiB(a), b_mib = ReadMiB(b);
  bool ok = ready && a_mib >= 0 && b_mib >= 0;
  if (!ok) std::printf("FAIL: a child did not start or did not report\n");
  const long room = limit_mib - 2 * context_mib;  // what the two can hold together
  if (ok && (a_mib + b_mib > room || a_mib + b_mib < room - 2 * block_mib)) {
    std::printf("FAIL: together %ld + %ld MiB with a limit of %ld MiB and two %ld MiB contexts\n", a_mib,
                b_mib, limit_mib, context_mib);
    ok = false;
  }
  Say(a, "exit");
  const int a_status = WaitOrKill(a.pid, 10);
  Say(b, "fill");
  const long b_alone = ReadMiB(b);
  if (b_alone > limit_mib - context_mib || b_alone < limit_mib - context_mib - 2 * block_mib) {
    std::printf("FAIL: alone after the other exited: %ld MiB of %ld MiB (its context %ld MiB)\n", b_alone,
                limit_mib, context_mib);
    ok = false;
  }
  Say(b, "exit");
  const int b_status = WaitOrKill(b.pid, 10);
  if (a_status != 0 || b_status != 0) {
    std::printf("FAIL: children's exit status %d, %d\n", a_status, b_status);
    ok = false;
  }
  std::printf("two: %ld + %ld MiB together, %ld MiB alone; limit %ld MiB\n", a_mib, b_mib, b_alone,
              limit_mib);
  ResultLine r;
  r.Add("limit_mib", static_cast<double>(limit_mib));
  r.Add("context_mib", static_cast<double>(context_mib));
  r.Add("a_mib", static_cast<double>(a_mib));
  r.Add("b_mib", static_cast<double>(b_mib));
  r.Add("b_alone_mib", static_cast<double>(b_alone));
  r.Print();
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (LimitBytes() == 0) {
    std::fprintf(stderr, "TESSERA_GPU_MEM_LIMIT_MIB_0 must be set\n");
    return 2;
  }
  if (mode == "fork") return ForkTest();
  if (mode == "two") return TwoTest(argv[0]);
  if (mode == "two-child") return TwoChild();
  std::fprintf(stderr, "usage: %s fork|two\n", argv[0]);
  return 2;
}
