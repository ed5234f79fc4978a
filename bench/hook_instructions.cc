// Instructions per hooked call, counted by callgrind rather than timed, so a
// change to libtessera-cuda.so's hooked path shows up as the same number on
// any machine. The program runs one operation N times against the fake
// driver; bench/hook_instructions.sh runs it under callgrind with N = 0 and
// N = large, with and without the library and a limit, and prints the
// difference per call.
//   hook_instructions alloc|async|launch|meminfo N
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void Context() {
  CUcontext ctx;
  cuInit(0);
  cuDevicePrimaryCtxRetain(&ctx, 0);
  cuCtxSetCurrent(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s alloc|async|launch|meminfo N\n", argv[0]);
    return 2;
  }
  const char* op = argv[1];
  const long n = std::strtol(argv[2], nullptr, 10);
  Context();
  // Resolved once, as the CUDA runtime does.
  void* launch_fn = nullptr;
  cuGetProcAddress_v2("cuLaunchKernel", &launch_fn, 12000, 0, nullptr);
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(launch_fn);
  // One call of each before counting starts, so first-call set-up (the
  // region, the pointer table) is in the N = 0 run too.
  CUdeviceptr p;
  size_t free_b, total;
  if (cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS) return 3;
  cuMemFree_v2(p);
  if (cuMemAllocAsync(&p, 1 << 20, nullptr) != CUDA_SUCCESS) return 3;
  cuMemFreeAsync(p, nullptr);
  launch(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
  cuMemGetInfo_v2(&free_b, &total);
  for (long i = 0; i < n; ++i) {
    if (std::strcmp(op, "alloc") == 0) {
      if (cuMemAlloc_v2(&p, 1 << 20) != CUDA_SUCCESS) return 4;
      cuMemFree_v2(p);
    } else if (std::strcmp(op, "async") == 0) {
      if (cuMemAllocAsync(&p, 1 << 20, nullptr) != CUDA_SUCCESS) return 4;
      cuMemFreeAsync(p, nullptr);
    } else if (std::strcmp(op, "launch") == 0) {
      launch(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
    } else if (std::strcmp(op, "meminfo") == 0) {
      cuMemGetInfo_v2(&free_b, &total);
    } else {
      return 2;
    }
  }
  return 0;
}
