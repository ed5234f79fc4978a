#include "core/timestamp.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace tessera::core {
namespace {

// Reads `n` digits at text[*pos] into *out and advances *pos.
bool Digits(std::string_view text, size_t* pos, int n, int* out) {
  if (*pos + n > text.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    const char c = text[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, std::string_view any_of) {
  if (*pos >= text.size() || any_of.find(text[*pos]) == std::string_view::npos) return false;
  ++*pos;
  return true;
}

// Days from 1970-01-01 to the civil date y-m-d (proleptic Gregorian).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

}  // namespace

std::string FormatRfc3339(WallTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t).time_since_epoch().count();
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm utc{};
  gmtime_r(&tt, &utc);
  char buf[64];  // %04d: strftime's %Y does not pad years before 1000
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                              utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

Result<WallTime> ParseRfc3339(std::string_view text) {
  auto bad = [&] { return InvalidArgument("\"" + std::string(text) + "\" is not an RFC 3339 time"); };
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!Digits(text, &pos, 4, &year) || !Expect(text, &pos, "-") || !Digits(text, &pos, 2, &month) ||
      !Expect(text, &pos, "-") || !Digits(text, &pos, 2, &day) || !Expect(text, &pos, "Tt ") ||
      !Digits(text, &pos, 2, &hour) || !Expect(text, &pos, ":") || !Digits(text, &pos, 2, &minute) ||
      !Expect(text, &pos, ":") || !Digits(text, &pos, 2, &second)) {
    return bad();
  }
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) || hour > 23 || minute > 59 ||
      second > 60) {
    return bad();
  }
  if (second == 60) second = 59;
  int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 6) micros = micros * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 6; ++i) micros *= 10;
  }
  int offset_minutes = 0;
  if (Expect(text, &pos, "Zz")) {
    // UTC
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!Digits(text, &pos, 2, &oh) || !Expect(text, &pos, ":") || !Digits(text, &pos, 2, &om) || oh > 23 ||
        om > 59) {
      return bad();
    }
    offset_minutes = sign * (oh * 60 + om);
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  const int64_t secs = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second -
                       int64_t{offset_minutes} * 60;
  // Compared in seconds: the time_point's nanoseconds would overflow first.
  const std::chrono::seconds whole(secs);
  if (whole < std::chrono::floor<std::chrono::seconds>(kMinRfc3339Time.time_since_epoch()) ||
      whole > std::chrono::floor<std::chrono::seconds>(kMaxRfc3339Time.time_since_epoch())) {
    return InvalidArgument("\"" + std::string(text) + "\" is outside the years 1700..2199");
  }
  return WallTime(std::chrono::duration_cast<WallTime::duration>(whole + std::chrono::microseconds(micros)));
}

}  // namespace tessera::core
