// Loopback helpers for tests that run Tessera's HTTP endpoints: a free port to
// hand to a --metrics-bind-address style flag, and one counter read from a
// Prometheus text page.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tessera::testing {

// A TCP port free on 127.0.0.1 now (0 when none could be found).
int FreeLoopbackPort();

// The value of the unlabelled sample `name` on http://127.0.0.1:<port>/metrics.
// UNAVAILABLE when the page cannot be fetched, NOT_FOUND when it lacks `name`.
Result<uint64_t> ScrapeCounter(int port, const std::string& name);

}  // namespace tessera::testing
