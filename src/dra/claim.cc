#include "dra/claim.h"

#include <algorithm>

#include "core/dra_capacity.h"
#include "dra/resource_slice.h"

namespace tessera::dra {

namespace {

std::string StringAt(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string ClaimKey(const nlohmann::json& claim) {
  const nlohmann::json meta = claim.value("metadata", nlohmann::json::object());
  return "ResourceClaim " + StringAt(meta, "namespace") + "/" + StringAt(meta, "name");
}

}  // namespace

Result<std::vector<ClaimShare>> SharesFromClaim(const nlohmann::json& claim, const std::string& driver,
                                                const std::string& pool, const std::vector<core::GpuInfo>& gpus) {
  const std::string key = ClaimKey(claim);
  const nlohmann::json* results = nullptr;
  if (const auto status = claim.find("status"); status != claim.end() && status->is_object()) {
    if (const auto alloc = status->find("allocation"); alloc != status->end() && alloc->is_object()) {
      if (const auto r = alloc->find("devices"); r != alloc->end() && r->is_object()) {
        if (const auto rr = r->find("results"); rr != r->end() && rr->is_array()) results = &*rr;
      }
    }
  }
  if (results == nullptr) return FailedPrecondition(key + " is not allocated (it has no status.allocation)");

  std::vector<ClaimShare> out;
  for (const nlohmann::json& result : *results) {
    if (!result.is_object() || StringAt(result, "driver") != driver) continue;
    const std::string device = StringAt(result, "device");
    const std::string request = StringAt(result, "request");
    const std::string who = key + " device " + device;
    const std::string result_pool = StringAt(result, "pool");
    if (result_pool != pool)
      return FailedPrecondition(who + " is in pool \"" + result_pool + "\", not this node's (\"" + pool + "\")");
    const auto gpu = std::find_if(gpus.begin(), gpus.end(),
                                  [&](const core::GpuInfo& g) { return DeviceName(g.index) == device; });
    if (gpu == gpus.end()) return NotFound(who + ": this node has no such GPU");
    if (!gpu->healthy) return NotFound(who + ": GPU " + gpu->uuid + " is unhealthy");

    Result<core::DraConsumedCapacity> consumed = core::ConsumedCapacityOf(result);
    if (!consumed.ok()) return consumed.status().WithContext(who);
    const int64_t mem_mib = consumed->mem_mib.value_or(gpu->memory_mib);
    const int64_t core_milli = consumed->core_milli;
    if (mem_mib <= 0) return InvalidArgument(who + ": consumed memory is 0; a share needs at least 1Mi");
    auto same = std::find_if(out.begin(), out.end(), [&](const ClaimShare& s) { return s.device == device; });
    if (same == out.end()) {
      ClaimShare share;
      share.pool = result_pool;
      share.device = device;
      share.gpu = {gpu->index, gpu->uuid, 0, 0};
      out.push_back(share);
      same = out.end() - 1;
    }
    if (!request.empty()) same->requests.push_back(request);
    if (same->share_id.empty()) same->share_id = StringAt(result, "shareID");
    same->gpu.mem_mib += mem_mib;
    same->gpu.core_milli += core_milli;
    if (same->gpu.mem_mib > gpu->memory_mib)
      return InvalidArgument(who + ": consumed memory " + std::to_string(same->gpu.mem_mib) + " MiB is more than GPU " +
                             gpu->uuid + " has (" + std::to_string(gpu->memory_mib) + " MiB)");
    if (same->gpu.core_milli > core::kCoreMilliPerGpu)
      return InvalidArgument(who + ": consumed compute " + std::to_string(same->gpu.core_milli / 10) +
                             " % is over 100 % of GPU " + gpu->uuid);
  }
  if (out.empty()) return FailedPrecondition(key + " holds no device of driver " + driver);
  return out;
}

std::vector<node::PodRef> ReservedPods(const nlohmann::json& claim) {
  std::vector<node::PodRef> out;
  const auto meta = claim.find("metadata");
  const std::string ns = meta != claim.end() && meta->is_object() ? StringAt(*meta, "namespace") : "";
  const auto status = claim.find("status");
  if (status == claim.end() || !status->is_object()) return out;
  const auto reserved = status->find("reservedFor");
  if (reserved == status->end() || !reserved->is_array()) return out;
  for (const nlohmann::json& r : *reserved) {
    if (!r.is_object() || StringAt(r, "resource") != "pods" || !StringAt(r, "apiGroup").empty()) continue;
    out.push_back({ns, StringAt(r, "name"), StringAt(r, "uid")});
  }
  return out;
}

}  // namespace tessera::dra
