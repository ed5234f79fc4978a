// A small CUDA program for the multi-process suite (process_test.cc), run
// with libtessera-cuda.so preloaded over the fake driver:
//   client fill MIB         allocate MIB-sized blocks until refused; print the
//                           count; hold them until stdin closes
//   client alloc MIB exit   allocate, then exit() without freeing
//   client alloc MIB hold   allocate, print "ready", hold until stdin closes
//   client alloc MIB term   allocate, print "ready", hold until SIGTERM, then
//                           exit normally (the library gives the memory back)
//   client info             print "free total" of device 0 in bytes
//   client lock-and-die DIR take the region lock of DIR, then SIGKILL itself
//   client ctx hold         create device 0's context, print "ready", hold it
//                           until stdin closes
// Every command but lock-and-die first retains device 0's primary context:
// exit 10 when that is refused with CUDA_ERROR_OUT_OF_MEMORY, 11 on another
// error.
//   client spin             launch kernels (FAKE_CUDA_KERNEL_US long) on a
//                           stream of its own until SIGTERM (checked between
//                           launches), then exit normally
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "region/region.h"

namespace {

constexpr size_t kMiB = 1 << 20;

void WaitForStdinClose() {
  char c;
  while (read(STDIN_FILENO, &c, 1) > 0) {
  }
}

CUresult Context() {
  CUcontext ctx = nullptr;
  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) return r;
  if (CUresult r = cuDevicePrimaryCtxRetain(&ctx, 0); r != CUDA_SUCCESS) return r;
  return cuCtxSetCurrent(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string cmd = argv[1];
  if (cmd == "lock-and-die" && argc == 3) {
    auto r = tessera::region::Region::OpenDir(argv[2]);
    if (!r.ok()) return 3;
    if (!tessera::region::RobustMutex::IsHeld(r->layout()->lock.Lock(1000))) return 4;
    std::printf("locked\n");
    std::fflush(stdout);
    raise(SIGKILL);
  }
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  if (cmd == "spin" || (cmd == "alloc" && argc == 4 && std::strcmp(argv[3], "term") == 0)) {
    sigprocmask(SIG_BLOCK, &term, nullptr);  // taken by sigwait below, not by the default action
  }
  if (CUresult r = Context(); r != CUDA_SUCCESS) return r == CUDA_ERROR_OUT_OF_MEMORY ? 10 : 11;
  if (cmd == "ctx" && argc == 3 && std::strcmp(argv[2], "hold") == 0) {
    std::printf("ready\n");
    std::fflush(stdout);
    WaitForStdinClose();
    return 0;
  }
  if (cmd == "info") {
    size_t free_b = 0, total = 0;
    if (cuMemGetInfo_v2(&free_b, &total) != CUDA_SUCCESS) return 5;
    std::printf("%zu %zu\n", free_b, total);
    return 0;
  }
  if (cmd == "spin" && argc == 2) {
    CUstream stream = nullptr;
    if (cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return 8;
    const CUfunction kernel = reinterpret_cast<CUfunction>(0x5000);
    const timespec no_wait{0, 0};
    bool first = true;
    while (sigtimedwait(&term, nullptr, &no_wait) != SIGTERM) {
      if (cuLaunchKernel(kernel, 64, 1, 1, 128, 1, 1, 0, stream, nullptr, nullptr) != CUDA_SUCCESS) return 9;
      if (first) {
        std::printf("ready\n");
        std::fflush(stdout);
        first = false;
      }
    }
    cuStreamSynchronize(stream);
    return 0;
  }
  if (cmd == "fill" && argc == 3) {
    const size_t block = std::strtoull(argv[2], nullptr, 10) * kMiB;
    std::vector<CUdeviceptr> held;
    CUdeviceptr p;
    CUresult r;
    while ((r = cuMemAlloc_v2(&p, block)) == CUDA_SUCCESS) held.push_back(p);
    if (r != CUDA_ERROR_OUT_OF_MEMORY) return 6;
    std::printf("%zu\n", held.size());
    std::fflush(stdout);
    WaitForStdinClose();
    return 0;
  }
  if (cmd == "alloc" && argc == 4) {
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, std::strtoull(argv[2], nullptr, 10) * kMiB) != CUDA_SUCCESS) return 7;
    if (std::strcmp(argv[3], "hold") == 0 || std::strcmp(argv[3], "term") == 0) {
      std::printf("ready\n");
      std::fflush(stdout);
      if (argv[3][0] == 'h') {
        WaitForStdinClose();
      } else {
        int sig = 0;
        sigwait(&term, &sig);
      }
    }
    std::exit(0);
  }
  return 2;
}
