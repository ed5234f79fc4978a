// VMM timing (issue 7a): a physical handle's memory is freed when it is
// released and its last mapping is gone, whichever comes last, so the
// library keeps it charged until then. Limit 64 MiB on GPU 0.
#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"

namespace {

using fake_test::kMiB;
using fake_test::Used0;

class VmmTest : public fake_test::DeviceTest {
 protected:
  CUmemGenericAllocationHandle Create(uint64_t bytes) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    EXPECT_EQ(cuMemCreate(&h, bytes, &prop, 0), CUDA_SUCCESS);
    return h;
  }
  CUdeviceptr Reserve(uint64_t bytes) {
    CUdeviceptr va = 0;
    EXPECT_EQ(cuMemAddressReserve(&va, bytes, 0, 0, 0), CUDA_SUCCESS);
    return va;
  }
};

TEST_F(VmmTest, AReleasedHandleStaysChargedUntilItsLastMappingGoes) {
  const CUmemGenericAllocationHandle h = Create(4 * kMiB);
  const CUdeviceptr va = Reserve(8 * kMiB);
  ASSERT_EQ(cuMemMap(va, 4 * kMiB, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + 4 * kMiB, 4 * kMiB, 0, h, 0), CUDA_SUCCESS);  // mapped twice
  EXPECT_EQ(Used0(), 4 * kMiB);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(tessera_fake_cuda_used_bytes(0), 4 * kMiB);  // the driver still holds it
  EXPECT_EQ(Used0(), 4 * kMiB);
  ASSERT_EQ(cuMemUnmap(va, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 4 * kMiB);
  ASSERT_EQ(cuMemUnmap(va + 4 * kMiB, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(tessera_fake_cuda_used_bytes(0), 0u);
  EXPECT_EQ(Used0(), 0u);

  // The other order: unmapped first, the release frees it.
  const CUmemGenericAllocationHandle g = Create(2 * kMiB);
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 2 * kMiB);
  ASSERT_EQ(cuMemRelease(g), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
  ASSERT_EQ(cuMemAddressFree(va, 8 * kMiB), CUDA_SUCCESS);
}

TEST_F(VmmTest, ARetainedHandleGoesAfterEveryReferenceAndMapping) {
  const CUmemGenericAllocationHandle h = Create(2 * kMiB);
  const CUdeviceptr va = Reserve(2 * kMiB);
  ASSERT_EQ(cuMemMap(va, 2 * kMiB, 0, h, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle again = 0;
  ASSERT_EQ(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(va + kMiB)), CUDA_SUCCESS);
  ASSERT_EQ(again, h);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(again), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 2 * kMiB);  // both references gone, still mapped
  ASSERT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
  EXPECT_EQ(tessera_fake_cuda_used_bytes(0), 0u);
}

TEST_F(VmmTest, OneUnmapOfARangeUnmapsEveryMappingInIt) {
  // What an allocator growing one reservation in chunks does at teardown.
  const CUdeviceptr va = Reserve(8 * kMiB);
  const CUmemGenericAllocationHandle a = Create(4 * kMiB), b = Create(4 * kMiB);
  ASSERT_EQ(cuMemMap(va, 4 * kMiB, 0, a, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + 4 * kMiB, 4 * kMiB, 0, b, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(a), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(b), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 8 * kMiB);
  ASSERT_EQ(cuMemUnmap(va, 8 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(VmmTest, ReleasedButMappedMemoryStillCountsAgainstTheLimit) {
  const CUmemGenericAllocationHandle h = Create(60 * kMiB);
  const CUdeviceptr va = Reserve(60 * kMiB);
  ASSERT_EQ(cuMemMap(va, 60 * kMiB, 0, h, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 8 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemUnmap(va, 60 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc_v2(&p, 8 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

}  // namespace
