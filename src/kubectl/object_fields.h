// Safe reads of fields of Kubernetes objects (raw JSON from the API server):
// a missing or mistyped field reads as absent, never throws. Pure; thread-safe.
//
//   std::string node = StringAt(pod, {"spec", "nodeName"});   // "" when absent
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::kubectl {

// The value at obj.path[0].path[1]..., or nullptr when any step is missing
// or not an object.
const nlohmann::json* FieldAt(const nlohmann::json& obj, std::initializer_list<std::string_view> path);

// The string at `path`, or "" when absent or not a string.
std::string StringAt(const nlohmann::json& obj, std::initializer_list<std::string_view> path);

// metadata.annotations[name], or nullptr.
const nlohmann::json* Annotation(const nlohmann::json& obj, std::string_view name);

}  // namespace tessera::kubectl
