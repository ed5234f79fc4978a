// Loopback helpers for tests that run Tessera's HTTP endpoints: a free port to
// hand to a --metrics-bind-address style flag, and samples read from a
// Prometheus text page.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"

namespace tessera::testing {

// A TCP port free on 127.0.0.1 now (0 when none could be found).
int FreeLoopbackPort();

// The sum of every sample of `name` (whatever its labels) on
// http://127.0.0.1:<port>/metrics. UNAVAILABLE when the page cannot be
// fetched, NOT_FOUND when it has no sample of `name`.
Result<uint64_t> ScrapeCounter(int port, const std::string& name);

// The text of http://127.0.0.1:<port>/metrics; UNAVAILABLE when it cannot be fetched.
Result<std::string> FetchMetrics(int port);

// The value of one sample in a Prometheus text page, `series` written as it
// is rendered: `name` or `name{a="x",b="y"}` (labels in the page's order).
// NOT_FOUND when the page lacks it.
Result<double> SampleValue(const std::string& page, const std::string& series);

// The sum of the samples of family member `name` in a page, whatever their
// labels (`name` alone or `name{...}`). NOT_FOUND when there is none.
Result<double> SumSamples(const std::string& page, const std::string& name);

}  // namespace tessera::testing
