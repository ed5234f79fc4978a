// A container of two GPUs on a three-GPU node, over the fake driver with
// libtessera-cuda.so preloaded. Physical (PCI-order) devices A, B, C; the
// node agent assigned (B, A): TESSERA_GPU_UUID_0 = B with 64 MiB,
// TESSERA_GPU_UUID_1 = A with 32 MiB and a 25 % compute share (hard); C is
// not the container's. CMakeLists.txt runs this program once per device
// order (PCI order; CUDA_VISIBLE_DEVICES reordering by index; by UUID; the
// driver's fastest-first order), so the CUDA ordinals of A, B and C differ
// from run to run and from the assignment order: every limit must follow
// its GPU's UUID, never the ordinal or NVML's index.
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/fake_uuid.h"
#include "fake_cuda/test_util.h"

namespace {

using fake_test::kMiB;

constexpr uint64_t kCardBytes = 1024 * kMiB;  // FAKE_CUDA_MEM_MIB default
constexpr int kA = 0, kB = 1;  // physical indexes of the container's GPUs (2 is not one of them)

// What the container may use of physical device `p`: 0 = not its GPU.
uint64_t LimitOf(int p) { return p == kB ? 64 * kMiB : p == kA ? 32 * kMiB : 0; }

// The physical device behind CUDA ordinal `ordinal`, by its UUID.
int PhysicalOf(int ordinal) {
  CUuuid u{};
  EXPECT_EQ(cuDeviceGetUuid_v2(&u, ordinal), CUDA_SUCCESS);
  for (int p = 0; p < 3; ++p) {
    unsigned char want[16];
    fake::UuidBytes(static_cast<unsigned>(p), want);
    if (std::memcmp(u.bytes, want, 16) == 0) return p;
  }
  ADD_FAILURE() << "ordinal " << ordinal << " has an unknown UUID";
  return -1;
}

int OrdinalOf(int physical) {
  int n = 0;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_SUCCESS);
  for (int d = 0; d < n; ++d) {
    if (PhysicalOf(d) == physical) return d;
  }
  return -1;
}

class MultiGpuTest : public fake_test::DeviceTest {
 protected:
  void SetUp() override {
    fake_test::DeviceTest::SetUp();
    ASSERT_EQ(cuDeviceGetCount(&count_), CUDA_SUCCESS);
    ASSERT_GE(count_, 2);
    std::printf("  CUDA ordinals:");
    for (int d = 0; d < count_; ++d) std::printf(" %d=%c", d, "ABC"[PhysicalOf(d)]);
    std::printf("\n");
  }
  int count_ = 0;
};

TEST_F(MultiGpuTest, EachDeviceIsRefusedAtItsOwnLimit) {
  for (int d = 0; d < count_; ++d) {
    SCOPED_TRACE(testing::Message() << "ordinal " << d);
    const uint64_t limit = LimitOf(PhysicalOf(d));
    fake_test::UseDevice(d);
    size_t free_b = 0, total = 0;
    if (limit == 0) {
      // Not the container's GPU: no limit, the card as it is.
      CUdeviceptr p = 0;
      ASSERT_EQ(cuMemAlloc_v2(&p, 100 * kMiB), CUDA_SUCCESS);
      ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
      EXPECT_EQ(total, kCardBytes);
      EXPECT_EQ(free_b, kCardBytes - 100 * kMiB);
      EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
      continue;
    }
    CUdeviceptr a = 0, b = 0, c = 0;
    ASSERT_EQ(cuMemAlloc_v2(&a, limit - 1), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAlloc_v2(&b, 1), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAlloc_v2(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, limit);
    EXPECT_EQ(free_b, 0u);
    EXPECT_EQ(cuMemFree_v2(b), CUDA_SUCCESS);
    EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
    ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
    EXPECT_EQ(free_b, limit);
  }
  fake_test::UseDevice(0);
}

TEST_F(MultiGpuTest, PoolsAndVmmHandlesFollowTheirDevice) {
  for (int d = 0; d < count_; ++d) {
    SCOPED_TRACE(testing::Message() << "ordinal " << d);
    const uint64_t limit = LimitOf(PhysicalOf(d));
    if (limit == 0) continue;
    fake_test::UseDevice(d);
    CUdeviceptr p = 0, q = 0;
    ASSERT_EQ(cuMemAllocAsync(&p, limit, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAllocAsync(&q, 2 * kMiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
    CUmemoryPool pool;
    ASSERT_EQ(cuDeviceGetMemPool(&pool, d), CUDA_SUCCESS);
    ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    // A VMM handle names its device by ordinal, whatever the current one.
    fake_test::UseDevice(d == 0 ? 1 : 0);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, d};
    CUmemGenericAllocationHandle h1, h2;
    ASSERT_EQ(cuMemCreate(&h1, limit, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemCreate(&h2, 2 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(fake_test::Used(d), limit);
    EXPECT_EQ(cuMemRelease(h1), CUDA_SUCCESS);
    EXPECT_EQ(fake_test::Used(d), 0u);
  }
  fake_test::UseDevice(0);
}

TEST_F(MultiGpuTest, DeviceTotalMemShowsEachShare) {
  for (int d = 0; d < count_; ++d) {
    const uint64_t limit = LimitOf(PhysicalOf(d));
    size_t total = 0;
    ASSERT_EQ(cuDeviceTotalMem_v2(&total, d), CUDA_SUCCESS);
    EXPECT_EQ(total, limit != 0 ? limit : kCardBytes) << "ordinal " << d;
  }
}

// NVML enumerates the node's devices in PCI order whatever CUDA shows; each
// reports its own share, and what the container has charged on it, as
// nvidia-smi shows them (it reads nvmlDeviceGetMemoryInfo_v2): the driver's
// reserve (FAKE_NVML_RESERVED_MIB=5) is outside every share. C, not the
// container's, is the card as NVML reports it.
TEST_F(MultiGpuTest, NvmlShowsEachDevicesShare) {
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  unsigned n = 0;
  ASSERT_EQ(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
  ASSERT_EQ(n, 3u);
  const int a = OrdinalOf(kA);
  ASSERT_GE(a, 0);
  fake_test::UseDevice(a);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 8 * kMiB), CUDA_SUCCESS);
  for (unsigned i = 0; i < n; ++i) {
    SCOPED_TRACE(testing::Message() << "NVML index " << i);
    nvmlDevice_t dev;
    ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(i, &dev), NVML_SUCCESS);
    const uint64_t limit = LimitOf(static_cast<int>(i));
    const uint64_t total = limit != 0 ? limit : kCardBytes;
    const uint64_t used = static_cast<int>(i) == kA ? 8 * kMiB : 0;
    // On the card as it is, v1's used counts the driver's reserve.
    const uint64_t reserved = limit != 0 ? 0 : 5 * kMiB;
    nvmlMemory_t m{};
    ASSERT_EQ(nvmlDeviceGetMemoryInfo(dev, &m), NVML_SUCCESS);
    EXPECT_EQ(m.total, total);
    EXPECT_EQ(m.used, used + reserved);
    EXPECT_EQ(m.free, total - used - reserved);
    nvmlMemory_v2_t m2{};
    m2.version = nvmlMemory_v2;
    ASSERT_EQ(nvmlDeviceGetMemoryInfo_v2(dev, &m2), NVML_SUCCESS);
    EXPECT_EQ(m2.total, total);
    EXPECT_EQ(m2.reserved, reserved);
    EXPECT_EQ(m2.used, used);
    EXPECT_EQ(m2.free, total - reserved - used);
  }
  EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  fake_test::UseDevice(0);
}

// Back-to-back 1 ms kernels on `ordinal` for 50 windows of 100 ms of virtual
// time; the fraction of that time its GPU was busy.
double Saturate(int ordinal) {
  fake_test::UseDevice(ordinal);
  const CUfunction k = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(0x7000 + ordinal));
  tessera_fake_cuda_set_kernel_us(k, 1000);
  constexpr uint64_t kWindowUs = 100'000;
  const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs;
  tessera_fake_cuda_sleep_until_us(t0);
  const uint64_t t1 = t0 + 50 * kWindowUs;
  while (tessera_fake_cuda_now_us() < t1) {
    if (cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS) return -1;
  }
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  return static_cast<double>(tessera_fake_cuda_busy_us(ordinal, t0, t1)) / (t1 - t0);
}

// A has the only compute share: gated to 25 % whatever its ordinal; B (no
// share) and C (not the container's) are not gated.
TEST_F(MultiGpuTest, ComputeShareFollowsItsGpu) {
  for (int d = 0; d < count_; ++d) {
    const int p = PhysicalOf(d);
    SCOPED_TRACE(testing::Message() << "ordinal " << d << " = " << "ABC"[p]);
    if (p == kA) {
      EXPECT_NEAR(Saturate(d), 0.25, 0.03);
    } else {
      EXPECT_GT(Saturate(d), 0.95);
    }
  }
  fake_test::UseDevice(0);
}

}  // namespace
