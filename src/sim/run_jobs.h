// RunJobs: runs independent jobs (a simulator's policy x seed runs) on a small
// pool of threads and hands their results back in job order; plus the output
// folder the subcommands write into. Thread-safe for distinct calls; the job
// function is called from several threads at once.
//
//   TESSERA_ASSIGN_OR_RETURN(std::vector<RunResult> runs,
//                            RunJobs(jobs.size(), /*workers=*/0, [&](size_t j) { return Run(jobs[j]); }));
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tessera::sim {

// The threads RunJobs starts for `jobs` jobs: `requested` when positive, else
// the CPU count (at least 1), and never more than `jobs`.
int WorkerCount(int requested, size_t jobs);

// Calls body(0) .. body(count - 1), each exactly once, from WorkerCount(workers,
// count) threads that take the next job as they finish one; returns when all
// have returned. `body` must be safe to call concurrently.
void ParallelFor(size_t count, int workers, const std::function<void(size_t)>& body);

// Creates `dir` and its parents (fine when it exists). INTERNAL
// "DIR: cannot create: REASON" when it cannot.
Status CreateOutputDir(const std::string& dir);

namespace internal {
template <typename R>
struct ResultValue;
template <typename T>
struct ResultValue<Result<T>> {
  using type = T;
};
}  // namespace internal

// Runs fn(0) .. fn(count - 1) through ParallelFor, where fn returns a
// Result<T>, and returns the values in job order. Every job runs even when
// one fails; the error is then that of the lowest-numbered failed job.
template <typename Fn>
auto RunJobs(size_t count, int workers, Fn fn)
    -> Result<std::vector<typename internal::ResultValue<std::invoke_result_t<Fn&, size_t>>::type>> {
  using T = typename internal::ResultValue<std::invoke_result_t<Fn&, size_t>>::type;
  std::vector<std::optional<T>> values(count);
  std::vector<Status> errors(count);
  ParallelFor(count, workers, [&fn, &values, &errors](size_t j) {
    auto r = fn(j);
    if (r.ok()) {
      values[j] = std::move(r).value();
    } else {
      errors[j] = r.status();
    }
  });
  for (const Status& e : errors)
    if (!e.ok()) return e;
  std::vector<T> out;
  out.reserve(count);
  for (auto& v : values) out.push_back(std::move(*v));
  return out;
}

}  // namespace tessera::sim
