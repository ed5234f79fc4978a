#include "scheduler/internal/json_scan.h"

#include <gtest/gtest.h>

namespace tessera::scheduler::internal {
namespace {

TEST(JsonScanTest, SplitsTopLevelMembers) {
  auto m = SplitObject(R"( {"Pod" : {"a":[1,"}"]}, "N\u0041":null ,"x":-1.5e3,"s":"q\"}"} )");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[0].key, "Pod");
  EXPECT_EQ((*m)[0].value, R"({"a":[1,"}"]})");
  EXPECT_EQ((*m)[1].key, "NA");
  EXPECT_EQ((*m)[1].value, "null");
  EXPECT_EQ((*m)[2].value, "-1.5e3");
  EXPECT_EQ((*m)[3].value, R"("q\"}")");
  auto empty = SplitObject(" {} ");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(JsonScanTest, RefusesBrokenObjects) {
  for (const char* bad : {"", "[]", "{", "{}x", R"({"a"})", R"({"a":})", R"({"a":1,})", R"({"a":[1})", R"({"a":{]})",
                          R"({"a":1 "b":2})", R"({a:1})", R"({"a":"x)", "{\"a\":1}}", R"({"a\":1})"}) {
    EXPECT_FALSE(SplitObject(bad).ok()) << bad;
  }
  const std::string deep = R"({"a":)" + std::string(300, '[') + std::string(300, ']') + "}";
  EXPECT_FALSE(SplitObject(deep).ok());
  const std::string ok = R"({"a":)" + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_TRUE(SplitObject(ok).ok());
}

TEST(JsonScanTest, PlainStringArrays) {
  auto a = PlainStringArray(R"([ "n1","n-2" , "n.3" ])");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (std::vector<std::string>{"n1", "n-2", "n.3"}));
  EXPECT_EQ(PlainStringArray("[]"), std::vector<std::string>{});
  for (const char* other : {R"(["a\"b"])", "[\"\xc3\xa9\"]", R"(["a",1])", R"(["a",])", R"(["a")", "[\"a\"]x", "null",
                            "{}", "[\"a\tb\"]"}) {
    EXPECT_FALSE(PlainStringArray(other).has_value()) << other;
  }
}

TEST(JsonScanTest, PlainStrings) {
  EXPECT_EQ(PlainString(R"("abc-1")"), "abc-1");
  EXPECT_EQ(PlainString(R"( "" )"), "");
  for (const char* other : {R"("a\"b")", "\"\xc3\xa9\"", R"("a)", R"("a"x)", "12", "null", "[\"a\"]", "\"a\tb\""}) {
    EXPECT_FALSE(PlainString(other).has_value()) << other;
  }
}

}  // namespace
}  // namespace tessera::scheduler::internal
