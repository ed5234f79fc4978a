// GPUs and claims shared by the DRA unit tests (test code only).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"

namespace tessera::dra::testing {

// Two 40 GiB A100s, the second with MPS.
inline std::vector<core::GpuInfo> TwoGpus() {
  core::GpuInfo a;
  a.index = 0;
  a.uuid = "GPU-aaaa";
  a.model = "A100";
  a.memory_mib = 40960;
  core::GpuInfo b = a;
  b.index = 1;
  b.uuid = "GPU-bbbb";
  b.mps = true;
  return {a, b};
}

// One allocation result of driver gpu.tessera.io in pool `pool`.
inline nlohmann::json Result(const std::string& device, const std::string& memory, const std::string& compute,
                             const std::string& pool = "node-1", const std::string& request = "gpu") {
  nlohmann::json r = {{"request", request}, {"driver", "gpu.tessera.io"}, {"pool", pool}, {"device", device},
                      {"shareID", "share-" + device}};
  nlohmann::json consumed = nlohmann::json::object();
  if (!memory.empty()) consumed["memory"] = memory;
  if (!compute.empty()) consumed["compute"] = compute;
  r["consumedCapacity"] = consumed;
  return r;
}

// An allocated ResourceClaim ns/name with `results`.
inline nlohmann::json Claim(const std::string& ns, const std::string& name, const std::string& uid,
                            const std::vector<nlohmann::json>& results) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}},
          {"spec", {{"devices", {{"requests", nlohmann::json::array()}}}}},
          {"status", {{"allocation", {{"devices", {{"results", nlohmann::json(results)}}}}}}}};
}

}  // namespace tessera::dra::testing
