// Runs with libtessera-cuda.so preloaded over the fake driver, limits
// TESSERA_GPU_MEM_LIMIT_MIB_0=64 and _1=32 (see CMakeLists.txt). Each test
// gives back what it takes, so the share is empty between tests.
#include <gtest/gtest.h>

#include <vector>

#include "fake_cuda/test_util.h"

namespace {

using fake_test::kMiB;
using fake_test::Used0;

class HookPathsTest : public fake_test::DeviceTest {};

TEST_F(HookPathsTest, LinearStopsExactlyAtTheLimit) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 64 * kMiB - 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc_v2(&b, 1), CUDA_SUCCESS);
  CUdeviceptr c = 0;
  EXPECT_EQ(cuMemAlloc_v2(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Used0(), 64 * kMiB);
  ASSERT_EQ(cuMemFree_v2(b), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc_v2(&c, 1), CUDA_SUCCESS);  // recovers after a free
  EXPECT_EQ(cuMemFree_v2(c), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);  // double free: the driver's answer
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, LegacyAllocCounts) {
  CUdeviceptr_v1 a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc(&a, 60 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc(&b, 5 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree(a), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, PitchIsChargedByTheRealPitch) {
  // 1000 bytes wide pads to 1024: 1 MiB per 1024 rows, not 0.98 MiB.
  std::vector<CUdeviceptr> ptrs;
  size_t pitch = 0;
  CUdeviceptr p = 0;
  while (cuMemAllocPitch_v2(&p, &pitch, 1000, 1024, 4) == CUDA_SUCCESS) {
    ASSERT_EQ(pitch, 1024u);
    ptrs.push_back(p);
  }
  EXPECT_EQ(ptrs.size(), 64u);  // by the descriptor 65 would fit
  EXPECT_EQ(Used0(), 64 * kMiB);
  for (CUdeviceptr q : ptrs) EXPECT_EQ(cuMemFree_v2(q), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, ManagedCountsByDefault) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAllocManaged(&a, 64 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocManaged(&b, 1, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
}

TEST_F(HookPathsTest, AsyncIsChargedByPoolReserve) {
  // 3 MiB requests; the pool reserves in 2 MiB steps: after 21 it holds
  // 64 MiB, the 22nd would take it to 66.
  std::vector<CUdeviceptr> ptrs;
  CUdeviceptr p = 0;
  while (cuMemAllocAsync(&p, 3 * kMiB, nullptr) == CUDA_SUCCESS) ptrs.push_back(p);
  EXPECT_EQ(ptrs.size(), 21u);
  EXPECT_EQ(Used0(), 64 * kMiB);
  for (CUdeviceptr q : ptrs) EXPECT_EQ(cuMemFreeAsync(q, nullptr), CUDA_SUCCESS);
  // The pool keeps its reserve after frees: still charged.
  EXPECT_EQ(Used0(), 64 * kMiB);
  CUmemoryPool pool;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
  // The per-thread-stream variant is the same path.
  ASSERT_EQ(cuMemAllocAsync_ptsz(&p, 64 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocAsync_ptsz(&ptrs[0], 1, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFreeAsync_ptsz(p, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, ExplicitPoolsDeviceCountedHostNot) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemoryPool dev_pool, host_pool;
  ASSERT_EQ(cuMemPoolCreate(&dev_pool, &props), CUDA_SUCCESS);
  props.location = {CU_MEM_LOCATION_TYPE_HOST, 0};
  ASSERT_EQ(cuMemPoolCreate(&host_pool, &props), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0, h = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&a, 40 * kMiB, dev_pool, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&b, 30 * kMiB, dev_pool, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemAllocFromPoolAsync_ptsz(&h, 100 * kMiB, host_pool, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 40 * kMiB);
  EXPECT_EQ(cuMemPoolDestroy(dev_pool), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
  EXPECT_EQ(cuMemPoolDestroy(host_pool), CUDA_SUCCESS);
}

TEST_F(HookPathsTest, VmmDeviceHandlesCountedHostHandlesNot) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemGenericAllocationHandle h1, h2, h3, host;
  ASSERT_EQ(cuMemCreate(&h1, 32 * kMiB, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemCreate(&h2, 32 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemCreate(&h3, 2 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  prop.location = {CU_MEM_LOCATION_TYPE_HOST, 0};
  ASSERT_EQ(cuMemCreate(&host, 128 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 64 * kMiB);
  // A retained reference keeps the memory until the last release, and a
  // mapping until the last unmap.
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 32 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, 32 * kMiB, 0, h1, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle again;
  ASSERT_EQ(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(va)), CUDA_SUCCESS);
  ASSERT_EQ(again, h1);
  EXPECT_EQ(cuMemRelease(h1), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 64 * kMiB);
  EXPECT_EQ(cuMemRelease(again), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 64 * kMiB);  // released, but still mapped: not yet freed
  EXPECT_EQ(cuMemUnmap(va, 32 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 32 * kMiB);
  EXPECT_EQ(cuMemRelease(h2), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(host), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, ArraysAreChargedByTheDriversSize) {
  // 4-byte arrays take a 64 KiB page each: 1024 fit in 64 MiB.
  CUDA_ARRAY_DESCRIPTOR d{1, 0, CU_AD_FORMAT_FLOAT, 1};
  std::vector<CUarray> arrays;
  CUarray a;
  while (arrays.size() < 2000 && cuArrayCreate_v2(&a, &d) == CUDA_SUCCESS) arrays.push_back(a);
  EXPECT_EQ(arrays.size(), 1024u);
  EXPECT_EQ(Used0(), 64 * kMiB);
  for (CUarray x : arrays) EXPECT_EQ(cuArrayDestroy(x), CUDA_SUCCESS);
  CUDA_ARRAY3D_DESCRIPTOR d3{1024, 1024, 16, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};  // 64 MiB
  ASSERT_EQ(cuArray3DCreate_v2(&a, &d3), CUDA_SUCCESS);
  CUarray b;
  EXPECT_EQ(cuArray3DCreate_v2(&b, &d3), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  CUDA_ARRAY_DESCRIPTOR_v1 d1{4096, 4096, CU_AD_FORMAT_FLOAT, 1};  // 64 MiB, legacy ABI
  ASSERT_EQ(cuArrayCreate(&a, &d1), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayCreate(&b, &d1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuArrayDestroy(a), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, MipmappedArraysCount) {
  CUDA_ARRAY3D_DESCRIPTOR d{2048, 2048, 0, CU_AD_FORMAT_FLOAT, 2, 0};  // 32 MiB + 8 + 2 + ...
  CUmipmappedArray m, n;
  ASSERT_EQ(cuMipmappedArrayCreate(&m, &d, 12), CUDA_SUCCESS);
  EXPECT_GT(Used0(), 32 * kMiB);
  EXPECT_EQ(cuMipmappedArrayCreate(&n, &d, 12), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(HookPathsTest, GraphMemoryIsChargedAfterLaunch) {
  CUgraph g;
  ASSERT_EQ(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  params.bytesize = 48 * kMiB;
  CUgraphNode node;
  ASSERT_EQ(cuGraphAddMemAllocNode(&node, g, nullptr, 0, &params), CUDA_SUCCESS);
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 48 * kMiB);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc_v2(&p, 17 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_b = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_b, 16 * kMiB);
  ASSERT_EQ(cuGraphExecDestroy(exec), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
  ASSERT_EQ(cuMemAlloc_v2(&p, 17 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  cuGraphDestroy(g);
}

TEST_F(HookPathsTest, SecondGpuHasItsOwnLimit) {
  fake_test::UseDevice(1);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 32 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_b = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, 32 * kMiB);
  EXPECT_EQ(free_b, 0u);
  EXPECT_EQ(Used0(), 0u);  // GPU 0 untouched
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
  fake_test::UseDevice(0);
}

}  // namespace
