#include "tests/support/http_probe.h"

#include <gtest/gtest.h>

namespace tessera::testing {
namespace {

const char* kPage =
    "# HELP a_total A.\n"
    "# TYPE a_total counter\n"
    "a_total{node=\"n1\"} 2\n"
    "a_total{node=\"n2\"} 3.5\n"
    "a_total_other 100\n"
    "b 7\n";

TEST(HttpProbeTest, SumSamplesAddsEveryLabelSetOfOneName) {
  EXPECT_DOUBLE_EQ(*SumSamples(kPage, "a_total"), 5.5);
  EXPECT_DOUBLE_EQ(*SumSamples(kPage, "b"), 7);
  EXPECT_EQ(SumSamples(kPage, "a").status().code(), StatusCode::kNotFound);
  EXPECT_DOUBLE_EQ(*SampleValue(kPage, "a_total{node=\"n2\"}"), 3.5);
}

}  // namespace
}  // namespace tessera::testing
