// Contexts sharing one GPU at once, on the fake driver: the fake time-slices
// GPU 0 between this process and saturating contexts of other processes
// (tessera_fake_cuda_set_neighbours), so the events around each launch span
// their slices too, as on a real GPU. This process is a container with a
// hard cap (TESSERA_GPU_CORE_PERCENT_0, CMakeLists.txt) and a busy board
// folder of its own (main: TESSERA_GPU_BOARD_DIR), on which the test
// publishes the neighbours' marks as their processes' libraries would.
// The gate runs on the fake's virtual clock (TESSERA_TEST_CLOCK=fake_cuda).
// Accuracy is the GPU time that was this process's own, per window, over
// 200 windows, against the cap.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"
#include "region/board.h"

namespace {

constexpr uint64_t kWindowUs = 100'000;
constexpr int kWindows = 200;

std::string g_board_dir;  // set by main
tessera::region::Board* g_board = nullptr;
std::vector<int> g_neighbour_slots;  // marks the test keeps busy, claimed in order
constexpr uint64_t kNeighbourToken = 0x7e570000;  // + the neighbour's index

double Cap() {
  const char* v = std::getenv("TESSERA_GPU_CORE_PERCENT_0");
  return v != nullptr ? std::atof(v) / 100.0 : 1.0;
}

void RefreshNeighbours(uint64_t now_us) {
  for (int s : g_neighbour_slots) tessera::region::MarkBusy(*g_board, s, now_us);
}
void Tick(uint64_t now_us, void*) { RefreshNeighbours(now_us); }

class ContentionTest : public fake_test::DeviceTest {
 protected:
  void SetUp() override {
    fake_test::DeviceTest::SetUp();
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream2_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    if (g_board == nullptr) {
      // No UUID configured: the container's GPU 0 is "gpu0".
      tessera::Result<tessera::region::Board*> b =
          tessera::region::OpenBoard(g_board_dir + "/gpu0.board");
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      g_board = *b;
    }
    kernel_ = reinterpret_cast<CUfunction>(uintptr_t{0x2000});
    tessera_fake_cuda_set_kernel_us(kernel_, 1000);
  }
  void TearDown() override {
    cuCtxSynchronize();
    tessera_fake_cuda_set_tick(0, nullptr, nullptr);
    tessera_fake_cuda_set_neighbours(0, 0);
    for (size_t i = 0; i < g_neighbour_slots.size(); ++i) {
      tessera::region::ReleaseBoardSlot(*g_board, g_neighbour_slots[i], kNeighbourToken + i);
    }
    g_neighbour_slots.clear();
    cuStreamDestroy_v2(stream_);
    cuStreamDestroy_v2(stream2_);
  }

  // `n` saturating neighbours, seen on the board when `published`.
  void Neighbours(uint32_t n, bool published) {
    tessera_fake_cuda_set_neighbours(0, n);
    if (!published) return;
    for (uint32_t i = 0; i < n; ++i) {
      const int slot = tessera::region::ClaimBoardSlot(*g_board, kNeighbourToken + i, tessera_fake_cuda_now_us());
      ASSERT_GE(slot, 0);
      g_neighbour_slots.push_back(slot);
    }
    RefreshNeighbours(tessera_fake_cuda_now_us());
    tessera_fake_cuda_set_tick(1000, &Tick, nullptr);
  }

  // Saturates GPU 0 with `launch` for kWindows windows from the next window
  // boundary; returns this process's own share of that time. `seen`: the
  // most busy slots the board showed at once meanwhile.
  template <typename Launch>
  double Saturate(Launch launch, uint32_t* seen = nullptr) {
    const uint64_t t0 = (tessera_fake_cuda_now_us() / kWindowUs + 1) * kWindowUs;
    tessera_fake_cuda_sleep_until_us(t0);
    const uint64_t t1 = t0 + kWindows * kWindowUs;
    uint32_t most = 0;
    while (tessera_fake_cuda_now_us() < t1) {
      RefreshNeighbours(tessera_fake_cuda_now_us());
      if (launch() != CUDA_SUCCESS) return -1;
      most = std::max(most, tessera::region::OthersBusy(*g_board, -1, tessera_fake_cuda_now_us()));
    }
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    if (seen != nullptr) *seen = most;
    const double got = static_cast<double>(tessera_fake_cuda_busy_us(0, t0, t1)) / (t1 - t0);
    std::printf("  own GPU time %.4f of %d windows (cap %.2f)\n", got, kWindows, Cap());
    return got;
  }

  CUresult Launch(CUstream s) { return cuLaunchKernel(kernel_, 64, 1, 1, 128, 1, 1, 0, s, nullptr, nullptr); }

  CUstream stream_ = nullptr;
  CUstream stream2_ = nullptr;
  CUfunction kernel_ = nullptr;
};

TEST_F(ContentionTest, ANeighbourNotOnTheBoardIsChargedToUsAsBefore) {
  // What the gate did before the board (and still does for a neighbour
  // without the library): each span covers the neighbour's slices, so the
  // cap yields half of itself (the H200: 0.153 for 30 %).
  Neighbours(1, /*published=*/false);
  const double got = Saturate([&] { return Launch(stream_); });
  EXPECT_NEAR(got, Cap() / 2, 0.03);
}

TEST_F(ContentionTest, ABusyNeighbourOnTheBoardIsNotChargedToUs) {
  Neighbours(1, /*published=*/true);
  uint32_t seen = 0;
  const double got = Saturate([&] { return Launch(stream_); }, &seen);
  EXPECT_NEAR(got, Cap(), 0.03);
  EXPECT_EQ(seen, 2u);  // the neighbour and this process
}

TEST_F(ContentionTest, TwoBusyNeighboursOnTheBoard) {
  Neighbours(2, /*published=*/true);
  const double got = Saturate([&] { return Launch(stream_); });
  EXPECT_NEAR(got, Cap(), 0.03);
}

TEST_F(ContentionTest, OwnStreamsAreOneContext) {
  // Alone, on two streams at once: its own concurrent work is not another
  // context (one mark on the board), so nothing is discounted.
  int i = 0;
  uint32_t seen = 0;
  const double got = Saturate([&] { return Launch((i++ & 1) ? stream_ : stream2_); }, &seen);
  EXPECT_NEAR(got, Cap(), 0.03);
  EXPECT_EQ(seen, 1u);
}

TEST_F(ContentionTest, OwnMarkIsClearedWhenItsWorkIsDone) {
  for (int i = 0; i < 20; ++i) ASSERT_EQ(Launch(stream_), CUDA_SUCCESS);
  EXPECT_EQ(tessera::region::OthersBusy(*g_board, -1, tessera_fake_cuda_now_us()), 1u);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  tessera_fake_cuda_sleep_until_us(tessera_fake_cuda_now_us() + 10'000);
  // The helper (polling in real time) sees the work done and clears the mark.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (tessera::region::OthersBusy(*g_board, -1, tessera_fake_cuda_now_us()) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(tessera::region::OthersBusy(*g_board, -1, tessera_fake_cuda_now_us()), 0u);
}

}  // namespace

int main(int argc, char** argv) {
  // A fresh board folder, read by the runtime at the first CUDA call.
  char tmpl[] = "/tmp/tessera-contention.XXXXXX";
  const char* root = mkdtemp(tmpl);
  if (root == nullptr) return 1;
  g_board_dir = root;
  setenv("TESSERA_GPU_BOARD_DIR", root, 1);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::filesystem::remove_all(root);
  return rc;
}
