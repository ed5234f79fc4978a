#include "kubectl/structured.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace tessera::kubectl {
namespace {

TEST(StructuredTest, YamlKeepsOrderAndTypes) {
  nlohmann::ordered_json doc = {{"v", 1},
                                {"kind", "GpuInventory"},
                                {"nodes", nlohmann::ordered_json::array({{{"name", "true"}, {"ratio", 0.42}}})},
                                {"pending", nlohmann::ordered_json::array()},
                                {"model", "1.0"},
                                {"empty", ""},
                                {"healthy", false}};
  const std::string yaml = ToYaml(doc);
  EXPECT_EQ(yaml,
            "v: 1\n"
            "kind: GpuInventory\n"
            "nodes:\n"
            "  - name: \"true\"\n"
            "    ratio: 0.42\n"
            "pending: []\n"
            "model: \"1.0\"\n"
            "empty: \"\"\n"
            "healthy: false\n");
  const YAML::Node back = YAML::Load(yaml);
  EXPECT_EQ(back["nodes"][0]["name"].as<std::string>(), "true");
  EXPECT_EQ(back["model"].as<std::string>(), "1.0");
  EXPECT_EQ(back["v"].as<int>(), 1);
}

TEST(StructuredTest, JsonIsIndented) { EXPECT_EQ(ToJsonText({{"v", 1}}), "{\n  \"v\": 1\n}\n"); }

}  // namespace
}  // namespace tessera::kubectl
