#include "kubectl/claims.h"

#include <algorithm>
#include <tuple>

#include "core/dra_capacity.h"
#include "core/dra_names.h"
#include "kubectl/object_fields.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;

// gpu-<index> -> index; -1 for any other name.
int DeviceIndex(const std::string& device) {
  constexpr std::string_view kPrefix = "gpu-";
  if (!device.starts_with(kPrefix) || device.size() == kPrefix.size() || device.size() > kPrefix.size() + 4) return -1;
  int index = 0;
  for (size_t i = kPrefix.size(); i < device.size(); ++i) {
    if (device[i] < '0' || device[i] > '9') return -1;
    index = index * 10 + (device[i] - '0');
  }
  return index;
}

std::string FirstReservedPod(const Json& claim) {
  const Json* reserved = FieldAt(claim, {"status", "reservedFor"});
  if (reserved == nullptr || !reserved->is_array()) return "";
  for (const Json& r : *reserved) {
    if (StringAt(r, {"resource"}) == "pods" && StringAt(r, {"apiGroup"}).empty()) return StringAt(r, {"name"});
  }
  return "";
}

// The share one result takes, or the reason it cannot be read.
Result<ClaimShare> ShareOf(const Json& result) {
  const std::string device = StringAt(result, {"device"});
  ClaimShare share;
  share.node = StringAt(result, {"pool"});
  share.index = DeviceIndex(device);
  if (share.index < 0) return InvalidArgument("device \"" + device + "\" is not a GPU of tessera-node (gpu-<index>)");
  Result<core::DraConsumedCapacity> consumed = core::ConsumedCapacityOf(result);
  if (!consumed.ok())
    return Status(consumed.status().code(), "device " + device + " " + consumed.status().message());
  share.mem_mib = consumed->mem_mib.value_or(0);  // 0: the whole card
  share.core_milli = consumed->core_milli;
  return share;
}

}  // namespace

std::string ClaimLabel(const std::string& claim) { return "claim:" + claim; }

ClaimShares ClaimSharesFrom(const Json& claims) {
  ClaimShares out;
  if (!claims.is_array()) return out;
  for (const Json& claim : claims) {
    const Json* results = FieldAt(claim, {"status", "allocation", "devices", "results"});
    if (results == nullptr || !results->is_array()) continue;
    const std::string ns = StringAt(claim, {"metadata", "namespace"});
    const std::string name = StringAt(claim, {"metadata", "name"});
    const std::string pod = FirstReservedPod(claim);
    const size_t first = out.shares.size();
    for (const Json& result : *results) {
      if (StringAt(result, {"driver"}) != core::kDraDriver) continue;
      Result<ClaimShare> share = ShareOf(result);
      if (!share.ok()) {
        out.problems.push_back({"claim " + ns + "/" + name, share.status().message()});
        continue;
      }
      share->ns = ns;
      share->claim = name;
      share->pod = pod;
      auto same = std::find_if(out.shares.begin() + static_cast<std::ptrdiff_t>(first), out.shares.end(),
                               [&](const ClaimShare& s) { return s.node == share->node && s.index == share->index; });
      if (same == out.shares.end()) {
        out.shares.push_back(std::move(share).value());
        continue;
      }
      // Two requests on one GPU: summed (a request without a size holds the whole card).
      same->mem_mib = same->mem_mib == 0 || share->mem_mib == 0 ? 0 : same->mem_mib + share->mem_mib;
      same->core_milli += share->core_milli;
    }
  }
  std::sort(out.shares.begin(), out.shares.end(), [](const ClaimShare& a, const ClaimShare& b) {
    return std::tie(a.ns, a.claim, a.node, a.index) < std::tie(b.ns, b.claim, b.node, b.index);
  });
  return out;
}

}  // namespace tessera::kubectl
