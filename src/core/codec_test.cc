#include "core/codec.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::core {
namespace {

std::vector<GpuInfo> SampleInventory() {
  return {
      {.index = 0, .uuid = "GPU-aaaa", .model = "A100", .memory_mib = 81920, .sm_count = 108,
       .numa_node = 0, .healthy = true},
      {.index = 1, .uuid = "GPU-bbbb", .model = "A100", .memory_mib = 81920, .sm_count = 108,
       .numa_node = 1, .healthy = false},
  };
}

Assignment SampleAssignment() {
  return {.node = "n1",
          .containers = {
              {.name = "train",
               .gpus = {{.index = 0, .uuid = "GPU-aaaa", .mem_mib = 8192, .core_milli = 300},
                        {.index = 3, .uuid = "GPU-dddd", .mem_mib = 0, .core_milli = 1000}}},
              {.name = "sidecar", .gpus = {}},
          }};
}

TEST(CodecTest, InventoryEncodesToDocumentedFormat) {
  Result<std::string> text = EncodeInventory({SampleInventory()[0]});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            R"({"v":1,"gpus":[{"index":0,"uuid":"GPU-aaaa","model":"A100","memMiB":81920,)"
            R"("sms":108,"numa":0,"healthy":true}]})");
}

TEST(CodecTest, InventoryCarriesTheSharerLimitOnlyWhenSet) {
  GpuInfo gpu = SampleInventory()[0];
  gpu.max_sharers = 8;
  Result<std::string> text = EncodeInventory({gpu});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find(R"("healthy":true,"slots":8})"), std::string::npos) << *text;
  auto back = DecodeInventory(*text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)[0].max_sharers, 8);
  EXPECT_FALSE(DecodeInventory(R"({"v":1,"gpus":[{"index":0,"uuid":"","model":"A","memMiB":1,"sms":0,)"
                               R"("numa":-1,"healthy":true,"slots":-1}]})")
                   .ok());
}

TEST(CodecTest, InventoryCarriesMpsOnlyWhenTheNodeRunsIt) {
  GpuInfo gpu = SampleInventory()[0];
  Result<std::string> plain = EncodeInventory({gpu});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("mps"), std::string::npos) << *plain;
  gpu.mps = true;
  Result<std::string> text = EncodeInventory({gpu});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find(R"("mps":true)"), std::string::npos) << *text;
  auto back = DecodeInventory(*text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE((*back)[0].mps);
  EXPECT_FALSE(DecodeInventory(R"({"v":1,"gpus":[{"index":0,"uuid":"","model":"A","memMiB":1,"sms":0,)"
                               R"("numa":-1,"healthy":true,"mps":"yes"}]})")
                   .ok());
}

TEST(CodecTest, AssignmentEncodesToDocumentedFormat) {
  Assignment a{.node = "n1",
               .containers = {{.name = "c",
                               .gpus = {{.index = 0, .uuid = "GPU-x", .mem_mib = 8192,
                                         .core_milli = 300}}}}};
  Result<std::string> text = EncodeAssignment(a);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            R"({"v":1,"node":"n1","containers":[{"name":"c","gpus":[{"index":0,"uuid":"GPU-x",)"
            R"("memMiB":8192,"coreMilli":300}]}]})");
}

TEST(CodecTest, HandWrittenValuesRoundTrip) {
  for (const std::vector<GpuInfo>& gpus : {SampleInventory(), std::vector<GpuInfo>{}}) {
    Result<std::string> text = EncodeInventory(gpus);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    Result<std::vector<GpuInfo>> back = DecodeInventory(*text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, gpus);
  }
  for (const Assignment& a : {SampleAssignment(), Assignment{.node = "n", .containers = {}}}) {
    Result<std::string> text = EncodeAssignment(a);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    Result<Assignment> back = DecodeAssignment(*text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, a);
  }
}

TEST(CodecTest, UnknownFieldsAndWhitespaceAreAccepted) {
  Result<std::vector<GpuInfo>> gpus = DecodeInventory(R"(
    { "future": {"nested": [1, 2]}, "v": 1,
      "gpus": [ { "healthy": true, "numa": -1, "sms": 0, "memMiB": 0, "model": "T4",
                  "uuid": "", "index": 5, "vendor": "nvidia" } ] })");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0], (GpuInfo{.index = 5, .uuid = "", .model = "T4", .memory_mib = 0,
                                 .sm_count = 0, .numa_node = -1, .healthy = true}));

  Result<Assignment> a = DecodeAssignment(
      R"({"v":1,"node":"n1","priority":"high","containers":[{"name":"c","gpus":[],"x":1}]})");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->node, "n1");
}

TEST(CodecTest, SameGpuInTwoContainersIsAllowed) {
  Result<Assignment> a = DecodeAssignment(
      R"({"v":1,"node":"n","containers":[)"
      R"({"name":"a","gpus":[{"index":2,"uuid":"","memMiB":1,"coreMilli":500}]},)"
      R"({"name":"b","gpus":[{"index":2,"uuid":"","memMiB":1,"coreMilli":500}]}]})");
  EXPECT_TRUE(a.ok()) << a.status().ToString();
}

// Strings that exercise JSON escaping: quotes, backslashes, control bytes,
// multi-byte UTF-8.
std::string RandomString(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {"GPU-", "a", "Z", "0", "-", "\"", "\\",
                                                   "/",    "\x01", "\n", "\xc3\xa9", "\xe2\x82\xac",
                                                   " ",    "{",    "}"};
  std::string out;
  const int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) out += kPieces[rng() % kPieces.size()];
  return out;
}

int64_t RandomSize(std::mt19937& rng) {
  switch (rng() % 3) {
    case 0: return 0;
    case 1: return static_cast<int64_t>(rng() % 100000);
    default: return static_cast<int64_t>((uint64_t{rng()} << 31) ^ rng());
  }
}

// `n` distinct GPU indexes in 0..63, in random order.
std::vector<int> RandomIndexes(std::mt19937& rng, int n) {
  std::vector<int> all(kMaxGpuIndex + 1);
  for (int i = 0; i <= kMaxGpuIndex; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

TEST(CodecTest, RandomInventoriesRoundTrip) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<GpuInfo> gpus;
    for (int index : RandomIndexes(rng, static_cast<int>(rng() % 10))) {
      gpus.push_back({.index = index,
                      .uuid = RandomString(rng),
                      .model = RandomString(rng),
                      .memory_mib = RandomSize(rng),
                      .sm_count = static_cast<int>(rng() % 200),
                      .numa_node = static_cast<int>(rng() % 4) - 1,
                      .healthy = rng() % 2 == 0,
                      .max_sharers = static_cast<int>(rng() % 3) * 4});
    }
    Result<std::string> text = EncodeInventory(gpus);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    Result<std::vector<GpuInfo>> back = DecodeInventory(*text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << *text;
    ASSERT_EQ(*back, gpus) << *text;
  }
}

TEST(CodecTest, RandomAssignmentsRoundTrip) {
  std::mt19937 rng(5678);
  for (int iter = 0; iter < 500; ++iter) {
    Assignment a{.node = "node-" + RandomString(rng), .containers = {}};
    const int containers = static_cast<int>(rng() % 4);
    for (int c = 0; c < containers; ++c) {
      ContainerAssignment ca{.name = "c" + std::to_string(c) + RandomString(rng), .gpus = {}};
      for (int index : RandomIndexes(rng, static_cast<int>(rng() % 5))) {
        ca.gpus.push_back({.index = index,
                           .uuid = RandomString(rng),
                           .mem_mib = RandomSize(rng),
                           .core_milli = static_cast<int64_t>(rng() % 1001)});
      }
      a.containers.push_back(std::move(ca));
    }
    Result<std::string> text = EncodeAssignment(a);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    Result<Assignment> back = DecodeAssignment(*text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << *text;
    ASSERT_EQ(*back, a) << *text;
  }
}

TEST(CodecTest, EncodeRejectsWhatDecodeWould) {
  std::vector<GpuInfo> gpus = SampleInventory();
  gpus[1].index = 0;
  EXPECT_EQ(EncodeInventory(gpus).status().message(),
            "tessera.io/gpu-inventory: gpus[1].index: 0 appears twice (also gpus[0])");
  gpus[1].index = 64;
  EXPECT_EQ(EncodeInventory(gpus).status().message(),
            "tessera.io/gpu-inventory: gpus[1].index: 64 is out of range 0..63");
  gpus[1].index = 1;
  gpus[1].uuid = "GPU-\xff";
  EXPECT_EQ(EncodeInventory(gpus).status().message(),
            "tessera.io/gpu-inventory: a string field is not valid UTF-8");

  Assignment a = SampleAssignment();
  a.containers[0].gpus[1].core_milli = 1001;
  EXPECT_EQ(EncodeAssignment(a).status().message(),
            "tessera.io/assignment: containers[0].gpus[1].coreMilli: 1001 is out of range 0..1000");
  a = SampleAssignment();
  a.node.clear();
  EXPECT_EQ(EncodeAssignment(a).status().message(),
            "tessera.io/assignment: node: must not be empty");
}

struct Malformed {
  const char* json;
  const char* message;  // the whole expected message, or its prefix when it ends in "..."
};

void ExpectMessage(const Status& status, const Malformed& m) {
  ASSERT_FALSE(status.ok()) << m.json;
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << m.json;
  std::string want = m.message;
  if (want.size() > 3 && want.ends_with("...")) {
    want.resize(want.size() - 3);
    EXPECT_TRUE(status.message().starts_with(want)) << m.json << "\ngot: " << status.message();
  } else {
    EXPECT_EQ(status.message(), want) << m.json;
  }
}

// A GPU entry with one field replaced: {"index":0,...} with `key` set to `raw`.
std::string InventoryWith(const std::string& key, const std::string& raw) {
  std::string gpu = R"({"index":0,"uuid":"u","model":"m","memMiB":1,"sms":1,"numa":0,"healthy":true})";
  const std::string quoted = "\"" + key + "\":";
  const size_t at = gpu.find(quoted) + quoted.size();
  const size_t end = gpu.find_first_of(",}", at);
  gpu.replace(at, end - at, raw);
  return R"({"v":1,"gpus":[)" + gpu + "]}";
}

TEST(CodecTest, MalformedInventories) {
  const std::string inv = "tessera.io/gpu-inventory: ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", inv + "not valid JSON: ..."},
      {"not json", inv + "not valid JSON: ..."},
      {R"({"v":1,"gpus":[]} x)", inv + "not valid JSON: ..."},
      {"[]", inv + "document: must be a JSON object, got array"},
      {R"({"gpus":[]})", inv + "v: required field is missing"},
      {R"({"v":2,"gpus":[]})", inv + "unsupported version 2, this Tessera reads version 1"},
      {R"({"v":0,"gpus":[]})", inv + "unsupported version 0, this Tessera reads version 1"},
      {R"({"v":-1,"gpus":[]})", inv + "unsupported version -1, this Tessera reads version 1"},
      {R"({"v":18446744073709551615,"gpus":[]})",
       inv + "unsupported version 18446744073709551615, this Tessera reads version 1"},
      {R"({"v":"1","gpus":[]})", inv + "v: must be an integer, got string"},
      {R"({"v":1.5,"gpus":[]})", inv + "v: must be an integer, got number 1.5"},
      {R"({"v":1})", inv + "gpus: required field is missing"},
      {R"({"v":1,"gpus":{}})", inv + "gpus: must be an array, got object"},
      {R"({"v":1,"gpus":[3]})", inv + "gpus[0]: must be a JSON object, got number"},
      {R"({"v":1,"gpus":[{"index":0}]})", inv + "gpus[0].uuid: required field is missing"},
      {InventoryWith("memMiB", R"("lots")"), inv + "gpus[0].memMiB: must be an integer, got string"},
      {InventoryWith("memMiB", "-5"), inv + "gpus[0].memMiB: must not be negative, got -5"},
      {InventoryWith("memMiB", "18446744073709551615"),
       inv + "gpus[0].memMiB: 18446744073709551615 is out of range 0..9223372036854775807"},
      {InventoryWith("memMiB", "1e30"), inv + "gpus[0].memMiB: must be an integer, got number 1e+30"},
      {InventoryWith("index", "64"), inv + "gpus[0].index: 64 is out of range 0..63"},
      {InventoryWith("index", "-1"), inv + "gpus[0].index: must not be negative, got -1"},
      {InventoryWith("sms", "3000000000"), inv + "gpus[0].sms: 3000000000 is out of range 0..2147483647"},
      {InventoryWith("numa", "-2"), inv + "gpus[0].numa: -2 is out of range -1..2147483647"},
      {InventoryWith("healthy", R"("yes")"), inv + "gpus[0].healthy: must be true or false, got string"},
      {InventoryWith("uuid", "null"), inv + "gpus[0].uuid: must be a string, got null"},
      {InventoryWith("model", "[]"), inv + "gpus[0].model: must be a string, got array"},
      {R"({"v":1,"gpus":[)"
       R"({"index":4,"uuid":"","model":"","memMiB":0,"sms":0,"numa":0,"healthy":true},)"
       R"({"index":4,"uuid":"","model":"","memMiB":0,"sms":0,"numa":0,"healthy":true}]})",
       inv + "gpus[1].index: 4 appears twice (also gpus[0])"},
  };
  for (const auto& [json, message] : cases) {
    ExpectMessage(DecodeInventory(json).status(), {json.c_str(), message.c_str()});
  }
}

// An assignment whose one container holds the GPU entry `gpu` (raw JSON).
std::string WithGpu(const std::string& gpu) {
  return R"({"v":1,"node":"n","containers":[{"name":"c","gpus":[)" + gpu + "]}]}";
}

TEST(CodecTest, MalformedAssignments) {
  const std::string as = "tessera.io/assignment: ";
  const std::string gpu = R"({"index":2,"uuid":"","memMiB":1,"coreMilli":500})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", as + "not valid JSON: ..."},
      {"\"text\"", as + "document: must be a JSON object, got string"},
      {R"({"v":2,"node":"n","containers":[]})",
       as + "unsupported version 2, this Tessera reads version 1"},
      {R"({"v":1,"containers":[]})", as + "node: required field is missing"},
      {R"({"v":1,"node":"","containers":[]})", as + "node: must not be empty"},
      {R"({"v":1,"node":5,"containers":[]})", as + "node: must be a string, got number"},
      {R"({"v":1,"node":"n"})", as + "containers: required field is missing"},
      {R"({"v":1,"node":"n","containers":[{"gpus":[]}]})",
       as + "containers[0].name: required field is missing"},
      {R"({"v":1,"node":"n","containers":[{"name":"","gpus":[]}]})",
       as + "containers[0].name: must not be empty"},
      {R"({"v":1,"node":"n","containers":[{"name":"c"}]})",
       as + "containers[0].gpus: required field is missing"},
      {R"({"v":1,"node":"n","containers":[{"name":"c","gpus":[]},{"name":"c","gpus":[]}]})",
       as + "containers[1].name: container \"c\" appears twice"},
      {WithGpu(gpu + "," + gpu),
       as + "containers[0].gpus[1].index: 2 appears twice (also containers[0].gpus[0])"},
      {WithGpu(R"({"index":0,"uuid":"","memMiB":1,"coreMilli":1001})"),
       as + "containers[0].gpus[0].coreMilli: 1001 is out of range 0..1000"},
      {WithGpu(R"({"index":0,"uuid":"","memMiB":1,"coreMilli":-1})"),
       as + "containers[0].gpus[0].coreMilli: must not be negative, got -1"},
      {WithGpu(R"({"index":0,"uuid":"","memMiB":-8,"coreMilli":1})"),
       as + "containers[0].gpus[0].memMiB: must not be negative, got -8"},
      {WithGpu(R"({"index":99,"uuid":"","memMiB":1,"coreMilli":1})"),
       as + "containers[0].gpus[0].index: 99 is out of range 0..63"},
      {WithGpu(R"({"index":0,"memMiB":1,"coreMilli":1})"),
       as + "containers[0].gpus[0].uuid: required field is missing"},
  };
  for (const auto& [json, message] : cases) {
    ExpectMessage(DecodeAssignment(json).status(), {json.c_str(), message.c_str()});
  }
}

TEST(CodecTest, NotJsonMessageSaysWhere) {
  Status s = DecodeAssignment("{\"v\":1,").status();
  EXPECT_NE(s.message().find("line 1, column"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("[json.exception"), std::string::npos) << s.message();
}

PodUsage SampleUsage() {
  return {.at = WallTime(std::chrono::seconds(1772368205)),
          .containers = {
              {.name = "train",
               .gpus = {{.index = 0, .uuid = "GPU-aaaa", .mem_used_mib = 7000, .utilization = 0.42},
                        {.index = 3, .uuid = "GPU-dddd", .mem_used_mib = 0, .utilization = 1}}},
              {.name = "sidecar", .gpus = {}},
          }};
}

TEST(CodecTest, UsageEncodesToDocumentedFormat) {
  Result<std::string> text = EncodeUsage(SampleUsage());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            R"({"v":1,"at":"2026-03-01T12:30:05Z","containers":[{"name":"train","gpus":[)"
            R"({"index":0,"uuid":"GPU-aaaa","memUsedMiB":7000,"utilization":0.42},)"
            R"({"index":3,"uuid":"GPU-dddd","memUsedMiB":0,"utilization":1.0}]},)"
            R"({"name":"sidecar","gpus":[]}]})");
  Result<PodUsage> back = DecodeUsage(*text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, SampleUsage());
}

TEST(CodecTest, UsageReadsOffsetsFractionsAndUnknownFields) {
  Result<PodUsage> u = DecodeUsage(
      R"({"v":1,"at":"2026-03-01T14:30:05.5+02:00","node":"n1","containers":[)"
      R"({"name":"c","gpus":[{"index":1,"uuid":"","memUsedMiB":5,"utilization":0,"sm":3}]}]})");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->at, WallTime(std::chrono::seconds(1772368205)) + std::chrono::milliseconds(500));
  ASSERT_EQ(u->containers.size(), 1u);
  EXPECT_EQ(u->containers[0].gpus[0].utilization, 0.0);
}

TEST(CodecTest, RandomUsagesRoundTrip) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    PodUsage u;
    u.at = WallTime(std::chrono::seconds(rng() % 4102444800u));  // 1970..2099
    const int containers = static_cast<int>(rng() % 4);
    for (int c = 0; c < containers; ++c) {
      ContainerUsage cu{.name = "c" + std::to_string(c) + RandomString(rng), .gpus = {}};
      for (int index : RandomIndexes(rng, static_cast<int>(rng() % 5))) {
        cu.gpus.push_back({.index = index, .uuid = RandomString(rng), .mem_used_mib = RandomSize(rng),
                           .utilization = static_cast<double>(rng() % 1001) / 1000});
      }
      u.containers.push_back(std::move(cu));
    }
    Result<std::string> text = EncodeUsage(u);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    Result<PodUsage> back = DecodeUsage(*text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << *text;
    EXPECT_EQ(*back, u) << *text;
  }
}

TEST(CodecTest, EncodeUsageRejectsWhatDecodeWould) {
  PodUsage u = SampleUsage();
  u.containers[0].gpus[1].utilization = 1.5;
  EXPECT_EQ(EncodeUsage(u).status().message(),
            "tessera.io/usage: containers[0].gpus[1].utilization: 1.5 is out of range 0..1");
  u = SampleUsage();
  u.containers[1].name = "train";
  EXPECT_EQ(EncodeUsage(u).status().message(),
            "tessera.io/usage: containers[1].name: container \"train\" appears twice");
  u = SampleUsage();
  u.containers[0].gpus[0].mem_used_mib = -1;
  EXPECT_EQ(EncodeUsage(u).status().message(),
            "tessera.io/usage: containers[0].gpus[0].memUsedMiB: must not be negative, got -1");
}

std::string UsageWithGpu(const std::string& gpu) {
  return R"({"v":1,"at":"2026-03-01T12:30:05Z","containers":[{"name":"c","gpus":[)" + gpu + "]}]}";
}

TEST(CodecTest, MalformedUsages) {
  const std::string us = "tessera.io/usage: ";
  const std::string gpu = R"({"index":2,"uuid":"","memUsedMiB":1,"utilization":0.5})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", us + "not valid JSON: ..."},
      {"[]", us + "document: must be a JSON object, got array"},
      {R"({"v":2,"at":"2026-03-01T12:30:05Z","containers":[]})",
       us + "unsupported version 2, this Tessera reads version 1"},
      {R"({"v":1,"containers":[]})", us + "at: required field is missing"},
      {R"({"v":1,"at":"","containers":[]})", us + "at: must not be empty"},
      {R"({"v":1,"at":"now","containers":[]})", us + "at: \"now\" is not an RFC 3339 time"},
      {R"({"v":1,"at":1772368205,"containers":[]})", us + "at: must be a string, got number"},
      {R"({"v":1,"at":"2200-01-01T00:00:00Z","containers":[]})",
       us + "at: \"2200-01-01T00:00:00Z\" is outside the years 1700..2199"},
      {R"({"v":1,"at":"2026-03-01T12:30:05Z"})", us + "containers: required field is missing"},
      {R"({"v":1,"at":"2026-03-01T12:30:05Z","containers":{}})",
       us + "containers: must be an array, got object"},
      {R"({"v":1,"at":"2026-03-01T12:30:05Z","containers":[{"name":"c"}]})",
       us + "containers[0].gpus: required field is missing"},
      {UsageWithGpu(gpu + "," + gpu),
       us + "containers[0].gpus[1].index: 2 appears twice (also containers[0].gpus[0])"},
      {UsageWithGpu(R"({"index":0,"uuid":"","memUsedMiB":1,"utilization":1.01})"),
       us + "containers[0].gpus[0].utilization: 1.01 is out of range 0..1"},
      {UsageWithGpu(R"({"index":0,"uuid":"","memUsedMiB":1,"utilization":-0.1})"),
       us + "containers[0].gpus[0].utilization: -0.1 is out of range 0..1"},
      {UsageWithGpu(R"({"index":0,"uuid":"","memUsedMiB":1,"utilization":"42%"})"),
       us + "containers[0].gpus[0].utilization: must be a number, got string"},
      {UsageWithGpu(R"({"index":0,"uuid":"","memUsedMiB":-3,"utilization":0})"),
       us + "containers[0].gpus[0].memUsedMiB: must not be negative, got -3"},
      {UsageWithGpu(R"({"index":0,"uuid":"","memUsedMiB":2.5,"utilization":0})"),
       us + "containers[0].gpus[0].memUsedMiB: must be an integer, got number 2.5"},
      {UsageWithGpu(R"({"index":0,"uuid":"","utilization":0})"),
       us + "containers[0].gpus[0].memUsedMiB: required field is missing"},
  };
  for (const auto& [json, message] : cases) {
    ExpectMessage(DecodeUsage(json).status(), {json.c_str(), message.c_str()});
  }
}

}  // namespace
}  // namespace tessera::core
