#include "core/quantity.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <string>

#include "core/quote.h"

namespace tessera::core {
namespace {

// Exponents are clamped here; anything beyond overflows or rounds to 1 milli.
constexpr int64_t kExponentClamp = 1'000'000;
constexpr int64_t kMilliPerUnit = 1000;
constexpr int64_t kBytesPerMiB = int64_t{1} << 20;

Status Invalid(std::string_view text, std::string_view what) {
  return InvalidArgument("invalid quantity " + QuoteInput(text) + ": " + std::string(what));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Suffix {
  std::string_view name;
  int binary_power;      // value is multiplied by 1024^binary_power
  int decimal_exponent;  // ... and by 10^decimal_exponent
};

constexpr std::array<Suffix, 16> kSuffixes = {{
    {"Ki", 1, 0}, {"Mi", 2, 0}, {"Gi", 3, 0}, {"Ti", 4, 0}, {"Pi", 5, 0},
    {"Ei", 6, 0}, {"n", 0, -9}, {"u", 0, -6}, {"m", 0, -3}, {"", 0, 0},
    {"k", 0, 3},  {"M", 0, 6},  {"G", 0, 9},  {"T", 0, 12}, {"P", 0, 15},
    {"E", 0, 18},
}};

// Parses the signed integer after 'e'/'E' ("3", "-2", "+06"). Magnitudes past
// kExponentClamp are clamped. False when `text` is not a signed integer.
bool ParseExponent(std::string_view text, int64_t* exponent) {
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) return false;
  int64_t value = 0;
  for (char c : text) {
    if (!IsDigit(c)) return false;
    value = std::min(value * 10 + (c - '0'), kExponentClamp);
  }
  *exponent = negative ? -value : value;
  return true;
}

// Multiplies a string of decimal digits (most significant first) by `factor`.
void MultiplyDigits(std::string& digits, int factor) {
  int carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    const int v = (*it - '0') * factor + carry;
    *it = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  while (carry > 0) {
    digits.insert(digits.begin(), static_cast<char>('0' + carry % 10));
    carry /= 10;
  }
}

// Parses digits that may be too long for int64; false on overflow.
bool DigitsToInt64(std::string_view digits, int64_t* value) {
  if (digits.empty()) {
    *value = 0;
    return true;
  }
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *value);
  return ec == std::errc() && end == digits.data() + digits.size();
}

// "1.5" for 1500 milli, "0.001" for 1, "8" for 8000.
std::string FormatMilli(int64_t milli) {
  std::string out = std::to_string(milli / kMilliPerUnit);
  int64_t frac = milli % kMilliPerUnit;
  if (frac == 0) return out;
  std::string frac_text = std::to_string(frac);
  frac_text.insert(0, 3 - frac_text.size(), '0');
  while (frac_text.back() == '0') frac_text.pop_back();
  return out + "." + frac_text;
}

}  // namespace

Result<Quantity> ParseQuantity(std::string_view text) {
  if (text.empty()) return Invalid(text, "is empty");
  if (std::any_of(text.begin(), text.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
      })) {
    return Invalid(text, "must not contain whitespace");
  }

  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    pos = 1;
  }
  const size_t int_begin = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  const std::string_view int_digits = text.substr(int_begin, pos - int_begin);
  std::string_view frac_digits;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_begin = ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    frac_digits = text.substr(frac_begin, pos - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return Invalid(text, "expected a number such as 500m, 2 or 8Gi");
  }

  const std::string_view suffix = text.substr(pos);
  int binary_power = 0;
  int64_t decimal_exponent = 0;
  const auto known = std::find_if(kSuffixes.begin(), kSuffixes.end(),
                                  [&](const Suffix& s) { return s.name == suffix; });
  if (known != kSuffixes.end()) {
    binary_power = known->binary_power;
    decimal_exponent = known->decimal_exponent;
  } else if ((suffix[0] == 'e' || suffix[0] == 'E') &&
             ParseExponent(suffix.substr(1), &decimal_exponent)) {
    // A decimal exponent such as 1e3.
  } else if (suffix[0] == '.' || IsDigit(suffix[0]) || suffix[0] == '+' || suffix[0] == '-') {
    return Invalid(text, "is not a well-formed number");
  } else {
    return Invalid(text, "unknown suffix " + QuoteInput(suffix) +
                             " (use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E "
                             "or an exponent such as e3)");
  }

  // value in milli = digits * 1024^binary_power * 10^scale, exactly.
  std::string digits(int_digits);
  digits += frac_digits;
  const size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return Quantity{0};  // also "-0"
  if (negative) return Invalid(text, "negative values are not allowed for resources");
  digits.erase(0, first_nonzero);
  for (int i = 0; i < binary_power; ++i) MultiplyDigits(digits, 1024);
  const int64_t scale = decimal_exponent + 3 - static_cast<int64_t>(frac_digits.size());

  constexpr size_t kMaxInt64Digits = std::numeric_limits<int64_t>::digits10 + 1;  // 19
  int64_t milli = 0;
  if (scale >= 0) {
    if (digits.size() + static_cast<size_t>(scale) > kMaxInt64Digits ||
        !DigitsToInt64(digits + std::string(static_cast<size_t>(scale), '0'), &milli)) {
      return Invalid(text, "value is too large (the limit is about 9.2e15)");
    }
    return Quantity{milli};
  }
  // Drop the digits below one milli and round up if any of them is non-zero.
  // digits has no leading zero, so a fully dropped value is positive: 1 milli.
  const auto dropped = static_cast<size_t>(-scale);
  if (dropped >= digits.size()) return Quantity{1};
  const std::string_view kept = std::string_view(digits).substr(0, digits.size() - dropped);
  const bool round_up =
      std::string_view(digits).substr(kept.size()).find_first_not_of('0') != std::string_view::npos;
  if (kept.size() > kMaxInt64Digits || !DigitsToInt64(kept, &milli) ||
      (round_up && milli == std::numeric_limits<int64_t>::max())) {
    return Invalid(text, "value is too large (the limit is about 9.2e15)");
  }
  return Quantity{milli + (round_up ? 1 : 0)};
}

Result<int64_t> QuantityToInteger(Quantity q) {
  if (q.milli < 0) return InvalidArgument("quantity is negative");
  if (q.milli % kMilliPerUnit != 0) {
    return InvalidArgument("quantity " + FormatMilli(q.milli) + " is not a whole number");
  }
  return q.milli / kMilliPerUnit;
}

Result<int64_t> ParseMemoryMiB(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(Quantity q, ParseQuantity(text));
  constexpr int64_t kMilliPerMiB = kMilliPerUnit * kBytesPerMiB;
  return q.milli / kMilliPerMiB + (q.milli % kMilliPerMiB != 0 ? 1 : 0);
}

Result<int64_t> ParseCpuMilli(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(Quantity q, ParseQuantity(text));
  return q.milli;
}

Result<int64_t> ParseCount(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(Quantity q, ParseQuantity(text));
  if (q.milli % kMilliPerUnit != 0) return Invalid(text, "must be a whole number");
  return q.milli / kMilliPerUnit;
}

}  // namespace tessera::core
