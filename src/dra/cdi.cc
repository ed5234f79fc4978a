#include "dra/cdi.h"

#include "node/identify.h"

namespace tessera::dra {

namespace {
bool CdiNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == ':';
}
}  // namespace

std::string CdiDeviceId(std::string_view claim_uid) { return std::string(kCdiKind) + "=" + std::string(claim_uid); }
std::string CdiSpecFileName(std::string_view claim_uid) { return "tessera.io-gpu-" + std::string(claim_uid) + ".json"; }
std::string ClaimRegionRoot(const node::MountPaths& paths) { return node::ClaimsRoot(paths.region_root_host); }

Result<CdiSpec> CdiSpecFor(const ClaimRef& claim, const std::vector<ClaimShare>& shares,
                           const std::vector<core::GpuInfo>& gpus, const node::MountPaths& paths,
                           const node::ComputeAnnotations& compute) {
  if (claim.uid.empty()) return InvalidArgument("claim " + claim.Key() + " has no uid");
  for (char c : claim.uid) {
    if (!CdiNameChar(c)) return InvalidArgument("claim " + claim.Key() + " uid \"" + claim.uid + "\" is not a CDI device name");
  }
  if (shares.empty()) return InvalidArgument("claim " + claim.Key() + " holds no GPU share");
  node::PendingPod pod;
  pod.ns = claim.ns;
  pod.name = claim.name;
  pod.uid = claim.uid;
  pod.priority = compute.priority;
  pod.core_hard = compute.core_hard;
  pod.core_limit_milli = compute.core_limit_milli;
  node::PendingContainer container{kClaimContainer, {}};
  for (const ClaimShare& s : shares) container.gpus.push_back(s.gpu);
  node::MountPaths claim_paths = paths;
  claim_paths.board_dir_host = node::BoardHostDir(paths);  // one folder for pods and claims
  claim_paths.region_root_host = ClaimRegionRoot(paths);
  claim_paths.resources = {};  // no front end: a claim is asked for in DRA's own words
  claim_paths.mps_root.clear();
  TESSERA_ASSIGN_OR_RETURN(node::ContainerEnv env, node::BuildContainerEnv(pod, container, gpus, claim_paths));

  nlohmann::json envs = nlohmann::json::array();
  for (const auto& [name, value] : env.envs) envs.push_back(name + "=" + value);
  nlohmann::json mounts = nlohmann::json::array();
  for (const node::MountSpec& m : env.mounts) {
    nlohmann::json options = m.read_only ? nlohmann::json{"ro", "nosuid", "nodev", "bind"}
                                         : nlohmann::json{"rw", "nosuid", "nodev", "bind"};
    mounts.push_back({{"hostPath", m.host_path}, {"containerPath", m.container_path}, {"type", "bind"},
                      {"options", options}});
  }
  CdiSpec out;
  out.region_host_dir = env.region_host_dir;
  out.json = {
      {"cdiVersion", kCdiVersion},
      {"kind", kCdiKind},
      {"devices", nlohmann::json::array({{{"name", claim.uid},
                                          {"containerEdits", {{"env", envs}, {"mounts", mounts}}}}})},
  };
  return out;
}

}  // namespace tessera::dra
