#include "node/claim_record.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace tessera::node {

namespace fs = std::filesystem;

std::string ClaimsRoot(const std::string& region_root) { return region_root + "/dra"; }

std::string ClaimRecordPath(const std::string& region_root, const std::string& uid) {
  return ClaimsRoot(region_root) + "/" + uid + "/holder.json";
}

std::string ClaimRegionDir(const std::string& region_root, const std::string& uid) {
  return ClaimsRoot(region_root) + "/" + uid + "/" + kClaimRegionContainer;
}

std::string ClaimRecord::Namespace() const { return holder.key.substr(0, holder.key.find('/')); }

std::string ClaimRecord::Name() const {
  const size_t slash = holder.key.find('/');
  return slash == std::string::npos ? holder.key : holder.key.substr(slash + 1);
}

nlohmann::json EncodeClaimRecord(const ClaimRecord& record) {
  nlohmann::json shares = nlohmann::json::array();
  for (const core::GpuShare& s : record.holder.shares) {
    shares.push_back({{"index", s.index}, {"uuid", s.uuid}, {"memMiB", s.mem_mib}, {"coreMilli", s.core_milli}});
  }
  nlohmann::json pods = nlohmann::json::array();
  for (const PodRef& p : record.pods) pods.push_back({{"name", p.name}, {"uid", p.uid}});
  return {{"claim", record.holder.key}, {"uid", record.holder.uid}, {"shares", shares}, {"pods", pods}};
}

Result<ClaimRecord> DecodeClaimRecord(const nlohmann::json& record) {
  try {
    ClaimRecord out;
    out.holder = GpuHolder{GpuHolder::Kind::kClaim, record.at("uid").get<std::string>(),
                           record.at("claim").get<std::string>(), {}};
    for (const nlohmann::json& s : record.at("shares")) {
      out.holder.shares.push_back({s.at("index").get<int>(), s.at("uuid").get<std::string>(),
                                   s.at("memMiB").get<int64_t>(), s.at("coreMilli").get<int64_t>()});
    }
    if (out.holder.uid.empty()) return InvalidArgument("no uid");
    if (const auto pods = record.find("pods"); pods != record.end()) {
      for (const nlohmann::json& p : *pods) {
        out.pods.push_back({out.Namespace(), p.at("name").get<std::string>(), p.at("uid").get<std::string>()});
      }
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(e.what());
  }
}

Result<ClaimRecords> ReadClaimRecords(const std::string& region_root) {
  ClaimRecords out;
  const std::string root = ClaimsRoot(region_root);
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  fs::directory_iterator it(root, ec);
  if (ec) return Internal("listing prepared claims in " + root + ": " + ec.message());
  for (const fs::directory_entry& entry : it) {
    const std::string path = ClaimRecordPath(region_root, entry.path().filename().string());
    std::ifstream in(path);
    if (!in) continue;
    const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    auto record = DecodeClaimRecord(json);
    if (!record.ok()) {
      out.unreadable.push_back(path + ": " + std::string(record.status().message()));
      continue;
    }
    out.records.push_back(std::move(record).value());
  }
  std::sort(out.records.begin(), out.records.end(),
            [](const ClaimRecord& a, const ClaimRecord& b) { return a.holder.key < b.holder.key; });
  return out;
}

}  // namespace tessera::node
