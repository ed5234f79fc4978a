#include "cuda/memory_view.h"

#include <gtest/gtest.h>

#include "cuda/array_size.h"

namespace tessera::cuda {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

TEST(MemoryViewTest, TotalIsTheLimitClampedToPhysical) {
  MemView v = VirtualMemInfo(4 * kGiB, 1 * kGiB, 70 * kGiB, 80 * kGiB);
  EXPECT_EQ(v.total, 4 * kGiB);
  EXPECT_EQ(v.free, 3 * kGiB);
  EXPECT_EQ(v.used, 1 * kGiB);
  // A limit above the card (15 GiB on a 16 GB T4-like card) reports the card.
  v = VirtualMemInfo(100 * kGiB, 0, 15 * kGiB, 16 * kGiB);
  EXPECT_EQ(v.total, 16 * kGiB);
  EXPECT_EQ(v.free, 15 * kGiB);
}

TEST(MemoryViewTest, FreeSaturatesAtZeroAndNeverExceedsPhysicalFree) {
  MemView v = VirtualMemInfo(1 * kGiB, 3 * kGiB, 70 * kGiB, 80 * kGiB);
  EXPECT_EQ(v.free, 0u);
  EXPECT_EQ(v.used, 1 * kGiB);
  v = VirtualMemInfo(8 * kGiB, 1 * kGiB, 2 * kGiB, 80 * kGiB);  // card full of others
  EXPECT_EQ(v.free, 2 * kGiB);
  static_assert(VirtualMemInfo(0, 5, 10, 20).total == 20);  // no limit
  static_assert(VirtualMemInfo(345ull << 20, 0, 10, 20).free == 10);
}

TEST(MemoryViewTest, DeviceViewShowsTheCardsTotalAndTheSharesFree) {
  // 3 GiB of a 16 GiB card, 1 GiB used: code applying 3/16 to the total
  // (gpushare's CONTAINER / DEV) sizes itself to the 3 GiB share.
  MemView v = VirtualMemInfo(3 * kGiB, 1 * kGiB, 12 * kGiB, 16 * kGiB, TotalView::kDevice);
  EXPECT_EQ(v.total, 16 * kGiB);
  EXPECT_EQ(v.free, 2 * kGiB);
  EXPECT_EQ(v.used, 14 * kGiB);  // what the container cannot have, its own use included
  v = VirtualMemInfo(3 * kGiB, 4 * kGiB, 12 * kGiB, 16 * kGiB, TotalView::kDevice);
  EXPECT_EQ(v.free, 0u);
  static_assert(VirtualMemInfo(0, 5, 10, 20, TotalView::kDevice).total == 20);
}

TEST(ArraySizeTest, EstimatesFromDescriptor) {
  EXPECT_EQ(ArrayBytes(1024, 0, 0, CU_AD_FORMAT_FLOAT, 4), 1024u * 16);
  EXPECT_EQ(ArrayBytes(64, 64, 8, CU_AD_FORMAT_UNSIGNED_INT8, 1), 64u * 64 * 8);
  EXPECT_EQ(ArrayBytes(~0ull, ~0ull, 2, CU_AD_FORMAT_HALF, 2), ~0ull);  // saturates
  // 8x8, 4x4, 2x2, 1x1 of 1-byte texels.
  EXPECT_EQ(MipmappedBytes(8, 8, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 4), 64u + 16 + 4 + 1);
}

}  // namespace
}  // namespace tessera::cuda
