// Context memory (issue 5) in one process over the fake driver, whose
// contexts take 8 MiB each (FAKE_CUDA_CONTEXT_MIB=8), as the library charges
// them (TESSERA_GPU_CONTEXT_MIB=8). Limits: 64 MiB on GPU 0, 32 MiB on GPU 1.
// The charge is per process and device: the first context there charges it,
// the last one gone gives it back; cuMemGetInfo and NVML show it as used.
// The multi-process side is in process_test.cc.
#include <nvml.h>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"

namespace {

using fake_test::kMiB;

// Used on the current context's device, as cuMemGetInfo shows it.
uint64_t UsedSeen() {
  size_t free_b = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  return total - free_b;
}

// Used on device `index`, as NVML shows it (no UUIDs configured: NVML index
// i is the container's GPU i).
uint64_t NvmlUsed(unsigned index) {
  nvmlDevice_t dev{};
  EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(index, &dev), NVML_SUCCESS);
  nvmlMemory_t m{};
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(dev, &m), NVML_SUCCESS);
  return m.used;
}

class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
    ASSERT_EQ(NvmlUsed(0), 0u) << "a test before this one left a context charged";
    ASSERT_EQ(NvmlUsed(1), 0u) << "a test before this one left a context charged";
  }
};

TEST_F(ContextTest, ThePrimaryContextIsChargedOnceUntilItsLastRelease) {
  CUcontext a = nullptr, b = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&a, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(a), CUDA_SUCCESS);
  EXPECT_EQ(UsedSeen(), 8 * kMiB);
  EXPECT_EQ(NvmlUsed(0), 8 * kMiB);
  EXPECT_EQ(NvmlUsed(1), 0u);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&b, 0), CUDA_SUCCESS);  // one more reference
  EXPECT_EQ(UsedSeen(), 8 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
  EXPECT_EQ(UsedSeen(), 8 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);  // the last one (legacy name)
  EXPECT_EQ(NvmlUsed(0), 0u);
  EXPECT_EQ(tessera_fake_cuda_used_bytes(0), 0u);
}

TEST_F(ContextTest, AResetPrimaryContextStaysChargedWhileRetained) {
  // A reset does not release the context (cuda.h): the driver re-creates it
  // at its next use, so the charge stays until the last release.
  CUcontext a = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&a, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxReset_v2(1), CUDA_SUCCESS);
  EXPECT_EQ(NvmlUsed(1), 8 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(1), CUDA_SUCCESS);
  EXPECT_EQ(NvmlUsed(1), 0u);
}

TEST_F(ContextTest, CreatedContextsShareTheProcesssChargeOnTheirDevice) {
  CUcontext c1 = nullptr, c2 = nullptr, c3 = nullptr;
  ASSERT_EQ(cuCtxCreate_v2(&c1, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(UsedSeen(), 8 * kMiB);
  ASSERT_EQ(cuCtxCreate_v4(&c2, nullptr, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxCreate_v3(&c3, nullptr, 0, 0, 1), CUDA_SUCCESS);
  EXPECT_EQ(NvmlUsed(0), 8 * kMiB);  // two contexts on GPU 0, one charge
  EXPECT_EQ(NvmlUsed(1), 8 * kMiB);
  ASSERT_EQ(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
  EXPECT_EQ(NvmlUsed(0), 8 * kMiB);
  ASSERT_EQ(cuCtxDestroy(c2), CUDA_SUCCESS);  // legacy name
  EXPECT_EQ(NvmlUsed(0), 0u);
  ASSERT_EQ(cuCtxDestroy_v2(c3), CUDA_SUCCESS);
  EXPECT_EQ(NvmlUsed(1), 0u);
}

TEST_F(ContextTest, AContextTheShareCannotHoldIsRefused) {
  // 30 of GPU 1's 32 MiB taken by a VMM handle (no context needed): a first
  // context there does not fit, whichever way it is made, and the driver is
  // not asked for one.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, 30 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUcontext c = nullptr;
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuCtxCreate_v2(&c, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuCtxCreate_v4(&c, nullptr, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(tessera_fake_cuda_used_bytes(1), 30 * kMiB);
  EXPECT_EQ(NvmlUsed(1), 30 * kMiB);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&c, 1), CUDA_SUCCESS);
  EXPECT_EQ(NvmlUsed(1), 8 * kMiB);
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(1), CUDA_SUCCESS);
}

TEST_F(ContextTest, AContextCountsAgainstWhatAllocationsMayTake) {
  CUcontext c = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&c, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 26 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // 8 + 26 > 32
  ASSERT_EQ(cuMemAlloc_v2(&p, 24 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(UsedSeen(), 32 * kMiB);
  ASSERT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRelease_v2(1), CUDA_SUCCESS);
}

}  // namespace
