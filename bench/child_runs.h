// For benchmarks that compare configurations set through the environment
// (no library, library, library with a limit): the binary runs itself once
// per configuration as a child and prints each result as a ratio to the first.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

// In the child (TESSERA_BENCH_CHILD set): runs the registered benchmarks and
// returns true; main() then returns 0. In the parent: false.
bool RunBenchmarksIfChild(int* argc, char** argv);

// Benchmark name -> real time in ns per iteration, from one child run of this
// binary with `env` (e.g. "LD_PRELOAD=... TESSERA_GPU_MEM_LIMIT_MIB_0=1024")
// and the parent's own arguments. Empty when the child failed.
std::map<std::string, double> RunChild(const std::string& env, int argc, char** argv);

// One table: a row per benchmark of the first run, its ns in every run and
// every later run's ratio to the first. With --benchmark_repetitions only the
// medians are shown. False (and a message on stderr) when a run is empty.
bool PrintRatios(const std::vector<std::pair<std::string, std::map<std::string, double>>>& runs);

}  // namespace tessera::bench
