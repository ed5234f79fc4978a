#include "kubectl/terminal.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace tessera::kubectl {
namespace {

TEST(TerminalTest, ColourOnlyOnATerminalWithoutNoColor) {
  EXPECT_TRUE(UseColor(ColorMode::kAuto, true, false));
  EXPECT_FALSE(UseColor(ColorMode::kAuto, false, false));
  EXPECT_FALSE(UseColor(ColorMode::kAuto, true, true));
  EXPECT_TRUE(UseColor(ColorMode::kAlways, false, true));
  EXPECT_FALSE(UseColor(ColorMode::kNever, true, false));
  EXPECT_EQ(ParseColorMode("always").value(), ColorMode::kAlways);
  EXPECT_FALSE(ParseColorMode("sometimes").ok());
}

TEST(TerminalTest, WidthFromColumnsWhenNotATerminal) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_EQ(TerminalWidth(fds[1], "132"), 132);
  EXPECT_EQ(TerminalWidth(fds[1], nullptr), 0);
  EXPECT_EQ(TerminalWidth(fds[1], "wide"), 0);
  EXPECT_EQ(TerminalWidth(fds[1], "-5"), 0);
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace tessera::kubectl
