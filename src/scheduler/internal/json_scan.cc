#include "scheduler/internal/json_scan.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace tessera::scheduler::internal {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && IsSpace(t[i])) ++i;
  return i;
}

// `i` at an opening quote: the index after the closing quote, or npos.
size_t SkipString(std::string_view t, size_t i) {
  while (true) {
    const void* q = std::memchr(t.data() + i + 1, '"', t.size() - i - 1);
    if (q == nullptr) return std::string_view::npos;
    i = static_cast<size_t>(static_cast<const char*>(q) - t.data());
    size_t backslashes = 0;  // an odd number before it escapes the quote
    while (t[i - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return i + 1;
  }
}

// `i` at the first byte of a value: the index after it, or npos when it is
// unbalanced, cut short or too deep.
size_t SkipValue(std::string_view t, size_t i) {
  if (i >= t.size()) return std::string_view::npos;
  if (t[i] == '"') return SkipString(t, i);
  if (t[i] != '{' && t[i] != '[') {  // a number, true, false or null
    while (i < t.size() && !IsSpace(t[i]) && t[i] != ',' && t[i] != '}' && t[i] != ']') ++i;
    return i;
  }
  std::string closers;  // expected closing brackets, innermost last
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') {
      i = SkipString(t, i);
      if (i == std::string_view::npos) return i;
      --i;
    } else if (c == '{' || c == '[') {
      if (closers.size() >= static_cast<size_t>(kMaxJsonDepth)) return std::string_view::npos;
      closers.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (closers.empty() || closers.back() != c) return std::string_view::npos;
      closers.pop_back();
      if (closers.empty()) return i + 1;
    }
  }
  return std::string_view::npos;
}

Status Bad(size_t at, std::string_view what) {
  return InvalidArgument("request body is not valid JSON: " + std::string(what) + " at byte " + std::to_string(at));
}

}  // namespace

Result<std::vector<JsonMember>> SplitObject(std::string_view t) {
  std::vector<JsonMember> members;
  size_t i = SkipSpace(t, 0);
  if (i >= t.size() || t[i] != '{') return Bad(i, "expected an object");
  i = SkipSpace(t, i + 1);
  if (i < t.size() && t[i] == '}') {
    if (SkipSpace(t, i + 1) != t.size()) return Bad(i + 1, "text after the object");
    return members;
  }
  while (true) {
    if (i >= t.size() || t[i] != '"') return Bad(i, "expected a key");
    const size_t key_end = SkipString(t, i);
    if (key_end == std::string_view::npos) return Bad(i, "unterminated key");
    JsonMember m;
    const std::string_view raw = t.substr(i + 1, key_end - i - 2);
    if (raw.find('\\') == std::string_view::npos) {
      m.key = std::string(raw);
    } else {
      const nlohmann::json key = nlohmann::json::parse(t.substr(i, key_end - i), nullptr, false);
      if (!key.is_string()) return Bad(i, "malformed key");
      m.key = key.get<std::string>();
    }
    i = SkipSpace(t, key_end);
    if (i >= t.size() || t[i] != ':') return Bad(i, "expected ':'");
    i = SkipSpace(t, i + 1);
    const size_t end = SkipValue(t, i);
    if (end == std::string_view::npos || end == i) return Bad(i, "malformed, unbalanced or too deeply nested value");
    m.value = t.substr(i, end - i);
    members.push_back(std::move(m));
    i = SkipSpace(t, end);
    if (i < t.size() && t[i] == ',') {
      i = SkipSpace(t, i + 1);
      continue;
    }
    if (i < t.size() && t[i] == '}') break;
    return Bad(i, "expected ',' or '}'");
  }
  if (SkipSpace(t, i + 1) != t.size()) return Bad(i + 1, "text after the object");
  return members;
}

std::optional<std::vector<std::string>> PlainStringArray(std::string_view t) {
  std::vector<std::string> out;
  out.reserve(t.size() / 16);
  size_t i = SkipSpace(t, 0);
  if (i >= t.size() || t[i] != '[') return std::nullopt;
  i = SkipSpace(t, i + 1);
  if (i < t.size() && t[i] == ']') return SkipSpace(t, i + 1) == t.size() ? std::optional(out) : std::nullopt;
  while (true) {
    if (i >= t.size() || t[i] != '"') return std::nullopt;
    const size_t start = ++i;
    const void* q = std::memchr(t.data() + start, '"', t.size() - start);
    if (q == nullptr) return std::nullopt;
    i = static_cast<size_t>(static_cast<const char*>(q) - t.data());
    bool odd = false;  // no early exit, so the loop vectorises
    for (size_t k = start; k < i; ++k) {
      const auto c = static_cast<unsigned char>(t[k]);
      odd |= c < 0x20 || c >= 0x7f || c == '\\';
    }
    if (odd) return std::nullopt;
    out.emplace_back(t.substr(start, i - start));
    i = SkipSpace(t, i + 1);
    if (i < t.size() && t[i] == ',') {
      i = SkipSpace(t, i + 1);
      continue;
    }
    if (i < t.size() && t[i] == ']') break;
    return std::nullopt;
  }
  if (SkipSpace(t, i + 1) != t.size()) return std::nullopt;
  return out;
}

std::optional<std::string_view> PlainString(std::string_view t) {
  size_t i = SkipSpace(t, 0);
  if (i >= t.size() || t[i] != '"') return std::nullopt;
  const size_t start = ++i;
  while (i < t.size() && t[i] != '"') {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\') return std::nullopt;
    ++i;
  }
  if (i >= t.size() || SkipSpace(t, i + 1) != t.size()) return std::nullopt;
  return t.substr(start, i - start);
}

}  // namespace tessera::scheduler::internal
