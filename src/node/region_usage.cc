#include "node/region_usage.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <time.h>
#include <tuple>

#include "core/codec.h"
#include "region/region.h"

namespace tessera::node {
namespace {

constexpr uint64_t kBytesPerMiB = 1ull << 20;

auto Key(const ContainerGpu& c) { return std::tie(c.pod.uid, c.container, c.claim_uid, c.ordinal); }

bool SortedBefore(const ContainerGpu& a, const ContainerGpu& b) {
  return std::tie(a.pod.ns, a.pod.name, a.container, a.ordinal) < std::tie(b.pod.ns, b.pod.name, b.container, b.ordinal);
}

const ContainerGpu* Find(const UsageSnapshot& snapshot, const ContainerGpu& like) {
  for (const ContainerGpu& c : like.claim_uid.empty() ? snapshot.containers : snapshot.claims) {
    if (Key(c) == Key(like)) return &c;
  }
  return nullptr;
}

double Utilization(const ContainerGpu& now, const ContainerGpu* before, std::chrono::steady_clock::duration wall) {
  if (before == nullptr || !now.measured || !before->measured) return 0;
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(wall).count();
  // A region recreated (its counter went back) has no rate until the next sample.
  if (wall_us <= 0 || now.counters.gpu_us < before->counters.gpu_us) return 0;
  const double ratio = static_cast<double>(now.counters.gpu_us - before->counters.gpu_us) / static_cast<double>(wall_us);
  return std::clamp(ratio, 0.0, 1.0);
}

int64_t MiB(uint64_t bytes) { return static_cast<int64_t>(bytes / kBytesPerMiB); }

// The totals of the GPU `share` is on: by uuid, by index when the share has
// none; end() when the node does not have it.
std::vector<GpuTotals>::iterator TotalsOf(std::vector<GpuTotals>& gpus, const core::GpuShare& share) {
  return std::find_if(gpus.begin(), gpus.end(), [&](const GpuTotals& t) {
    return share.uuid.empty() ? t.gpu.index == share.index : t.gpu.uuid == share.uuid;
  });
}

// Fills what `c` (GPU `i` of a container or claim, its names set) holds of
// `share` on `gpu`: the limit (the card when the share names no memory),
// the compute share, the region's counters when read, and the utilization
// since `previous`.
void FillShare(ContainerGpu& c, const core::GpuInfo& gpu, const core::GpuShare& share, int i,
               const std::optional<std::vector<RegionCounters>>& counters, const UsageSnapshot* previous,
               std::chrono::steady_clock::duration wall) {
  c.ordinal = i;
  c.gpu = gpu;
  const int64_t mem_mib = share.mem_mib > 0 ? std::min(share.mem_mib, gpu.memory_mib) : gpu.memory_mib;
  c.limit_bytes = static_cast<uint64_t>(std::max<int64_t>(mem_mib, 0)) * kBytesPerMiB;
  c.core_share = static_cast<double>(share.core_milli) / static_cast<double>(core::kCoreMilliPerGpu);
  if (counters && static_cast<int>(counters->size()) > i) {
    c.measured = true;
    c.counters = (*counters)[static_cast<size_t>(i)];
  }
  c.utilization = Utilization(c, previous != nullptr ? Find(*previous, c) : nullptr, wall);
}

}  // namespace

Result<std::vector<RegionCounters>> ReadRegionCounters(const std::string& dir, int gpus) {
  if (gpus < 0 || gpus > region::kMaxGpus) {
    return InvalidArgument("a region holds 0.." + std::to_string(region::kMaxGpus) + " GPUs, asked for " +
                           std::to_string(gpus));
  }
  TESSERA_ASSIGN_OR_RETURN(region::Region mapped, region::Region::OpenExisting(dir));
  const region::Layout& l = *mapped.layout();
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock the arbiter's heartbeat is in
  const uint64_t now_us = static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
  const uint64_t heartbeat = l.arbiter.heartbeat_us.load(std::memory_order_acquire);
  const bool arbiter_alive = heartbeat != 0 && now_us < heartbeat + l.arbiter.lease_us.load(std::memory_order_relaxed);
  std::vector<RegionCounters> out(static_cast<size_t>(gpus));
  for (int i = 0; i < gpus; ++i) {
    RegionCounters& c = out[static_cast<size_t>(i)];
    c.used_bytes = l.gpus[i].used_bytes.load(std::memory_order_relaxed);
    c.peak_bytes = l.gpus[i].peak_bytes.load(std::memory_order_relaxed);
    c.oom_refusals = l.gpus[i].oom_refusals.load(std::memory_order_relaxed);
    c.gpu_us = l.compute[i].used_us.load(std::memory_order_relaxed);
    c.throttled_us = l.compute[i].throttled_us.load(std::memory_order_relaxed);
    c.granted_ppm = arbiter_alive ? l.compute[i].grant_ppm.load(std::memory_order_relaxed)
                                  : l.compute[i].share_ppm.load(std::memory_order_relaxed);
    c.held = arbiter_alive && l.compute[i].held.load(std::memory_order_relaxed) != 0;
  }
  return out;
}

std::string RegionHostDir(const std::string& root, const std::string& uid, const std::string& container) {
  return root + "/" + uid + "/" + container;
}

std::vector<PodAssignment> ActiveAssignments(const PodViews& pods, const std::string& node) {
  std::vector<PodAssignment> out;
  for (const auto& pod : pods) {
    if (pod->node != node || pod->terminal()) continue;
    PodAssignment one = PodAssignmentOf(*pod);
    if (!one.assignment || one.assignment->node != node) continue;
    const std::vector<std::string> allocated = AllocatedContainers(*pod);
    const std::set<std::string> done(allocated.begin(), allocated.end());
    auto& containers = one.assignment->containers;
    std::erase_if(containers, [&](const core::ContainerAssignment& c) { return !done.contains(c.name); });
    if (!containers.empty()) out.push_back(std::move(one));
  }
  return out;
}

UsageSnapshot JoinUsage(const std::vector<PodAssignment>& pods, const std::vector<core::GpuInfo>& inventory,
                        const RegionLookup& lookup, core::WallTime at, std::chrono::steady_clock::time_point taken,
                        const UsageSnapshot* previous, const std::vector<GpuLoad>* device_load) {
  UsageSnapshot out;
  out.at = at;
  out.taken = taken;
  for (const core::GpuInfo& g : inventory) {
    GpuTotals t;
    t.gpu = g;
    out.gpus.push_back(std::move(t));
  }
  std::sort(out.gpus.begin(), out.gpus.end(), [](const GpuTotals& a, const GpuTotals& b) {
    return a.gpu.index < b.gpu.index;
  });
  const auto wall = previous != nullptr ? taken - previous->taken : std::chrono::steady_clock::duration::zero();
  for (const PodAssignment& pod : pods) {
    if (!pod.assignment) continue;
    for (const core::ContainerAssignment& container : pod.assignment->containers) {
      const int n = static_cast<int>(container.gpus.size());
      const std::optional<std::vector<RegionCounters>> counters = lookup(pod.uid, container.name, n);
      for (int i = 0; i < n; ++i) {
        const core::GpuShare& share = container.gpus[static_cast<size_t>(i)];
        auto totals = TotalsOf(out.gpus, share);
        if (totals == out.gpus.end()) continue;
        ContainerGpu c;
        c.pod = PodRef{pod.ns, pod.name, pod.uid};
        c.container = container.name;
        FillShare(c, totals->gpu, share, i, counters, previous, wall);
        totals->used_bytes += c.counters.used_bytes;
        totals->allocated_bytes += c.limit_bytes;
        totals->core_allocated += c.core_share;
        totals->utilization = std::min(1.0, totals->utilization + c.utilization);
        totals->containers += 1;
        out.containers.push_back(std::move(c));
      }
    }
  }
  std::sort(out.containers.begin(), out.containers.end(), SortedBefore);
  if (device_load != nullptr) {
    for (const GpuLoad& load : *device_load) {
      for (GpuTotals& t : out.gpus) {
        if (t.gpu.index != load.index) continue;
        t.device_measured = true;
        t.used_bytes = load.memory_used_bytes;
        if (load.utilization) t.utilization = std::clamp(*load.utilization, 0.0, 1.0);
      }
    }
  }
  return out;
}

void AddClaimUsage(UsageSnapshot& snapshot, const std::vector<ClaimRecord>& claims, const RegionLookup& lookup,
                   const UsageSnapshot* previous) {
  const auto wall = previous != nullptr ? snapshot.taken - previous->taken : std::chrono::steady_clock::duration::zero();
  for (const ClaimRecord& claim : claims) {
    const std::vector<core::GpuShare>& shares = claim.holder.shares;
    const int n = static_cast<int>(shares.size());
    const std::optional<std::vector<RegionCounters>> counters = lookup(claim.holder.uid, kClaimRegionContainer, n);
    for (int i = 0; i < n; ++i) {
      const core::GpuShare& share = shares[static_cast<size_t>(i)];
      auto totals = TotalsOf(snapshot.gpus, share);
      if (totals == snapshot.gpus.end()) continue;
      ContainerGpu c;
      c.pod = claim.pods.empty() ? PodRef{claim.Namespace(), "", ""} : claim.pods.front();
      c.container = kClaimRegionContainer;
      c.claim = claim.Name();
      c.claim_uid = claim.holder.uid;
      FillShare(c, totals->gpu, share, i, counters, previous, wall);
      if (!totals->device_measured) {
        totals->used_bytes += c.counters.used_bytes;
        totals->utilization = std::min(1.0, totals->utilization + c.utilization);
      }
      totals->allocated_bytes += c.limit_bytes;
      totals->core_allocated += c.core_share;
      totals->claims += 1;
      snapshot.claims.push_back(std::move(c));
    }
  }
  std::sort(snapshot.claims.begin(), snapshot.claims.end(), [](const ContainerGpu& a, const ContainerGpu& b) {
    return std::tie(a.pod.ns, a.claim, a.ordinal) < std::tie(b.pod.ns, b.claim, b.ordinal);
  });
}

std::vector<OomRefusal> NewOomRefusals(const UsageSnapshot* previous, const UsageSnapshot& now) {
  std::vector<OomRefusal> out;
  if (previous == nullptr) return out;
  std::vector<const ContainerGpu*> all;
  for (const ContainerGpu& c : now.containers) all.push_back(&c);
  // A claim reserved for no pod has nobody to tell.
  for (const ContainerGpu& c : now.claims) if (!c.pod.name.empty()) all.push_back(&c);
  for (const ContainerGpu* share : all) {
    const ContainerGpu& c = *share;
    if (!c.measured) continue;
    const ContainerGpu* before = Find(*previous, c);
    const uint64_t earlier = before != nullptr && before->measured ? before->counters.oom_refusals : 0;
    // A counter that went back belongs to a region made anew: all of it is new.
    const uint64_t refused = c.counters.oom_refusals >= earlier ? c.counters.oom_refusals - earlier
                                                                : c.counters.oom_refusals;
    if (refused > 0) out.push_back(OomRefusal{c, refused});
  }
  return out;
}

std::string OomRefusalMessage(const OomRefusal& r) {
  const ContainerGpu& c = r.share;
  if (!c.claim.empty()) {
    return "claim " + c.claim + ": " + std::to_string(r.refused) + " GPU memory allocation(s) refused with " +
           "CUDA_ERROR_OUT_OF_MEMORY on GPU " + std::to_string(c.gpu.index) + " (" + c.gpu.uuid + "): its share is " +
           std::to_string(MiB(c.limit_bytes)) + " MiB and its containers hold " +
           std::to_string(MiB(c.counters.used_bytes)) +
           " MiB; raise the claim's capacity.requests.memory or lower the workload's memory use";
  }
  return "container " + c.container + ": " + std::to_string(r.refused) + " GPU memory allocation(s) refused with " +
         "CUDA_ERROR_OUT_OF_MEMORY on GPU " + std::to_string(c.gpu.index) + " (" + c.gpu.uuid + "): its share is " +
         std::to_string(MiB(c.limit_bytes)) + " MiB and it holds " + std::to_string(MiB(c.counters.used_bytes)) +
         " MiB; raise tessera.io/gpu-mem or lower the workload's memory use";
}

static std::string UsageEntryName(const ContainerGpu& c) { return c.claim.empty() ? c.container : "claim/" + c.claim; }

std::map<std::string, core::PodUsage> PodUsages(const UsageSnapshot& snapshot) {
  std::map<std::string, core::PodUsage> out;
  std::vector<const ContainerGpu*> all;
  for (const ContainerGpu& c : snapshot.containers) all.push_back(&c);
  for (const ContainerGpu& c : snapshot.claims) if (!c.pod.uid.empty()) all.push_back(&c);
  for (const ContainerGpu* share : all) {
    const ContainerGpu& c = *share;
    if (!c.measured) continue;
    core::PodUsage& pod = out[c.pod.uid];
    pod.at = snapshot.at;
    const std::string name = UsageEntryName(c);
    if (pod.containers.empty() || pod.containers.back().name != name) {
      core::ContainerUsage container;
      container.name = name;
      pod.containers.push_back(std::move(container));
    }
    core::GpuUse use;
    use.index = c.gpu.index;
    use.uuid = c.gpu.uuid;
    use.mem_used_mib = MiB(c.counters.used_bytes);
    use.utilization = std::round(c.utilization * 1000.0) / 1000.0;
    pod.containers.back().gpus.push_back(std::move(use));
  }
  return out;
}

bool UsageChanged(const core::PodUsage& published, const core::PodUsage& now, const UsagePublishPolicy& policy) {
  if (published.containers.size() != now.containers.size()) return true;
  for (size_t i = 0; i < now.containers.size(); ++i) {
    const core::ContainerUsage& a = published.containers[i];
    const core::ContainerUsage& b = now.containers[i];
    if (a.name != b.name || a.gpus.size() != b.gpus.size()) return true;
    for (size_t j = 0; j < b.gpus.size(); ++j) {
      const core::GpuUse& x = a.gpus[j];
      const core::GpuUse& y = b.gpus[j];
      if (x.index != y.index || x.uuid != y.uuid) return true;
      const double moved = static_cast<double>(std::abs(y.mem_used_mib - x.mem_used_mib));
      const double relative = static_cast<double>(x.mem_used_mib) * policy.mem_delta_fraction;
      if (moved > 0 && moved >= std::max(static_cast<double>(policy.mem_delta_mib), relative)) return true;
      if (std::abs(y.utilization - x.utilization) >= policy.utilization_delta) return true;
    }
  }
  return false;
}

}  // namespace tessera::node
