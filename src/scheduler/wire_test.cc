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
  EXPECT_EQ(nodes->node_names(), (std::vector<std::string>{"a", "b"}));
  out = FilterOutcome{};
  out.passed = {1};
  EXPECT_EQ(WriteFilterResult(*nodes, out),
            R"({"Nodes":{"items":[{"metadata":{"name":"b"}}]},"NodeNames":null,"FailedNodes":{},)"
            R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST(WireTest, PriorityAndBinding) {
  ExtenderArgs args;
  args.nodes = std::make_shared<const NodeNamesCache::List>(NodeNamesCache::List{{"a", "b\"c"}, false});
  EXPECT_EQ(WriteHostPriorityList(args, {10, 0}), R"([{"Host":"a","Score":10},{"Host":"b\"c","Score":0}])");
  args.nodes = std::make_shared<const NodeNamesCache::List>();
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

// kube-scheduler's plain bodies are scanned; anything else goes through
// nlohmann, with the same answers and errors.
TEST(WireTest, BindingArgsScannedOrParsedAlike) {
  auto plain = ParseBindingArgs(R"( {"PodName":"p", "PodNamespace":"ns","PodUID":"u","Node":"n"} )");
  auto escaped = ParseBindingArgs(R"({"PodName":"\u0070","PodNamespace":"ns","PodUID":"u","Node":"n","Extra":[1]})");
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(escaped.ok());
  for (const BindingArgs* b : {&*plain, &*escaped}) {
    EXPECT_EQ(b->pod_name, "p");
    EXPECT_EQ(b->pod_namespace, "ns");
    EXPECT_EQ(b->pod_uid, "u");
    EXPECT_EQ(b->node, "n");
  }
  auto null_uid = ParseBindingArgs(R"({"PodName":"p","PodNamespace":"ns","PodUID":null,"Node":"n"})");
  ASSERT_TRUE(null_uid.ok());
  EXPECT_EQ(null_uid->pod_uid, "");
  auto number_uid = ParseBindingArgs(R"({"PodName":"p","PodNamespace":"ns","PodUID":7,"Node":"n"})");
  ASSERT_FALSE(number_uid.ok());
  EXPECT_NE(number_uid.status().message().find("PodUID must be a string"), std::string::npos);
  auto no_name = ParseBindingArgs(R"({"PodNamespace":"ns","Node":"n"})");
  ASSERT_FALSE(no_name.ok());
  EXPECT_NE(no_name.status().message().find("PodName is missing"), std::string::npos);
  EXPECT_FALSE(ParseBindingArgs(R"({"PodName":"p","PodNamespace":"ns","Node":"n","X":[})").ok());
  EXPECT_FALSE(ParseBindingArgs(R"({"PodName":"","PodNamespace":"ns","Node":"n"})").ok());
}

TEST(WireTest, PolicyScoresScaleToTheExtendersRange) {
  const std::vector<std::string> names = {"c", "a", "b", "d"};
  std::vector<int64_t> scores(4, -1);
  // b and a tie on score and fine: the first name (a) is the best; d is not feasible.
  const std::vector<PolicyScore> feasible = {{0, 20, 0}, {1, 80, 0.5}, {2, 80, 0.5}};
  EXPECT_EQ(ScaleToExtenderScores(feasible, names, false, &scores).i, 1u);
  EXPECT_EQ(scores, (std::vector<int64_t>{0, 10, 9, -1}));
  // `fine` refines a tie of scores.
  const std::vector<PolicyScore> finer = {{1, 80, 0.1}, {2, 80, 0.9}};
  EXPECT_EQ(ScaleToExtenderScores(finer, names, false, &scores).i, 2u);
  EXPECT_EQ(scores[1], 9);  // all scores equal: the others 9
  EXPECT_EQ(scores[2], 10);
  // All equal by the policy's nature: every feasible node 10.
  ScaleToExtenderScores(feasible, names, true, &scores);
  EXPECT_EQ(scores, (std::vector<int64_t>{10, 10, 10, -1}));
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

TEST(WireTest, ThePodIsDecodedIntoAView) {
  auto args = ParseExtenderArgs(
      R"({"Pod":{"metadata":{"name":"p","namespace":"ns","uid":"u"},"spec":{"priority":5,"containers":[)"
      R"({"name":"c","resources":{"limits":{"tessera.io/gpu-core":"150"}}}]}},"NodeNames":["a"]})");
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  ASSERT_NE(args->pod, nullptr);
  EXPECT_EQ(args->pod->key, "ns/p");
  EXPECT_EQ(args->pod->uid, "u");
  EXPECT_EQ(args->pod->priority, 5);
  ASSERT_FALSE(args->pod->request.ok());  // the user's mistake is kept, not a bad request
  EXPECT_NE(args->pod->request.status().message().find("150"), std::string::npos);
  // A pod without identity is a bad request, named as such.
  auto nameless = ParseExtenderArgs(R"({"Pod":{"metadata":{}},"NodeNames":["a"]})");
  ASSERT_FALSE(nameless.ok());
  EXPECT_EQ(nameless.status().message(), "pod object has no metadata.name");
}

TEST(WireTest, PodsAreTakenFromTheCacheByUidAndVersion) {
  PodViewCache cache(8);
  const std::string v1 = R"({"Pod":{"metadata":{"name":"p","uid":"u","resourceVersion":"1"}},"NodeNames":["a"]})";
  auto first = ParseExtenderArgs(v1, {}, &cache);
  ASSERT_TRUE(first.ok());
  auto second = ParseExtenderArgs(v1, {}, &cache);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->pod.get(), second->pod.get());
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(second->node_names(), std::vector<std::string>{"a"});
  // Another version, or no version at all, is decoded.
  auto v2 = ParseExtenderArgs(R"({"Pod":{"metadata":{"name":"p","uid":"u","resourceVersion":"2"}},"NodeNames":[]})",
                              {}, &cache);
  ASSERT_TRUE(v2.ok());
  EXPECT_NE(v2->pod.get(), first->pod.get());
  EXPECT_EQ(cache.Latest("u").get(), v2->pod.get());
  const std::string unversioned = R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"NodeNames":[]})";
  EXPECT_NE(ParseExtenderArgs(unversioned, {}, &cache)->pod.get(), ParseExtenderArgs(unversioned, {}, &cache)->pod.get());
  EXPECT_EQ(cache.hits(), 1u);
  // The preempt verb shares the cache.
  cache.Remember(first->pod);
  auto preempt = ParsePreemptionArgs(R"({"Pod":{"metadata":{"name":"p","uid":"u","resourceVersion":"1"}}})", {}, &cache);
  ASSERT_TRUE(preempt.ok()) << preempt.status().ToString();
  EXPECT_EQ(preempt->pod.get(), first->pod.get());
  // A cached pod still needs a well-formed body.
  EXPECT_FALSE(ParseExtenderArgs(R"({"Pod":{"metadata":{"name":"p","uid":"u","resourceVersion":"1"}},"NodeNames":[1]})",
                                 {}, &cache)
                   .ok());
}

TEST(WireTest, NodeNameListsAreTakenFromTheCacheByText) {
  NodeNamesCache names;
  const std::string body = R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"NodeNames":["a","b"]})";
  auto first = ParseExtenderArgs(body, {}, nullptr, &names);
  auto second = ParseExtenderArgs(body, {}, nullptr, &names);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->nodes.get(), second->nodes.get()) << "the same text is one shared list";
  EXPECT_EQ(names.hits(), 1u);
  EXPECT_EQ(second->node_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(second->plain_names());
  // Another list (one more space is another text: parsed again, same names).
  auto spaced = ParseExtenderArgs(R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a", "b"]})", {}, nullptr, &names);
  ASSERT_TRUE(spaced.ok());
  EXPECT_NE(spaced->nodes.get(), first->nodes.get());
  EXPECT_EQ(spaced->node_names(), first->node_names());
  // Names that need escaping keep their flag through the cache.
  const std::string quoted = R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a\"b"]})";
  ASSERT_TRUE(ParseExtenderArgs(quoted, {}, nullptr, &names).ok());
  auto again = ParseExtenderArgs(quoted, {}, nullptr, &names);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->node_names(), std::vector<std::string>{"a\"b"});
  EXPECT_FALSE(again->plain_names());
  EXPECT_EQ(names.hits(), 2u);
  // A bad list is an error every time, and not remembered.
  const std::string bad = R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["a",1]})";
  EXPECT_FALSE(ParseExtenderArgs(bad, {}, nullptr, &names).ok());
  EXPECT_FALSE(ParseExtenderArgs(bad, {}, nullptr, &names).ok());
  EXPECT_EQ(names.hits(), 2u);
}

TEST(NodeNamesCacheTest, KeepsTheMostRecentlyUsedLists) {
  NodeNamesCache cache;
  auto a = cache.Remember("[\"a\"]", {{"a"}, true});
  for (size_t i = 1; i < NodeNamesCache::kEntries; ++i) cache.Remember("[\"x" + std::to_string(i) + "\"]", {});
  EXPECT_EQ(cache.Find("[\"a\"]").get(), a.get());  // found: now the most recent
  cache.Remember("[\"new\"]", {});                   // forgets x1, the least recently used
  EXPECT_EQ(cache.Find("[\"x1\"]"), nullptr);
  EXPECT_EQ(cache.Find("[\"a\"]").get(), a.get());
  EXPECT_NE(cache.Find("[\"new\"]"), nullptr);
  EXPECT_EQ(cache.hits(), 3u);
  // A text remembered twice (two calls parsed it at once) is one entry.
  EXPECT_EQ(cache.Remember("[\"a\"]", {{"a"}, true}).get(), a.get());
}

TEST(PodViewCacheTest, ForgetsTheOldestUidBeyondItsCapacity) {
  PodViewCache cache(2);
  auto view = [](const std::string& uid, const std::string& rv) {
    core::PodView v;
    v.key = "ns/" + uid;
    v.uid = uid;
    v.resource_version = rv;
    return std::make_shared<const core::PodView>(std::move(v));
  };
  cache.Remember(view("a", "1"));
  cache.Remember(view("b", "1"));
  cache.Remember(view("a", "2"));  // a newer version keeps a's place
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find("a", "1"), nullptr);
  EXPECT_NE(cache.Find("a", "2"), nullptr);
  cache.Remember(view("c", "1"));  // a was first: forgotten
  EXPECT_EQ(cache.Latest("a"), nullptr);
  EXPECT_NE(cache.Latest("b"), nullptr);
  EXPECT_NE(cache.Latest("c"), nullptr);
  cache.Remember(view("", "1"));  // no uid: not remembered
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Find("b", ""), nullptr);
  EXPECT_EQ(cache.hits(), 1u);
}

}  // namespace
}  // namespace tessera::scheduler
