#include "scheduler/node_names_cache.h"

#include <algorithm>

namespace tessera::scheduler {

std::shared_ptr<const NodeNamesCache::List> NodeNamesCache::Find(std::string_view text) {
  MutexLock lock(mu_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->text != text) continue;
    std::shared_ptr<const List> found = it->list;
    std::rotate(std::prev(it.base()), it.base(), entries_.end());  // most recently used last
    ++hits_;
    return found;
  }
  return nullptr;
}

std::shared_ptr<const NodeNamesCache::List> NodeNamesCache::Remember(std::string_view text, List list) {
  auto shared = std::make_shared<const List>(std::move(list));
  MutexLock lock(mu_);
  // Two calls with the same new list may both have parsed it: keep one.
  for (const Entry& e : entries_)
    if (e.text == text) return e.list;
  if (entries_.size() >= kEntries) entries_.erase(entries_.begin());
  entries_.push_back({std::string(text), shared});
  return shared;
}

uint64_t NodeNamesCache::hits() const {
  MutexLock lock(mu_);
  return hits_;
}

}  // namespace tessera::scheduler
