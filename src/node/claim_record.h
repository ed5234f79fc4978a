// The record a prepared DRA claim leaves on the node:
// <region root>/dra/<claim uid>/holder.json, beside (not in) the claim's
// region folder <region root>/dra/<claim uid>/claim that its containers
// mount. The DRA driver (src/dra) writes it at NodePrepareResources and
// removes the folder at NodeUnprepareResources; a restarted driver books
// the claims again from it, and the usage pass reads it to put the claims'
// shares into /metrics and the pods' usage annotation. It lives here, not
// in src/dra, because both sides read it and src/dra depends on src/node.
// Pure except ReadClaimRecords, which reads the folder; thread-safe.
//
//   ClaimRecord r{holder, {{"ns", "pod-a", "uid-a"}}};
//   WriteFile(ClaimRecordPath(root, r.holder.uid), EncodeClaimRecord(r).dump());
//   for (const ClaimRecord& c : ReadClaimRecords(root).records) ...
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "node/gpu_book.h"
#include "node/identify.h"

namespace tessera::node {

// The container name a claim's region folder and environment use.
inline constexpr const char* kClaimRegionContainer = "claim";

// <region_root>/dra: where claims' folders live (the pod-region clean-up leaves it alone).
std::string ClaimsRoot(const std::string& region_root);
// <region_root>/dra/<uid>/holder.json.
std::string ClaimRecordPath(const std::string& region_root, const std::string& uid);
// <region_root>/dra/<uid>/claim: the region folder the claim's containers share.
std::string ClaimRegionDir(const std::string& region_root, const std::string& uid);

struct ClaimRecord {
  GpuHolder holder;         // kind kClaim: uid, "ns/name", the shares by GPU
  std::vector<PodRef> pods;  // the pods the claim was reserved for at prepare (status.reservedFor)
  std::string Namespace() const;  // of holder.key
  std::string Name() const;       // of holder.key
  bool operator==(const ClaimRecord&) const = default;
};

// {"claim": "ns/name", "uid": ..., "shares": [{index, uuid, memMiB,
// coreMilli}], "pods": [{name, uid}]} (the pods share the claim's namespace).
nlohmann::json EncodeClaimRecord(const ClaimRecord& record);
// INVALID_ARGUMENT naming the field when one is missing or of the wrong
// type, or the uid is empty. "pods" may be absent (records written before it
// was added): no pods.
Result<ClaimRecord> DecodeClaimRecord(const nlohmann::json& record);

struct ClaimRecords {
  std::vector<ClaimRecord> records;  // by claim namespace/name
  // One line per record that exists but cannot be read: "<path>: <why>".
  std::vector<std::string> unreadable;
};
// Every record under ClaimsRoot(region_root); a folder without a record is
// skipped (a prepare under way, or one that failed). No folder: none.
// INTERNAL when the folder exists but cannot be listed.
Result<ClaimRecords> ReadClaimRecords(const std::string& region_root);

}  // namespace tessera::node
