// -o json and -o yaml: a JSON document written as indented JSON, or as
// block-style YAML with the same fields in the same order. Pure; thread-safe.
//
//   std::cout << ToYaml(InventoryToJson(inv));
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessera::kubectl {

// Two-space indented JSON ending in a newline.
std::string ToJsonText(const nlohmann::ordered_json& doc);
// YAML with the document's keys in order; strings are quoted when YAML would
// read them as another type ("true", "1.0", ""), numbers and booleans are plain.
std::string ToYaml(const nlohmann::ordered_json& doc);

}  // namespace tessera::kubectl
