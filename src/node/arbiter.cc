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
  uint64_t given = 0, spare_weight = 0;  // spare_weight: shares of the containers spare time may go to
  for (size_t i = 0; i < entries.size(); ++i) {
    const GrantEntry& e = entries[i];
    if (e.priority < top) {
      out[i].held = true;
      out[i].ppm = static_cast<uint32_t>(share[i] * floor_percent / 100);
    } else if (e.active) {
      out[i].ppm = static_cast<uint32_t>(share[i]);
      if (e.policy == CorePolicy::kShare && share[i] > 0) spare_weight += share[i];
    }
    given += out[i].ppm;
  }
  // Spare time goes to the active `share` containers at `top` in proportion
  // to their shares, none above its ceiling; what a capped one cannot take is
  // divided again among the others (at most one round per container).
  uint64_t spare = kGrantPpm - std::min<uint64_t>(given, kGrantPpm);
  std::vector<bool> open(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    const GrantEntry& e = entries[i];
    open[i] = e.priority == top && e.active && e.policy == CorePolicy::kShare && share[i] > 0;
  }
  auto ceiling = [&](size_t i) -> uint64_t {
    const uint32_t limit = entries[i].limit_ppm;
    return limit == 0 ? kGrantPpm : std::max<uint64_t>(std::min(limit, kGrantPpm), share[i]);
  };
  for (size_t round = 0; round <= entries.size() && spare > 0 && spare_weight > 0; ++round) {
    uint64_t handed = 0, weight = 0;
    bool capped = false;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!open[i]) continue;
      const uint64_t want = spare * share[i] / spare_weight;
      const uint64_t room = ceiling(i) - std::min<uint64_t>(out[i].ppm, ceiling(i));
      const uint64_t add = std::min(want, room);
      out[i].ppm += static_cast<uint32_t>(add);
      handed += add;
      if (add == room) {
        open[i] = false;  // at its ceiling
        capped = true;
      } else {
        weight += share[i];
      }
    }
    spare -= std::min(handed, spare);
    spare_weight = weight;
    if (!capped) break;  // everyone took their proportion: only rounding is left
  }
  return out;
}

}  // namespace tessera::node
