#include "kubectl/structured.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <regex>

namespace tessera::kubectl {
namespace {

// Whether a YAML reader (1.1 or 1.2) would take `s`, written plain, for
// something other than a string: a boolean, null, a number. yaml-cpp's
// emitter writes such strings plain, so they are quoted here.
bool ReadsAsNonString(const std::string& s) {
  if (s.empty()) return true;
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}) {
    if (lower == word) return true;
  }
  static const std::regex kNumberLike(R"(^[-+]?(\.[0-9]|[0-9])[0-9_:.eE+-]*$|^[-+]?\.(inf|nan)$|^0[xo][0-9a-f_]+$)");
  return std::regex_match(lower, kNumberLike);
}

void Emit(YAML::Emitter& out, const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key << key << YAML::Value;
        Emit(out, value);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::ordered_json::value_t::array:
      if (j.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        break;
      }
      out << YAML::BeginSeq;
      for (const auto& value : j) Emit(out, value);
      out << YAML::EndSeq;
      break;
    case nlohmann::ordered_json::value_t::string:
      if (ReadsAsNonString(j.get<std::string>())) out << YAML::DoubleQuoted;
      out << j.get<std::string>();
      break;
    case nlohmann::ordered_json::value_t::boolean:
      out << j.get<bool>();
      break;
    case nlohmann::ordered_json::value_t::null:
      out << YAML::Null;
      break;
    default:  // numbers, as JSON writes them
      out << j.dump();
      break;
  }
}

}  // namespace

std::string ToJsonText(const nlohmann::ordered_json& doc) { return doc.dump(2) + "\n"; }

std::string ToYaml(const nlohmann::ordered_json& doc) {
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(out, doc);
  return std::string(out.c_str()) + "\n";
}

}  // namespace tessera::kubectl
