#include "cuda/accountant.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <thread>
#include <vector>

namespace tessera::cuda {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class AccountantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    region_ = std::make_unique<region::Region>(region::Region::CreateAnonymous().value());
    layout_ = region_->layout();
    layout_->gpus[0].limit_bytes = 64 * kMiB;
    Result<int> slot = region::RegisterProcess(*layout_, getpid());
    ASSERT_TRUE(slot.ok());
    acct_ = std::make_unique<Accountant>(layout_, *slot);
  }
  std::unique_ptr<region::Region> region_;
  region::Layout* layout_ = nullptr;
  std::unique_ptr<Accountant> acct_;
};

TEST_F(AccountantTest, ReserveStopsExactlyAtTheLimit) {
  EXPECT_TRUE(acct_->Reserve(0, 64 * kMiB));
  EXPECT_FALSE(acct_->Reserve(0, 1));
  acct_->Unreserve(0, 1);
  EXPECT_TRUE(acct_->Reserve(0, 1));
  EXPECT_EQ(acct_->Used(0), 64 * kMiB);
  EXPECT_EQ(acct_->Held(0), 64 * kMiB);
  EXPECT_TRUE(acct_->Reserve(1, 1 << 30));  // GPU 1 has no limit
}

TEST_F(AccountantTest, TrackAndReleaseMatchFrees) {
  ASSERT_TRUE(acct_->Reserve(0, 10));
  ASSERT_TRUE(acct_->Track(Space::kDevicePtr, 0x1000, 0, 10));
  EXPECT_FALSE(acct_->Release(Space::kArray, 0x1000));  // other key space
  EXPECT_TRUE(acct_->Release(Space::kDevicePtr, 0x1000));
  EXPECT_FALSE(acct_->Release(Space::kDevicePtr, 0x1000));  // double free: unknown
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, VmmHandleFreedAtLastReference) {
  ASSERT_TRUE(acct_->Reserve(0, 4 * kMiB));
  ASSERT_TRUE(acct_->Track(Space::kVmmHandle, 7, 0, 4 * kMiB));
  EXPECT_TRUE(acct_->Retain(Space::kVmmHandle, 7));
  EXPECT_TRUE(acct_->Release(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Used(0), 4 * kMiB);
  EXPECT_TRUE(acct_->Release(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, ReleasedVmmHandleStaysChargedUntilItsLastMappingGoes) {
  ASSERT_TRUE(acct_->Reserve(0, 4 * kMiB));
  ASSERT_TRUE(acct_->Track(Space::kVmmHandle, 7, 0, 4 * kMiB));
  EXPECT_TRUE(acct_->Map(0x1000000, 4 * kMiB, 7));
  EXPECT_TRUE(acct_->Map(0x2000000, 4 * kMiB, 7));  // the same handle twice
  EXPECT_FALSE(acct_->Map(0x3000000, 4 * kMiB, 8));  // not ours: not tracked
  EXPECT_TRUE(acct_->Release(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Used(0), 4 * kMiB);
  EXPECT_EQ(acct_->Unmap(0x1000000, 4 * kMiB), 1);
  EXPECT_EQ(acct_->Used(0), 4 * kMiB);
  EXPECT_EQ(acct_->Unmap(0x2000000, 4 * kMiB), 1);
  EXPECT_EQ(acct_->Used(0), 0u);
  EXPECT_FALSE(acct_->Contains(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Mappings(), 0u);
}

TEST_F(AccountantTest, UnmappedVmmHandleGoesAtItsRelease) {
  ASSERT_TRUE(acct_->Reserve(0, 2 * kMiB));
  ASSERT_TRUE(acct_->Track(Space::kVmmHandle, 7, 0, 2 * kMiB));
  EXPECT_TRUE(acct_->Map(0x1000000, 2 * kMiB, 7));
  EXPECT_TRUE(acct_->Retain(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Unmap(0x1000000, 2 * kMiB), 1);
  EXPECT_TRUE(acct_->Release(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Used(0), 2 * kMiB);  // one reference left
  EXPECT_TRUE(acct_->Release(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, UnmapTakesEveryMappingThatBeginsInTheRange) {
  for (uint64_t h : {1, 2, 3}) {
    ASSERT_TRUE(acct_->Reserve(0, 2 * kMiB));
    ASSERT_TRUE(acct_->Track(Space::kVmmHandle, h, 0, 2 * kMiB));
    ASSERT_TRUE(acct_->Map(h * 2 * kMiB, 2 * kMiB, h));
    ASSERT_TRUE(acct_->Release(Space::kVmmHandle, h));
  }
  EXPECT_EQ(acct_->Used(0), 6 * kMiB);
  EXPECT_EQ(acct_->Unmap(2 * kMiB, 4 * kMiB), 2);  // handles 1 and 2, not 3
  EXPECT_EQ(acct_->Used(0), 2 * kMiB);
  EXPECT_EQ(acct_->Unmap(0, 2 * kMiB), 0);  // nothing mapped there
  EXPECT_EQ(acct_->Unmap(6 * kMiB, ~0ull), 1);  // to the end of the address space
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, AReusedHandleForgetsTheOldOnesMappings) {
  ASSERT_TRUE(acct_->Reserve(0, 2 * kMiB));
  ASSERT_TRUE(acct_->Track(Space::kVmmHandle, 7, 0, 2 * kMiB));
  ASSERT_TRUE(acct_->Map(0x1000000, 2 * kMiB, 7));
  // We missed its release and unmap; the driver hands the value out again.
  ASSERT_TRUE(acct_->Reserve(0, 4 * kMiB));
  ASSERT_TRUE(acct_->Track(Space::kVmmHandle, 7, 0, 4 * kMiB));
  EXPECT_EQ(acct_->Mappings(), 0u);
  EXPECT_TRUE(acct_->Release(Space::kVmmHandle, 7));
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, AProcesssContextsOnAGpuAreChargedOnce) {
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  acct_->PrimaryRetained(0);
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));  // a second retain: no second charge
  acct_->PrimaryRetained(0);
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  EXPECT_TRUE(acct_->ContextCreated(0x100, 0));
  EXPECT_EQ(acct_->Contexts(0), 3u);
  EXPECT_EQ(acct_->Used(0), 8 * kMiB);
  EXPECT_EQ(acct_->Held(0), 8 * kMiB);
  EXPECT_TRUE(acct_->PrimaryReleased(0));
  EXPECT_TRUE(acct_->PrimaryReleased(0));
  EXPECT_FALSE(acct_->PrimaryReleased(0));  // never retained through us
  EXPECT_EQ(acct_->Used(0), 8 * kMiB);      // the created one still holds it
  EXPECT_FALSE(acct_->ContextDestroyed(0x200));
  EXPECT_TRUE(acct_->ContextDestroyed(0x100));
  EXPECT_EQ(acct_->Used(0), 0u);
  EXPECT_EQ(acct_->Contexts(0), 0u);
}

TEST_F(AccountantTest, AFirstContextTheShareCannotHoldIsRefused) {
  ASSERT_TRUE(acct_->Reserve(0, 60 * kMiB));
  EXPECT_FALSE(acct_->OpenContext(0, 8 * kMiB));
  EXPECT_EQ(acct_->Contexts(0), 0u);
  EXPECT_EQ(acct_->Used(0), 60 * kMiB);
  EXPECT_EQ(layout_->gpus[0].oom_refusals.load(), 1u);
  acct_->Unreserve(0, 60 * kMiB);
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  // Once the process has its context there, more of them cost nothing more,
  // however full the share.
  ASSERT_TRUE(acct_->Reserve(0, 56 * kMiB));
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  acct_->CloseContext(0);  // that driver call failed
  acct_->CloseContext(0);
  EXPECT_EQ(acct_->Used(0), 56 * kMiB);
  acct_->CloseContext(0);  // none open: nothing
  EXPECT_EQ(acct_->Used(0), 56 * kMiB);
}

TEST_F(AccountantTest, ContextChargeIsWhatTheFirstContextWasCharged) {
  // A zero size (TESSERA_GPU_CONTEXT_MIB=0) opens references without a charge.
  EXPECT_TRUE(acct_->OpenContext(1, 0));
  EXPECT_TRUE(acct_->OpenContext(0, 4 * kMiB));
  EXPECT_TRUE(acct_->OpenContext(0, 16 * kMiB));  // not the first: ignored
  EXPECT_EQ(acct_->Used(0), 4 * kMiB);
  EXPECT_EQ(acct_->Used(1), 0u);
  acct_->CloseContext(0);
  acct_->CloseContext(0);
  acct_->CloseContext(1);
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, AReusedContextHandleTakesOverTheOldReference) {
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  EXPECT_TRUE(acct_->ContextCreated(0x100, 0));
  // We missed its destruction; the driver hands the handle out again.
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  EXPECT_TRUE(acct_->ContextCreated(0x100, 0));
  EXPECT_EQ(acct_->Contexts(0), 1u);
  EXPECT_TRUE(acct_->ContextDestroyed(0x100));
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, PoolsAreChargedByReserve) {
  EXPECT_TRUE(acct_->SetPoolReserved(0xabc, 0, 32 * kMiB, false));
  EXPECT_EQ(acct_->Used(0), 32 * kMiB);
  EXPECT_FALSE(acct_->SetPoolReserved(0xabc, 0, 80 * kMiB, false));  // growth refused
  EXPECT_EQ(acct_->Used(0), 32 * kMiB);
  // Prepaid growth is folded in, not charged twice.
  ASSERT_TRUE(acct_->Reserve(0, 16 * kMiB));
  EXPECT_TRUE(acct_->SetPoolReserved(0xabc, 0, 48 * kMiB, false, 16 * kMiB));
  EXPECT_EQ(acct_->Used(0), 48 * kMiB);
  // Prepaid more than the pool grew: the rest goes back.
  ASSERT_TRUE(acct_->Reserve(0, 8 * kMiB));
  EXPECT_TRUE(acct_->SetPoolReserved(0xabc, 0, 50 * kMiB, false, 8 * kMiB));
  EXPECT_EQ(acct_->Used(0), 50 * kMiB);
  ASSERT_TRUE(acct_->Track(Space::kAsyncPtr, 0x5000, 0, 0, 0xabc));
  EXPECT_EQ(acct_->PoolOf(0x5000), 0xabcu);
  EXPECT_EQ(acct_->PoolGpu(0xabc), 0);
  EXPECT_TRUE(acct_->SetPoolReserved(0xabc, 0, 2 * kMiB, false));  // trimmed
  EXPECT_EQ(acct_->Used(0), 2 * kMiB);
  acct_->DropPool(0xabc);
  EXPECT_EQ(acct_->Used(0), 0u);
  EXPECT_EQ(acct_->PoolOf(0x5000), 0u);
  EXPECT_EQ(acct_->PoolGpu(0xabc), -1);
}

TEST_F(AccountantTest, GraphReserveMayPassTheLimitButFreeNeverWraps) {
  acct_->SetGraphReserved(0, 100 * kMiB);
  EXPECT_EQ(acct_->Used(0), 100 * kMiB);
  EXPECT_FALSE(acct_->Reserve(0, 1));
  acct_->SetGraphReserved(0, 0);
  EXPECT_EQ(acct_->Used(0), 0u);
}

TEST_F(AccountantTest, ChildForgetsParentAllocations) {
  ASSERT_TRUE(acct_->Reserve(0, 10));
  ASSERT_TRUE(acct_->Track(Space::kDevicePtr, 0x1000, 0, 10));
  Result<int> child = region::RegisterProcess(*layout_, getpid());
  ASSERT_TRUE(child.ok());
  acct_->ResetForNewProcess(*child);
  EXPECT_FALSE(acct_->Release(Space::kDevicePtr, 0x1000));
  EXPECT_EQ(acct_->Used(0), 10u);  // still the parent's
  EXPECT_EQ(acct_->Held(0), 0u);
}

TEST_F(AccountantTest, ChildHasNoContextsOrMappingsOfItsParent) {
  ASSERT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  acct_->PrimaryRetained(0);
  ASSERT_TRUE(acct_->Reserve(0, 2 * kMiB));
  ASSERT_TRUE(acct_->Track(Space::kVmmHandle, 7, 0, 2 * kMiB));
  ASSERT_TRUE(acct_->Map(0x1000000, 2 * kMiB, 7));
  Result<int> child = region::RegisterProcess(*layout_, getpid());
  ASSERT_TRUE(child.ok());
  acct_->ResetForNewProcess(*child);
  EXPECT_EQ(acct_->Contexts(0), 0u);
  EXPECT_EQ(acct_->Mappings(), 0u);
  EXPECT_FALSE(acct_->PrimaryReleased(0));
  // The child's own first context is charged to the child.
  EXPECT_TRUE(acct_->OpenContext(0, 8 * kMiB));
  EXPECT_EQ(acct_->Held(0), 8 * kMiB);
  EXPECT_EQ(acct_->Used(0), 18 * kMiB);
}

TEST_F(AccountantTest, RandomSequencesNeverUnderflow) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      std::mt19937_64 rng(t);
      std::vector<uint64_t> live;
      for (int i = 0; i < 5000; ++i) {
        if (live.empty() || rng() % 3 != 0) {
          uint64_t n = 1 + rng() % (4 * kMiB);
          uint64_t key = (static_cast<uint64_t>(t) << 40) | i;
          if (acct_->Reserve(0, n)) {
            ASSERT_TRUE(acct_->Track(Space::kDevicePtr, key, 0, n));
            live.push_back(key);
          }
        } else {
          size_t k = rng() % live.size();
          EXPECT_TRUE(acct_->Release(Space::kDevicePtr, live[k]));
          // A stray double free must not take anything.
          EXPECT_FALSE(acct_->Release(Space::kDevicePtr, live[k]));
          live.erase(live.begin() + k);
        }
        ASSERT_LE(acct_->Used(0), 64 * kMiB);
      }
      for (uint64_t key : live) EXPECT_TRUE(acct_->Release(Space::kDevicePtr, key));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acct_->Used(0), 0u);
  EXPECT_EQ(acct_->Held(0), 0u);
  EXPECT_LE(layout_->gpus[0].peak_bytes.load(), 64 * kMiB);
}

}  // namespace
}  // namespace tessera::cuda
