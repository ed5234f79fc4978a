#include "core/quote.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace tessera {

std::string QuoteInput(std::string_view text) {
  constexpr size_t kMaxChars = 64;
  std::string out = "\"";
  const size_t n = std::min(text.size(), kMaxChars);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      std::array<char, 8> buf{};
      std::snprintf(buf.data(), buf.size(), "\\x%02x", c);
      out += buf.data();
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kMaxChars) out += "...";
  out += '"';
  return out;
}

}  // namespace tessera
