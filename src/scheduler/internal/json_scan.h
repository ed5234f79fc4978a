// A structural scanner for the one large JSON document the extender reads
// many times a second: ExtenderArgs with thousands of NodeNames. It splits
// the top-level object into members without building a DOM, so only the Pod
// goes through nlohmann::json, and reads a plain array of ASCII strings
// directly. Anything unusual (escapes, non-ASCII) is left to nlohmann.
// Pure functions; thread-safe. Views point into the caller's text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera::scheduler::internal {

// Arrays and objects nested deeper than this are refused (printing or
// destroying them recursively could exhaust the stack).
inline constexpr int kMaxJsonDepth = 256;

struct JsonMember {
  std::string key;
  std::string_view value;  // the raw text of the value, not yet validated
};

// The members of the JSON object `text`, in order. Checks the object's own
// syntax (braces, keys, colons, commas, nothing after it) and that every value
// is balanced and at most kMaxJsonDepth deep; the values' inner syntax is left
// to whoever parses them. INVALID_ARGUMENT naming the byte offset otherwise.
Result<std::vector<JsonMember>> SplitObject(std::string_view text);

// The strings of `text` when it is an array of strings with only printable
// ASCII and no escapes ("[\"a\", \"b\"]"); std::nullopt when it is anything
// else, valid or not (parse it with nlohmann then).
std::optional<std::vector<std::string>> PlainStringArray(std::string_view text);

// The content of `text` when it is one JSON string with only printable ASCII
// and no escapes ("\"abc\"" -> abc, surrounding spaces allowed); std::nullopt
// otherwise. The view points into `text`.
std::optional<std::string_view> PlainString(std::string_view text);

}  // namespace tessera::scheduler::internal
