// The Prometheus text exposition (format 0.0.4) of a few counters, with their
// HELP and TYPE lines: all tessera-node serves on /metrics for now. Pure;
// thread-safe.
//
//   std::string body = FormatCounters({{"tessera_node_allocations_total", "Allocate calls answered.", 3}});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::node {

// One counter without labels. `name` must be a valid metric name
// ([a-zA-Z_:][a-zA-Z0-9_:]*, ending in _total by convention); `help` is one
// line (backslashes and newlines are escaped).
struct CounterSample {
  std::string name;
  std::string help;
  uint64_t value = 0;
};

// "# HELP name help\n# TYPE name counter\nname value\n" per counter, in order.
std::string FormatCounters(const std::vector<CounterSample>& counters);

// The Content-Type of that text.
inline constexpr const char* kPrometheusTextType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tessera::node
