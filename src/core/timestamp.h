// RFC 3339 timestamps as Kubernetes writes them ("2026-03-01T12:30:05Z"):
// formatting in UTC to whole seconds, and parsing with optional fractional
// seconds and a "Z" or "+hh:mm" offset. Pure functions; thread-safe.
//
//   std::string text = FormatRfc3339(std::chrono::system_clock::now());
//   TESSERA_ASSIGN_OR_RETURN(auto when, ParseRfc3339(text));
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::core {

using WallTime = std::chrono::system_clock::time_point;

// The times handled: 1700-01-01T00:00:00Z to 2199-12-31T23:59:59Z (a
// system_clock time_point of nanoseconds spans only about 1678 to 2262).
inline constexpr WallTime kMinRfc3339Time{std::chrono::seconds(-8520336000)};
inline constexpr WallTime kMaxRfc3339Time{std::chrono::seconds(7258118399)};

// "YYYY-MM-DDThh:mm:ssZ", `t` truncated to whole seconds (toward the past).
// Parses back for every time in kMinRfc3339Time..kMaxRfc3339Time.
std::string FormatRfc3339(WallTime t);

// Parses "YYYY-MM-DDThh:mm:ss[.fraction](Z|z|+hh:mm|-hh:mm)" ('t' and ' ' are
// accepted for 'T'); fractions finer than a microsecond are dropped.
// INVALID_ARGUMENT quoting the text when it is anything else, a field is out
// of range (month 13, minute 60; a leap second 60 is read as 59), or the time
// lies outside kMinRfc3339Time..kMaxRfc3339Time.
Result<WallTime> ParseRfc3339(std::string_view text);

}  // namespace tessera::core
