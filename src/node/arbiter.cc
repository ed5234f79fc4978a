#include "node/arbiter.h"

#include <algorithm>

namespace tessera::node {

std::vector<Grant> ComputeGrants(const std::vector<GrantEntry>& entries, const GrantOptions& options) {
  std::vector<Grant> out(entries.size());
  bool any = false;
  core::Priority highest = core::Priority::kLow;
  for (const GrantEntry& e : entries) {
    if (!any || e.priority > highest) highest = e.priority;
    any = true;
  }
  for (size_t i = 0; i < entries.size(); ++i) out[i].preemptible = entries[i].priority < highest;
  // Shares as they can be honoured: scaled down when they sum above the GPU.
  uint64_t total = 0;
  for (const GrantEntry& e : entries) total += std::min(e.share_ppm, kGrantPpm);
  std::vector<uint64_t> share(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t s = std::min(entries[i].share_ppm, kGrantPpm);
    share[i] = total > kGrantPpm ? s * kGrantPpm / total : s;
  }

  bool any_active = false;
  core::Priority top = core::Priority::kLow;
  for (const GrantEntry& e : entries) {
    if (!e.active) continue;
    if (!any_active || e.priority > top) top = e.priority;
    any_active = true;
  }
  if (!any_active) {
    for (size_t i = 0; i < entries.size(); ++i) out[i].ppm = static_cast<uint32_t>(share[i]);
    return out;
  }

  const uint64_t floor_percent = std::min<uint32_t>(options.min_share_percent, 100);
  uint64_t given = 0, spare_weight = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const GrantEntry& e = entries[i];
    if (e.priority < top) {
      out[i].held = true;
      out[i].ppm = static_cast<uint32_t>(share[i] * floor_percent / 100);
    } else if (e.active) {
      out[i].ppm = static_cast<uint32_t>(share[i]);
      if (e.policy == CorePolicy::kShare) spare_weight += share[i];
    }
    given += out[i].ppm;
  }
  const uint64_t spare = kGrantPpm - std::min<uint64_t>(given, kGrantPpm);
  if (spare == 0 || spare_weight == 0) return out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const GrantEntry& e = entries[i];
    if (e.priority != top || !e.active || e.policy != CorePolicy::kShare) continue;
    out[i].ppm += static_cast<uint32_t>(spare * share[i] / spare_weight);
  }
  return out;
}

}  // namespace tessera::node
