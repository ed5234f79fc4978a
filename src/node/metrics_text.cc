#include "node/metrics_text.h"

namespace tessera::node {
namespace {

// HELP text escapes only backslash and newline.
std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string FormatCounters(const std::vector<CounterSample>& counters) {
  std::string out;
  for (const auto& c : counters) {
    out += "# HELP " + c.name + " " + EscapeHelp(c.help) + "\n";
    out += "# TYPE " + c.name + " counter\n";
    out += c.name + " " + std::to_string(c.value) + "\n";
  }
  return out;
}

}  // namespace tessera::node
