#include "region/board.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

namespace tessera::region {
namespace {

class BoardDir {
 public:
  BoardDir() {
    char tmpl[] = "/tmp/tessera-board-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~BoardDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(BoardTest, OpenCreatesOnceAndIsSharedAcrossProcesses) {
  BoardDir d;
  const std::string path = d.path() + "/GPU-0.board";
  Result<Board*> a = OpenBoard(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const int slot = ClaimBoardSlot(**a, 7, 1'000);
  ASSERT_EQ(slot, 0);
  MarkBusy(**a, slot, 1'000);
  // Another process (another container on the GPU) maps the same file and
  // sees the mark.
  const pid_t pid = fork();
  if (pid == 0) {
    Result<Board*> b = OpenBoard(path);
    _exit(b.ok() && OthersBusy(**b, -1, 2'000) == 1 && OthersBusy(**b, 0, 2'000) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(BoardTest, RefusesAFileOfAnotherLayout) {
  BoardDir d;
  const std::string path = d.path() + "/bad.board";
  std::ofstream(path) << "not a board";
  Result<Board*> b = OpenBoard(path);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().ToString().find("size"), std::string::npos) << b.status().ToString();
  EXPECT_FALSE(OpenBoard(d.path() + "/no-such-folder/x.board").ok());
}

TEST(BoardTest, MarksExpireAndAreRefreshedOnlyNearTheirEnd) {
  auto b = std::make_unique<Board>();
  const int me = ClaimBoardSlot(*b, 1, 0);
  const int other = ClaimBoardSlot(*b, 2, 0);
  ASSERT_EQ(me, 0);
  ASSERT_EQ(other, 1);
  EXPECT_EQ(OthersBusy(*b, me, 100), 0u);
  MarkBusy(*b, other, 100);
  EXPECT_EQ(OthersBusy(*b, me, 100), 1u);
  EXPECT_EQ(OthersBusy(*b, other, 100), 0u);  // its own mark is not another context
  // Refreshed only once less than half a lease is left.
  MarkBusy(*b, other, 100 + kBoardLeaseUs / 4);
  EXPECT_EQ(b->slot[other].busy_until_us.load(), 100 + kBoardLeaseUs);
  MarkBusy(*b, other, 100 + kBoardLeaseUs * 3 / 4);
  EXPECT_EQ(b->slot[other].busy_until_us.load(), 100 + kBoardLeaseUs * 7 / 4);
  // A process that died busy: its mark runs out within one lease.
  EXPECT_EQ(OthersBusy(*b, me, 100 + kBoardLeaseUs * 7 / 4), 0u);
  // Idle at once when told.
  MarkBusy(*b, other, 10'000'000);
  MarkIdle(*b, other, 10'000'001);
  EXPECT_EQ(OthersBusy(*b, me, 10'000'001), 0u);
}

TEST(BoardTest, AMarkFromAnotherClockFarAheadIsIgnored) {
  auto b = std::make_unique<Board>();
  const int other = ClaimBoardSlot(*b, 2, 0);
  MarkBusy(*b, other, 1'000'000'000);  // a clock 1000 s ahead of the reader's
  EXPECT_EQ(OthersBusy(*b, -1, 1'000), 0u);
}

TEST(BoardTest, StaleSlotsAreTakenOverWhenTheBoardIsFull) {
  auto b = std::make_unique<Board>();
  for (int i = 0; i < kBoardSlots; ++i) ASSERT_EQ(ClaimBoardSlot(*b, 10 + i, 0), i);
  EXPECT_EQ(ClaimBoardSlot(*b, 99, 1'000), -1);  // all live
  MarkBusy(*b, 5, 1'000);                        // only slot 5 was written since
  const int got = ClaimBoardSlot(*b, 99, kBoardSlotStaleUs + 1);
  EXPECT_GE(got, 0);
  EXPECT_NE(got, 5);
  EXPECT_EQ(b->slot[got].owner.load(), 99u);
  // Released by its owner only.
  ReleaseBoardSlot(*b, got, 12345);
  EXPECT_EQ(b->slot[got].owner.load(), 99u);
  ReleaseBoardSlot(*b, got, 99);
  EXPECT_EQ(b->slot[got].owner.load(), 0u);
  EXPECT_EQ(ClaimBoardSlot(*b, 100, kBoardSlotStaleUs + 2), got);
}

}  // namespace
}  // namespace tessera::region
