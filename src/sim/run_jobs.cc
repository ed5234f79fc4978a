#include "sim/run_jobs.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <system_error>
#include <thread>

namespace tessera::sim {

int WorkerCount(int requested, size_t jobs) {
  const int wanted = requested > 0 ? requested : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(wanted), jobs));
}

void ParallelFor(size_t count, int workers, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  auto worker = [&next, &body, count] {
    for (size_t j; (j = next.fetch_add(1)) < count;) body(j);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < WorkerCount(workers, count); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
}

Status CreateOutputDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal(dir + ": cannot create: " + ec.message());
  return Status::Ok();
}

}  // namespace tessera::sim
