#include "core/timestamp.h"

#include <gtest/gtest.h>

namespace tessera::core {
namespace {

using std::chrono::seconds;

WallTime At(int64_t unix_seconds) { return WallTime(seconds(unix_seconds)); }

TEST(TimestampTest, FormatsUtcToWholeSeconds) {
  EXPECT_EQ(FormatRfc3339(At(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(At(1772368205) + std::chrono::milliseconds(900)), "2026-03-01T12:30:05Z");
}

TEST(TimestampTest, ParsesWhatKubernetesWrites) {
  auto t = ParseRfc3339("2026-03-01T12:30:05Z");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, At(1772368205));
  t = ParseRfc3339("2026-03-01T12:30:05.250000Z");  // MicroTime
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, At(1772368205) + std::chrono::milliseconds(250));
  t = ParseRfc3339("2026-03-01T14:30:05+02:00");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, At(1772368205));
  t = ParseRfc3339("2024-02-29t00:00:00z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, At(1709164800));
}

TEST(TimestampTest, HandlesTheYearsATimePointHolds) {
  EXPECT_EQ(FormatRfc3339(kMinRfc3339Time), "1700-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(kMaxRfc3339Time), "2199-12-31T23:59:59Z");
  EXPECT_EQ(ParseRfc3339("1700-01-01T00:00:00Z").value(), kMinRfc3339Time);
  EXPECT_EQ(ParseRfc3339("2199-12-31T23:59:59.999Z").value(), kMaxRfc3339Time + std::chrono::milliseconds(999));
  for (const char* outside : {"1699-12-31T23:59:59Z", "1700-01-01T00:30:00+01:00", "2200-01-01T00:00:00Z",
                              "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}) {
    auto t = ParseRfc3339(outside);
    ASSERT_FALSE(t.ok()) << outside;
    EXPECT_NE(t.status().message().find("outside the years 1700..2199"), std::string::npos) << t.status().message();
  }
}

TEST(TimestampTest, RoundTrips) {
  for (int64_t s : {int64_t{0}, int64_t{951782400}, int64_t{1772368205}, int64_t{7258118399}}) {
    auto back = ParseRfc3339(FormatRfc3339(At(s)));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, At(s));
  }
}

TEST(TimestampTest, RejectsMalformed) {
  for (const char* text : {"", "2026-03-01", "2026-03-01T12:30:05", "2026-13-01T00:00:00Z",
                           "2025-02-29T00:00:00Z", "2026-03-01T24:00:00Z", "2026-03-01T12:30:05.Z",
                           "2026-03-01T12:30:05Zjunk", "2026-03-01T12:30:05+0200", "yesterday"}) {
    auto t = ParseRfc3339(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("is not an RFC 3339 time"), std::string::npos) << t.status().message();
  }
}

}  // namespace
}  // namespace tessera::core
