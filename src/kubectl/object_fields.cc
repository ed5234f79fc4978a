#include "kubectl/object_fields.h"

namespace tessera::kubectl {

const nlohmann::json* FieldAt(const nlohmann::json& obj, std::initializer_list<std::string_view> path) {
  const nlohmann::json* at = &obj;
  for (std::string_view key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string StringAt(const nlohmann::json& obj, std::initializer_list<std::string_view> path) {
  const nlohmann::json* v = FieldAt(obj, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

const nlohmann::json* Annotation(const nlohmann::json& obj, std::string_view name) {
  return FieldAt(obj, {"metadata", "annotations", name});
}

}  // namespace tessera::kubectl
