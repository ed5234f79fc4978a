#include "node/dir_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace tessera::node {
namespace {

class DirWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dir-watch-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DirWatchTest, ReportsCreatedAndDeletedFiles) {
  auto watch = DirWatch::Open(dir_);
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  auto none = watch->Wait(std::chrono::milliseconds(10));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  std::ofstream(dir_ + "/kubelet.sock") << "x";
  std::filesystem::remove(dir_ + "/kubelet.sock");
  std::vector<DirEvent> seen;
  for (int i = 0; i < 10 && seen.size() < 2; ++i) {
    auto events = watch->Wait(std::chrono::milliseconds(100));
    ASSERT_TRUE(events.ok());
    seen.insert(seen.end(), events->begin(), events->end());
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (DirEvent{"kubelet.sock", true}));
  EXPECT_EQ(seen[1], (DirEvent{"kubelet.sock", false}));
}

TEST_F(DirWatchTest, MissingFolderIsNotFound) {
  auto watch = DirWatch::Open(dir_ + "/absent");
  ASSERT_FALSE(watch.ok());
  EXPECT_EQ(watch.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::node
