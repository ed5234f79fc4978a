// NodeNamesCache: the NodeNames lists of kube-scheduler's recent calls,
// parsed once. kube-scheduler sends the same list to filter and prioritize of
// a pod, and to pod after pod while the feasible nodes do not change; at
// 5,000 nodes parsing it is a tenth of a filter + prioritize cycle, and
// comparing its text with a remembered one costs a few microseconds. A list
// found is the same shared vector, which lets callers that cache by list
// (the extender's ledger indexes) compare pointers first. Bounded: the last
// kEntries lists are kept. Thread-safe.
//
//   NodeNamesCache cache;
//   std::shared_ptr<const NodeNamesCache::List> list = cache.Find(text);
//   if (list == nullptr) list = cache.Remember(text, Parse(text));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_annotations.h"

namespace tessera::scheduler {

class NodeNamesCache {
 public:
  struct List {
    std::vector<std::string> names;
    // Every name is printable ASCII without quotes or backslashes.
    bool plain = false;
  };
  static constexpr size_t kEntries = 4;

  NodeNamesCache() = default;
  NodeNamesCache(const NodeNamesCache&) = delete;
  NodeNamesCache& operator=(const NodeNamesCache&) = delete;

  // The list remembered for exactly this text (byte for byte); nullptr when
  // there is none. A hit is counted in hits().
  std::shared_ptr<const List> Find(std::string_view text);
  // Remembers `list` as the parse of `text` (forgetting the least recently
  // found entry beyond kEntries) and returns it, shared; when `text` is
  // remembered already (another call parsed it meanwhile), returns that.
  std::shared_ptr<const List> Remember(std::string_view text, List list);

  uint64_t hits() const;

 private:
  struct Entry {
    std::string text;
    std::shared_ptr<const List> list;
  };
  mutable Mutex mu_;
  std::vector<Entry> entries_ TESSERA_GUARDED_BY(mu_);  // most recently used last
  uint64_t hits_ TESSERA_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::scheduler
