#include "scheduler/rejected_pods.h"

#include <algorithm>

namespace tessera::scheduler {

void RejectedPods::Note(const std::string& key, const std::string& uid, Clock::time_point at) {
  MutexLock lock(mu_);
  std::erase_if(pods_, [&](const Pod& p) { return p.key == key; });
  pods_.push_back(Pod{key, uid, at});
  PruneLocked(at);
}

void RejectedPods::Forget(const std::string& key) {
  MutexLock lock(mu_);
  std::erase_if(pods_, [&](const Pod& p) { return p.key == key; });
}

std::vector<RejectedPods::Pod> RejectedPods::TakeSince(Clock::time_point since, size_t max) {
  MutexLock lock(mu_);
  std::vector<Pod> out;
  std::deque<Pod> keep;
  for (Pod& p : pods_) {  // oldest first: notes are appended in time order
    if (p.at >= since && out.size() < max) {
      out.push_back(std::move(p));
    } else {
      keep.push_back(std::move(p));
    }
  }
  pods_ = std::move(keep);
  std::sort(out.begin(), out.end(), [](const Pod& a, const Pod& b) { return a.at < b.at; });
  return out;
}

size_t RejectedPods::size() const {
  MutexLock lock(mu_);
  return pods_.size();
}

void RejectedPods::PruneLocked(Clock::time_point now) {
  while (!pods_.empty() && (pods_.size() > capacity_ || pods_.front().at < now - keep_)) pods_.pop_front();
}

}  // namespace tessera::scheduler
