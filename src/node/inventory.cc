#include "node/inventory.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "core/codec.h"
#include "kube/paths.h"

namespace tessera::node {

Result<std::vector<core::GpuInfo>> ParseGpuFile(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": not YAML: " + e.what());
  }
  if (!root.IsMap() || !root["gpus"] || !root["gpus"].IsSequence()) {
    return InvalidArgument(source + ": needs a list `gpus`");
  }
  std::vector<core::GpuInfo> gpus;
  std::set<std::string> uuids;
  int index = 0;
  for (const auto& entry : root["gpus"]) {
    const std::string where = source + ": gpus[" + std::to_string(index) + "]";
    if (!entry.IsMap()) return InvalidArgument(where + ": not a map");
    core::GpuInfo gpu;
    gpu.index = index++;
    try {
      if (!entry["uuid"] || !entry["model"] || !entry["memMiB"]) {
        return InvalidArgument(where + ": uuid, model and memMiB are required");
      }
      gpu.uuid = entry["uuid"].as<std::string>();
      gpu.model = entry["model"].as<std::string>();
      gpu.memory_mib = entry["memMiB"].as<int64_t>();
      if (entry["sms"]) gpu.sm_count = entry["sms"].as<int>();
      if (entry["numa"]) gpu.numa_node = entry["numa"].as<int>();
      if (entry["healthy"]) gpu.healthy = entry["healthy"].as<bool>();
    } catch (const YAML::Exception& e) {
      return InvalidArgument(where + ": " + e.what());
    }
    if (gpu.uuid.empty()) return InvalidArgument(where + ": empty uuid");
    if (!uuids.insert(gpu.uuid).second) return InvalidArgument(where + ": uuid " + gpu.uuid + " appears twice");
    gpus.push_back(std::move(gpu));
  }
  TESSERA_RETURN_IF_ERROR(core::ValidateInventory(gpus).WithContext(source));
  return gpus;
}

std::string FormatGpuFile(const std::vector<core::GpuInfo>& gpus) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "gpus" << YAML::Value << YAML::BeginSeq;
  for (const auto& g : gpus) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "uuid" << YAML::Value << g.uuid << YAML::Key << "model"
        << YAML::Value << g.model << YAML::Key << "memMiB" << YAML::Value << g.memory_mib << YAML::Key << "sms"
        << YAML::Value << g.sm_count << YAML::Key << "numa" << YAML::Value << g.numa_node << YAML::Key << "healthy"
        << YAML::Value << g.healthy << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Result<std::vector<core::GpuInfo>> FileGpuSource::Read() {
  std::ifstream in(path_);
  if (!in) return NotFound("cannot read GPU file " + path_);
  std::stringstream text;
  text << in.rdbuf();
  return ParseGpuFile(text.str(), path_);
}

std::string LabelValue(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '-');
    if (out.size() == 63) break;
  }
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  while (!out.empty() && !alnum(out.back())) out.pop_back();
  size_t start = 0;
  while (start < out.size() && !alnum(out[start])) ++start;
  return out.substr(start);
}

Result<nlohmann::json> InventoryPatch(const std::vector<core::GpuInfo>& gpus) {
  TESSERA_ASSIGN_OR_RETURN(std::string inventory, core::EncodeInventory(gpus));
  // The agent marker tells the scheduler that pods on this node are admitted
  // by the Allocate handshake (it then keeps pending shares unambiguous).
  nlohmann::json patch = {{"metadata",
                           {{"annotations",
                             {{std::string(core::kInventoryAnnotation), inventory},
                              {std::string(core::kNodeAgentAnnotation), kNodeAgentVersion}}}}}};
  if (!gpus.empty()) {
    int64_t smallest = gpus.front().memory_mib;
    for (const auto& g : gpus) smallest = std::min(smallest, g.memory_mib);
    patch["metadata"]["labels"] = {{kModelLabel, LabelValue(gpus.front().model)},
                                   {kMemoryLabel, std::to_string(smallest)}};
  }
  return patch;
}

Result<bool> PublishInventory(kube::Api& api, const std::string& node, const std::vector<core::GpuInfo>& gpus) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json patch, InventoryPatch(gpus));
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json current, api.Get(kube::NodePath(node)));
  const nlohmann::json& meta = current["metadata"];
  bool same = true;
  for (const char* section : {"annotations", "labels"}) {
    if (!patch["metadata"].contains(section)) continue;
    for (const auto& [key, value] : patch["metadata"][section].items()) {
      if (!meta.contains(section) || !meta[section].contains(key) || meta[section][key] != value) same = false;
    }
  }
  if (same) return false;
  TESSERA_RETURN_IF_ERROR(api.Patch(kube::NodePath(node), kube::PatchType::kMerge, patch).status());
  return true;
}

}  // namespace tessera::node
