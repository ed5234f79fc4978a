// With the library preloaded but no limit (or TESSERA_CUDA_DISABLE=1), every
// call passes through: physical numbers, no refusals, and cuGetProcAddress
// hands out the driver's own pointers.
#include <dlfcn.h>

#include <string>

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

}  // namespace
