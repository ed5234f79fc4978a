#include "scheduler/pod_view_cache.h"

#include <algorithm>

namespace tessera::scheduler {

PodViewCache::PodViewCache(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

std::shared_ptr<const core::PodView> PodViewCache::Find(std::string_view uid, std::string_view resource_version) {
  if (uid.empty() || resource_version.empty()) return nullptr;
  MutexLock lock(mu_);
  auto it = by_uid_.find(std::string(uid));
  if (it == by_uid_.end() || it->second->resource_version != resource_version) return nullptr;
  ++hits_;
  return it->second;
}

std::shared_ptr<const core::PodView> PodViewCache::Latest(std::string_view uid) const {
  if (uid.empty()) return nullptr;
  MutexLock lock(mu_);
  auto it = by_uid_.find(std::string(uid));
  return it == by_uid_.end() ? nullptr : it->second;
}

void PodViewCache::Remember(std::shared_ptr<const core::PodView> pod) {
  if (pod == nullptr || pod->uid.empty()) return;
  MutexLock lock(mu_);
  std::string uid = pod->uid;
  auto [it, inserted] = by_uid_.insert_or_assign(uid, std::move(pod));
  if (!inserted) return;
  order_.push_back(std::move(uid));
  while (order_.size() > capacity_) {
    by_uid_.erase(order_.front());
    order_.pop_front();
  }
}

size_t PodViewCache::size() const {
  MutexLock lock(mu_);
  return by_uid_.size();
}

uint64_t PodViewCache::hits() const {
  MutexLock lock(mu_);
  return hits_;
}

}  // namespace tessera::scheduler
