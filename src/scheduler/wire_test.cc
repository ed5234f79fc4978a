#include "scheduler/wire.h"

#include <gtest/gtest.h>

namespace tessera::scheduler {
namespace {

using nlohmann::json;

TEST(WireTest, StringsAreEscaped) {
  std::string out;
  AppendJsonString(out, std::string("a\"b\\c\nd\x01\xc3\xa9", 10));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001\xc3\xa9\"");
  EXPECT_EQ(json::parse(out), std::string("a\"b\\c\nd\x01\xc3\xa9", 10));
}

TEST(WireTest, FilterResultInBothForms) {
  auto args = ParseExtenderArgs(R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a","b","c"]})");
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  FilterOutcome out;
  out.passed = {0};
  out.failed = {{1, "full"}};
  out.unresolvable = {{2, "not a \"GPU\" node"}};
  EXPECT_EQ(WriteFilterResult(*args, out),
            R"({"Nodes":null,"NodeNames":["a"],"FailedNodes":{"b":"full"},)"
            R"("FailedAndUnresolvableNodes":{"c":"not a \"GPU\" node"},"Error":""})");
  auto nodes = ParseExtenderArgs(
      R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}})");
  ASSERT_TRUE(nodes.ok());
  EXPECT_FALSE(nodes->names_form);
  EXPECT_EQ(nodes->node_names, (std::vector<std::string>{"a", "b"}));
  out = FilterOutcome{};
  out.passed = {1};
  EXPECT_EQ(WriteFilterResult(*nodes, out),
            R"({"Nodes":{"items":[{"metadata":{"name":"b"}}]},"NodeNames":null,"FailedNodes":{},)"
            R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST(WireTest, PriorityAndBinding) {
  ExtenderArgs args;
  args.node_names = {"a", "b\"c"};
  EXPECT_EQ(WriteHostPriorityList(args, {10, 0}), R"([{"Host":"a","Score":10},{"Host":"b\"c","Score":0}])");
  args.node_names.clear();
  EXPECT_EQ(WriteHostPriorityList(args, {}), "[]");
  EXPECT_EQ(WriteBindingResult(""), R"({"Error":""})");
  auto b = ParseBindingArgs(R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->pod_uid, "u");
  b = ParseBindingArgs(R"({"PodName":"p","PodNamespace":"","Node":"n"})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->pod_namespace, "default");
  EXPECT_EQ(b->pod_uid, "");
}

TEST(WireTest, DeepNestingIsRefused) {
  const std::string deep = R"({"Pod":)" + std::string(1000, '[') + std::string(1000, ']') + "}";
  auto args = ParseExtenderArgs(deep);
  ASSERT_FALSE(args.ok());
  EXPECT_NE(args.status().message().find("nested"), std::string::npos);
  // Brackets inside strings do not count.
  auto ok = ParseExtenderArgs(R"({"Pod":{"metadata":{"name":")" + std::string(1000, '[') + R"("}},"NodeNames":[]})");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace tessera::scheduler
