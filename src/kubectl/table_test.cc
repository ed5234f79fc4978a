#include "kubectl/table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tessera::kubectl {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

Table Sample() {
  Table t({{"NODE"}, {"GPU", Align::kRight}, {"PODS", Align::kLeft, /*shrink=*/1, /*min_width=*/6}});
  t.AddRow({{"a100-0"}, {"0"}, {"default/bert-serving-0, default/bert-serving-1"}});
  t.AddRow({{"h100"}, {"12"}, {""}});
  return t;
}

TEST(TableTest, AlignsColumnsToTheWidestCell) {
  EXPECT_EQ(Sample().Render({}),
            "NODE    GPU  PODS\n"
            "a100-0    0  default/bert-serving-0, default/bert-serving-1\n"
            "h100     12\n");
}

TEST(TableTest, CutsShrinkableColumnsWithAnEllipsisToFitTheWidth) {
  const std::string text = Sample().Render({.width = 30});
  for (const auto& line : Lines(text)) EXPECT_LE(DisplayWidth(line), 30) << line;
  EXPECT_EQ(Lines(text)[1], "a100-0    0  default/bert-ser\xe2\x80\xa6");
  // Columns that may not shrink are kept whole even when that overflows.
  const std::string narrow = Sample().Render({.width = 10});
  EXPECT_EQ(Lines(narrow)[1], "a100-0    0  defau\xe2\x80\xa6");
}

TEST(TableTest, ColourDoesNotChangeAlignment) {
  Table t({{"A"}, {"B", Align::kRight}});
  t.AddRow({{"x", Style::kBad}, {"100%", Style::kWarn}});
  const std::string plain = t.Render({});
  const std::string color = t.Render({.color = true});
  EXPECT_EQ(plain, "A     B\nx  100%\n");
  EXPECT_EQ(color, "\x1b[1mA\x1b[0m     \x1b[1mB\x1b[0m\n\x1b[31mx\x1b[0m  \x1b[33m100%\x1b[0m\n");
  std::string stripped;
  for (size_t i = 0; i < color.size(); ++i) {
    if (color[i] == '\x1b') {
      i = color.find('m', i);
      continue;
    }
    stripped += color[i];
  }
  EXPECT_EQ(stripped, plain);
}

TEST(TableTest, EllipsizeCountsCharactersNotBytes) {
  EXPECT_EQ(DisplayWidth("a\xe2\x80\xa6"), 2);
  EXPECT_EQ(Ellipsize("abcdef", 6), "abcdef");
  EXPECT_EQ(Ellipsize("abcdef", 4), "abc\xe2\x80\xa6");
  EXPECT_EQ(Ellipsize("\xc3\xa9\xc3\xa9\xc3\xa9", 2), "\xc3\xa9\xe2\x80\xa6");
  EXPECT_EQ(Ellipsize("abc", 0), "");
}

TEST(TableTest, HeadersCanBeLeftOut) {
  EXPECT_EQ(Sample().Render({.headers = false}).substr(0, 6), "a100-0");
}

}  // namespace
}  // namespace tessera::kubectl
