// Pieces of the Prometheus text exposition format 0.0.4 that every metric
// type needs: name checks, escaping, number formatting. Pure; thread-safe.
//
//   std::string line = "x" + FormatLabels({"pod"}, {"a\"b"}) + " " + FormatValue(1.5);  // x{pod="a\"b"} 1.5
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::metrics {

// The Content-Type of the text Registry::Render returns.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus).
bool IsValidLabelName(std::string_view name);

// HELP text: backslash -> \\, newline -> \n.
std::string EscapeHelp(std::string_view help);
// A label value: backslash -> \\, double quote -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);

// A sample value or an `le` bound: "+Inf", "-Inf", "NaN"; integral values
// below 1e15 in magnitude as integers ("3", "-2"); others in the shortest
// form that reads back to the same double, scientific only for very small or
// large magnitudes ("0.25", "0.0001", "1e-07", "1.5e+20").
std::string FormatValue(double value);

// `{a="x",b="y"}` for names[i]=values[i], with values escaped; "" when both
// are empty. Precondition: names.size() == values.size().
std::string FormatLabels(const std::vector<std::string>& names, const std::vector<std::string>& values);

}  // namespace tessera::metrics
