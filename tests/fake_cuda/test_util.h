// Helpers for the suites that run a test program over the fake driver with
// libtessera-cuda.so preloaded.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace fake_test {

inline constexpr uint64_t kMiB = 1ull << 20;

inline void UseDevice(int dev) {
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

inline int CurrentDevice() {
  CUdevice d = -1;
  cuCtxGetDevice(&d);
  return d;
}

// What the container uses on GPU `dev`, as cuMemGetInfo reports it.
inline uint64_t Used(int dev) {
  int was = CurrentDevice();
  UseDevice(dev);
  size_t free_b = 0, total = 0;
  EXPECT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  UseDevice(was);
  return total - free_b;
}
inline uint64_t Used0() { return Used(0); }

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    UseDevice(0);
  }
};

}  // namespace fake_test
