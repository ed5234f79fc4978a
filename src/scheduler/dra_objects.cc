#include "scheduler/dra_objects.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/dra_capacity.h"

namespace tessera::scheduler {
namespace {

using Json = nlohmann::json;

const Json& Obj(const Json& j, const char* key) {
  static const Json kEmpty = Json::object();
  if (!j.is_object()) return kEmpty;
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}
const Json& Arr(const Json& j, const char* key) {
  static const Json kEmpty = Json::array();
  if (!j.is_object()) return kEmpty;
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}
std::string Str(const Json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// One `exactly` request of the driver's classes.
Result<DraRequest> RequestOf(const std::string& name, const Json& exactly, const std::string& who) {
  DraRequest r;
  r.name = name;
  const std::string mode = Str(exactly, "allocationMode");
  if (!mode.empty() && mode != "ExactCount") return InvalidArgument(who + " uses allocationMode " + mode);
  if (const auto c = exactly.find("count"); c != exactly.end()) {
    if (!c->is_number_integer() || c->get<int64_t>() < 1 || c->get<int64_t>() > 64)
      return InvalidArgument(who + ": count is not a number of GPUs");
    r.count = c->get<int>();
  }
  Result<core::DraCapacity> capacity = core::ReadDraCapacity(Obj(Obj(exactly, "capacity"), "requests"));
  if (!capacity.ok()) return capacity.status().WithContext(who);
  r.mem_mib = capacity->mem_mib.value_or(kWholeCardMemory);
  r.core_milli = capacity->core_milli.value_or(0);
  return r;
}

}  // namespace

Result<DraSlice> DecodeDraSlice(const Json& slice, std::string_view driver) {
  const Json& spec = Obj(slice, "spec");
  DraSlice out;
  out.name = Str(Obj(slice, "metadata"), "name");
  if (out.name.empty()) return InvalidArgument("ResourceSlice without metadata.name");
  if (Str(spec, "driver") != driver) return NotFound("ResourceSlice " + out.name + " is another driver's");
  out.node = Str(spec, "nodeName");
  out.pool = Str(Obj(spec, "pool"), "name");
  if (out.node.empty()) return InvalidArgument("ResourceSlice " + out.name + " names no spec.nodeName");
  if (out.pool.empty()) return InvalidArgument("ResourceSlice " + out.name + " names no spec.pool.name");
  for (const Json& device : Arr(spec, "devices")) {
    const std::string name = Str(device, "name");
    const Json& index = Obj(Obj(device, "attributes"), "index");
    const auto value = index.find("int");
    if (name.empty() || value == index.end() || !value->is_number_integer() || value->get<int64_t>() < 0 ||
        value->get<int64_t>() > 255) {
      out.unusable.push_back(name.empty() ? "(unnamed)" : name);
      continue;
    }
    out.devices.push_back({name, value->get<int>()});
  }
  return out;
}

Result<DraClaim> DecodeDraClaim(const Json& claim, std::string_view driver,
                                const std::set<std::string, std::less<>>& classes) {
  const Json& meta = Obj(claim, "metadata");
  DraClaim out;
  const std::string name = Str(meta, "name");
  if (name.empty()) return InvalidArgument("ResourceClaim without metadata.name");
  std::string ns = Str(meta, "namespace");
  if (ns.empty()) ns = "default";
  out.key = ns + "/" + name;
  out.uid = Str(meta, "uid");
  const std::string who = "ResourceClaim " + out.key;

  for (const Json& request : Arr(Obj(Obj(claim, "spec"), "devices"), "requests")) {
    const std::string rname = Str(request, "name");
    if (const auto exactly = request.find("exactly"); exactly != request.end() && exactly->is_object()) {
      if (!classes.contains(Str(*exactly, "deviceClassName"))) continue;
      Result<DraRequest> r = RequestOf(rname, *exactly, who + " request \"" + rname + "\"");
      if (r.ok()) out.requests.push_back(*r);
      else if (out.unmodelled.empty()) out.unmodelled = r.status().message();
      continue;
    }
    for (const Json& sub : Arr(request, "firstAvailable")) {
      if (classes.contains(Str(sub, "deviceClassName")) && out.unmodelled.empty())
        out.unmodelled = who + " request \"" + rname + "\" lists alternatives (firstAvailable)";
    }
  }

  const Json& status = Obj(claim, "status");
  const auto alloc = status.find("allocation");
  out.allocated = alloc != status.end() && alloc->is_object();
  if (!out.allocated) return out;
  for (const Json& result : Arr(Obj(*alloc, "devices"), "results")) {
    if (Str(result, "driver") != driver) continue;
    DraDeviceShare share{Str(result, "pool"), Str(result, "device")};
    const std::string where = who + " device " + share.device;
    if (share.device.empty() || share.pool.empty()) return InvalidArgument(where + ": result without pool or device");
    Result<core::DraConsumedCapacity> consumed = core::ConsumedCapacityOf(result);
    if (!consumed.ok()) return consumed.status().WithContext(where);
    share.mem_mib = consumed->mem_mib.value_or(kWholeCardMemory);
    share.core_milli = consumed->core_milli;
    auto same = std::find_if(out.shares.begin(), out.shares.end(), [&](const DraDeviceShare& s) {
      return s.pool == share.pool && s.device == share.device;
    });
    if (same == out.shares.end()) {
      out.shares.push_back(share);
      continue;
    }
    // Two results on one device (two requests of the claim sharing it).
    same->mem_mib = same->mem_mib == kWholeCardMemory || share.mem_mib == kWholeCardMemory
                        ? kWholeCardMemory
                        : same->mem_mib + share.mem_mib;
    same->core_milli = std::min(core::kCoreMilliPerGpu, same->core_milli + share.core_milli);
  }
  return out;
}

core::PodRequest DraPodRequest::On(const core::NodeState& node) const {
  core::PodRequest out = request;
  int64_t card = 0;
  for (const core::GpuInfo& gpu : node.info.gpus) card = std::max(card, gpu.memory_mib);
  for (size_t i = 0; i < out.containers.size() && i < whole_card.size(); ++i) {
    if (whole_card[i]) out.containers[i].mem_mib_per_gpu = card;
  }
  return out;
}

Result<DraPodRequest> DraPodRequestOf(const core::PodView& pod,
                                      const std::function<const DraClaim*(const std::string& key)>& find) {
  DraPodRequest out;
  out.request.key = pod.key;
  out.request.cpu_milli = pod.host.cpu_milli;
  out.request.memory_mib = pod.host.memory_mib;
  for (const core::PodView::ClaimRef& ref : pod.claims) {
    if (ref.claim.empty())
      return Status(StatusCode::kUnavailable, "pod " + pod.key + ": the claim for \"" + ref.name + "\" is not made yet");
    const std::string key = pod.ns + "/" + ref.claim;
    const DraClaim* claim = find(key);
    if (claim == nullptr) return Status(StatusCode::kUnavailable, "pod " + pod.key + ": ResourceClaim " + key + " is not seen yet");
    if (claim->allocated) continue;
    if (!claim->unmodelled.empty()) return Status(StatusCode::kUnimplemented, claim->unmodelled);
    for (const DraRequest& r : claim->requests) {
      core::ContainerRequest c;
      c.name = ref.claim + "/" + r.name;
      c.gpu_count = r.count;
      c.mem_mib_per_gpu = r.mem_mib == kWholeCardMemory ? 0 : r.mem_mib;
      c.core_milli_per_gpu = r.core_milli;
      out.request.containers.push_back(std::move(c));
      out.whole_card.push_back(r.mem_mib == kWholeCardMemory);
    }
  }
  if (out.request.containers.empty())
    return NotFound("pod " + pod.key + " asks no GPU of the driver through a claim not allocated yet");
  return out;
}

}  // namespace tessera::scheduler
