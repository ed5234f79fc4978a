// The CDI spec (Container Device Interface) through which a prepared claim
// reaches its containers: one CDI device per claim, named by the claim's
// uid, whose containerEdits are what the device-plugin path's Allocate gives
// a container (node::BuildContainerEnv: NVIDIA_VISIBLE_DEVICES, the
// TESSERA_* limits per GPU, the interception library, /etc/ld.so.preload and
// the region folder). Every container that uses the claim shares that one
// region, so the claim's memory is one limit across them, as a claim is one
// share. Claims' regions live under <region root>/dra/<claim uid>/claim,
// apart from pods' (<region root>/<pod uid>/...), which the region clean-up
// removes by pod. Pure; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(dra::CdiSpec spec, dra::CdiSpecFor(claim, shares, gpus, paths));
//   // write spec.json into the CDI folder as CdiSpecFileName(claim.uid); answer CdiDeviceId(claim.uid)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "dra/claim.h"
#include "node/claim_record.h"
#include "node/container_env.h"
#include "node/identify.h"

namespace tessera::dra {

// vendor/class of Tessera's CDI devices.
inline constexpr const char* kCdiKind = "tessera.io/gpu";
// 0.5.0 lets a device name start with a digit (claim uids do) and 0.4.0
// added the mount `type`; 0.6.0 is read by containerd 1.7 and 2.x.
inline constexpr const char* kCdiVersion = "0.6.0";
// The container name the environment and the region folder use for a claim.
inline constexpr const char* kClaimContainer = node::kClaimRegionContainer;

// "tessera.io/gpu=<claim uid>": the fully qualified CDI device name.
std::string CdiDeviceId(std::string_view claim_uid);
// "tessera.io-gpu-<claim uid>.json": the spec's file in the CDI folder.
std::string CdiSpecFileName(std::string_view claim_uid);
// <paths.region_root_host>/dra: where claims' region folders live.
std::string ClaimRegionRoot(const node::MountPaths& paths);

struct CdiSpec {
  nlohmann::json json;          // the spec file's content
  std::string region_host_dir;  // the claim's region folder (the caller creates it)
};

// The spec for `claim` holding `shares` (SharesFromClaim) on `gpus`.
// TESSERA_POD is the claim's ns/name and TESSERA_CONTAINER "claim";
// TESSERA_GPU_CORE_POLICY=hard when `compute` (the annotations of the pod
// the claim is reserved for, ClaimCompute) asks for it. No front-end
// variables and no MPS (MPS is not offered under DRA).
// INVALID_ARGUMENT when the uid is empty or not a CDI device name
// (alphanumerics, '-', '_', '.', ':'), there are no shares, or
// BuildContainerEnv refuses (a GPU not in `gpus`).
Result<CdiSpec> CdiSpecFor(const ClaimRef& claim, const std::vector<ClaimShare>& shares,
                           const std::vector<core::GpuInfo>& gpus, const node::MountPaths& paths,
                           const node::ComputeAnnotations& compute = {});

}  // namespace tessera::dra
