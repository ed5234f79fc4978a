// With the library preloaded but no limit (or TESSERA_CUDA_DISABLE=1, then
// with memory and compute limits set), every call passes through: physical
// numbers, no refusals, no launch measured, no helper thread, and
// cuGetProcAddress hands out the driver's own pointers.
#include <dirent.h>
#include <dlfcn.h>

#include <string>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"

namespace {

using fake_test::kMiB;

class PassThroughTest : public fake_test::DeviceTest {};

TEST_F(PassThroughTest, NothingIsLimitedOrVirtualized) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 900 * kMiB), CUDA_SUCCESS);
  size_t free_b = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, 1024 * kMiB);
  EXPECT_EQ(free_b, 124 * kMiB);
  CUdeviceptr b = 0;
  EXPECT_EQ(cuMemAlloc_v2(&b, 200 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // the card is full
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
}

TEST_F(PassThroughTest, ProcAddressIsTheDriversOwn) {
  void* p = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  Dl_info info{};
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_STREQ(info.dli_sname, "cuMemAlloc_v2");
  EXPECT_EQ(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);
}

int Threads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (d != nullptr && readdir(d) != nullptr) ++n;
  if (d != nullptr) closedir(d);
  return n - 2;  // . and ..
}

TEST_F(PassThroughTest, LaunchesAreNotGatedOrMeasured) {
  const CUfunction k = reinterpret_cast<CUfunction>(0x2000);
  tessera_fake_cuda_set_kernel_us(k, 1000);
  const uint64_t t0 = tessera_fake_cuda_now_us();
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuLaunchKernel_ptsz(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr),
              CUDA_SUCCESS);
  }
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const uint64_t t1 = tessera_fake_cuda_now_us();
  EXPECT_GT(tessera_fake_cuda_busy_us(0, t0, t1), (t1 - t0) * 95 / 100);  // the whole GPU
  EXPECT_EQ(tessera_fake_cuda_events_recorded(), 0u);
  EXPECT_EQ(Threads(), 1);
  void* p = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  Dl_info info{};
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_EQ(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);
}

}  // namespace
