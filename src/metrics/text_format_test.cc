#include "metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tessera::metrics {
namespace {

TEST(TextFormatTest, ChecksNames) {
  for (const char* ok : {"a", "tessera_node_allocations_total", "_x", "a:b", "A9_"}) EXPECT_TRUE(IsValidMetricName(ok)) << ok;
  for (const char* bad : {"", "9a", "a-b", "a b", "é"}) EXPECT_FALSE(IsValidMetricName(bad)) << bad;
  for (const char* ok : {"model", "_x", "gpu_uuid", "a9"}) EXPECT_TRUE(IsValidLabelName(ok)) << ok;
  for (const char* bad : {"", "9a", "a:b", "__name__", "__x", "a-b"}) EXPECT_FALSE(IsValidLabelName(bad)) << bad;
}

TEST(TextFormatTest, EscapesHelpAndLabelValues) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");  // quotes stay in HELP
  EXPECT_EQ(EscapeLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  EXPECT_EQ(EscapeLabelValue(""), "");
  EXPECT_EQ(EscapeLabelValue("plain ünïcode"), "plain ünïcode");
}

TEST(TextFormatTest, FormatsLabels) {
  EXPECT_EQ(FormatLabels({}, {}), "");
  EXPECT_EQ(FormatLabels({"verb"}, {"filter"}), "{verb=\"filter\"}");
  EXPECT_EQ(FormatLabels({"ns", "pod"}, {"a\"b", "c\\d\ne"}), "{ns=\"a\\\"b\",pod=\"c\\\\d\\ne\"}");
}

TEST(TextFormatTest, FormatsValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-2), "-2");
  EXPECT_EQ(FormatValue(85899345920.0), "85899345920");  // 80 GiB in bytes
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatValue(0.00025), "0.00025");
  EXPECT_EQ(FormatValue(1e-7), "1e-07");
  EXPECT_EQ(FormatValue(1.5e20), "1.5e+20");
  EXPECT_EQ(FormatValue(0.1 + 0.2), "0.30000000000000004");  // round-trips
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

}  // namespace
}  // namespace tessera::metrics
