// ClusterState's DRA part (cluster_state.h, "DRA"): the driver's
// ResourceSlices and the ResourceClaims' bookings in the ledger.
#include "scheduler/cluster_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace tessera::scheduler {
namespace {

std::string ObjectName(const nlohmann::json& object) {
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  const auto name = meta->find("name");
  return name != meta->end() && name->is_string() ? name->get<std::string>() : "";
}

std::string ClaimKeyOf(const nlohmann::json& claim) {
  const std::string name = ObjectName(claim);
  if (name.empty()) return "";
  std::string ns = "default";
  if (const auto meta = claim.find("metadata"); meta != claim.end()) {
    if (const auto n = meta->find("namespace"); n != meta->end() && n->is_string()) ns = n->get<std::string>();
  }
  return ns + "/" + name;
}

}  // namespace

const std::vector<int>* ClusterView::DraDeviceOrder(std::string_view node) const {
  state_->mu_.AssertHeld();
  auto it = state_->dra_order_.find(node);
  return it == state_->dra_order_.end() ? nullptr : &it->second;
}

const DraClaim* ClusterView::Claim(std::string_view key) const {
  state_->mu_.AssertHeld();
  auto it = state_->claims_.find(key);
  return it == state_->claims_.end() ? nullptr : &it->second.claim;
}

void ClusterState::UpsertSlice(const nlohmann::json& slice) {
  Result<DraSlice> decoded = DecodeDraSlice(slice, options_.dra_driver);
  if (!decoded.ok()) {
    if (decoded.status().code() != StatusCode::kNotFound) log_->warn("ResourceSlice ignored: {}", decoded.status().message());
    return;
  }
  if (!decoded->unusable.empty()) {
    std::string names;
    for (const auto& n : decoded->unusable) names += (names.empty() ? "" : ", ") + n;
    log_->warn("ResourceSlice {}: devices without an int attribute \"index\" ignored: {}", decoded->name, names);
  }
  MutexLock lock(mu_);
  std::string old_node;
  if (auto it = slices_.find(decoded->name); it != slices_.end()) {
    if (it->second.node == decoded->node && it->second.pool == decoded->pool &&
        it->second.devices == decoded->devices) {
      return;  // nothing the extender reads changed
    }
    old_node = it->second.node;
  }
  const std::string node = decoded->node;
  slices_[decoded->name] = std::move(*decoded);
  if (!old_node.empty() && old_node != node) RebuildDraNode(old_node);
  RebuildDraNode(node);
  RetryClaims("");  // claims waiting for this pool's devices may name any node
}

void ClusterState::DeleteSlice(const nlohmann::json& slice) {
  const std::string name = ObjectName(slice);
  MutexLock lock(mu_);
  auto it = slices_.find(name);
  if (it == slices_.end()) return;
  const std::string node = it->second.node;
  slices_.erase(it);
  RebuildDraNode(node);
}

void ClusterState::RebuildDraNode(const std::string& node) {
  std::vector<const DraSlice*> on_node;
  for (const auto& [name, s] : slices_) {
    if (s.node == node) on_node.push_back(&s);
  }
  // The allocator's order: pools by name, then slices by name (slices_ is by name).
  std::stable_sort(on_node.begin(), on_node.end(),
                   [](const DraSlice* a, const DraSlice* b) { return a->pool < b->pool; });
  std::vector<int> order;
  std::set<std::string> pools;
  for (const DraSlice* s : on_node) {
    pools.insert(s->pool);
    for (const auto& d : s->devices) {
      if (std::find(order.begin(), order.end(), d.index) == order.end()) order.push_back(d.index);
    }
  }
  // A pool whose slices are gone keeps its last device map: claims
  // allocated from it still hold those GPUs (kubelets delete their node's
  // slices as they start, and the node agent publishes them again).
  for (const std::string& pool : pools) {
    DraPool& entry = pools_[pool];
    entry.node = node;
    entry.index.clear();
    for (const DraSlice* s : on_node) {
      if (s->pool != pool) continue;
      for (const auto& d : s->devices) entry.index.emplace(d.name, d.index);
    }
  }
  if (order.empty()) dra_order_.erase(node);
  else dra_order_[node] = std::move(order);
}

void ClusterState::UpsertClaim(const nlohmann::json& claim) {
  Result<DraClaim> decoded = DecodeDraClaim(claim, options_.dra_driver, options_.dra_classes);
  if (!decoded.ok()) {
    log_->warn("ResourceClaim ignored: {}", decoded.status().message());
    return;
  }
  MutexLock lock(mu_);
  auto [it, added] = claims_.try_emplace(decoded->key);
  ClaimRecord& rec = it->second;
  const bool same_allocation = !added && rec.claim.uid == decoded->uid && rec.claim.allocated == decoded->allocated &&
                               rec.claim.shares == decoded->shares;
  if (same_allocation) {
    rec.claim = std::move(*decoded);
    return;
  }
  UnbookClaim(it->first, rec, /*retry=*/true);
  rec.claim = std::move(*decoded);
  BookClaim(it->first, rec);
}

void ClusterState::DeleteClaim(const nlohmann::json& claim) {
  const std::string key = ClaimKeyOf(claim);
  MutexLock lock(mu_);
  auto it = claims_.find(key);
  if (it == claims_.end()) return;
  ClaimRecord rec = std::move(it->second);
  claims_.erase(it);
  UnbookClaim(key, rec, /*retry=*/true);
}

void ClusterState::UnbookClaim(const std::string& key, ClaimRecord& rec, bool retry) {
  claims_waiting_.erase(key);
  rec.problem.clear();
  if (rec.node.empty()) return;
  const std::string node = std::move(rec.node);
  rec.node.clear();
  if (Status st = ledger_.Forget(ClaimLedgerKey(key)); !st.ok()) {
    log_->error("claim {}: {}", key, st.message());
    return;
  }
  freed_.fetch_add(1, std::memory_order_relaxed);
  log_->debug("claim {}: its shares on node {} released", key, node);
  if (retry) ApplyParked(node);
}

void ClusterState::BookClaim(const std::string& key, ClaimRecord& rec) {
  if (!rec.node.empty() || !rec.claim.allocated || rec.claim.shares.empty()) return;
  std::string why;  // set when it cannot be booked now
  std::string node;
  core::PodRequest req;
  req.key = ClaimLedgerKey(key);
  core::Assignment assignment;
  for (const DraDeviceShare& share : rec.claim.shares) {
    auto pool = pools_.find(share.pool);
    if (pool == pools_.end()) {
      why = "no ResourceSlice of pool " + share.pool + " seen yet";
      break;
    }
    auto index = pool->second.index.find(share.device);
    if (index == pool->second.index.end()) {
      why = "pool " + share.pool + " publishes no device " + share.device;
      break;
    }
    if (!node.empty() && node != pool->second.node) {
      why = "its devices are on two nodes (" + node + ", " + pool->second.node + ")";
      break;
    }
    node = pool->second.node;
    const core::NodeState* state = ledger_.FindNode(node);
    if (state == nullptr) {
      why = "node " + node + " is not a GPU node known to tessera-scheduler";
      break;
    }
    if (index->second >= static_cast<int>(state->info.gpus.size())) {
      why = "device " + share.device + " is GPU " + std::to_string(index->second) + ", which node " + node +
            " does not list";
      break;
    }
    const core::GpuInfo& gpu = state->info.gpus[static_cast<size_t>(index->second)];
    const int64_t mem = share.mem_mib == kWholeCardMemory ? gpu.memory_mib : share.mem_mib;
    req.containers.push_back({share.device, 1, mem, share.core_milli, {}});
    assignment.containers.push_back({share.device, {{gpu.index, gpu.uuid, mem, share.core_milli}}});
  }
  assignment.node = node;
  if (why.empty()) {
    if (Status st = ledger_.Assume(req, assignment, /*takes_slots=*/false); !st.ok()) {
      why = "its shares do not fit the ledger: " + st.message();
    }
  }
  if (!why.empty()) {
    if (rec.problem != why) log_->info("claim {} holds nothing yet: {}", key, why);
    rec.problem = std::move(why);
    claims_waiting_.insert(key);
    return;
  }
  (void)ledger_.Confirm(req.key);
  if (!rec.counted) {  // a new holder, for the policies that learn the workload
    rec.counted = true;
    PushNewHold(req);
  }
  rec.request = std::move(req);
  rec.node = node;
  rec.problem.clear();
  claims_waiting_.erase(key);
  log_->debug("claim {}: {} device share(s) booked on node {}", key, rec.claim.shares.size(), node);
}

void ClusterState::RetryClaims(const std::string& node) {
  if (claims_waiting_.empty()) return;
  const std::set<std::string, std::less<>> keys = claims_waiting_;
  for (const std::string& key : keys) {
    ClaimRecord& rec = claims_.at(key);
    if (!node.empty()) {
      // Only claims whose devices are on `node` (or whose pool is not known yet).
      auto pool = pools_.find(rec.claim.shares.front().pool);
      if (pool != pools_.end() && pool->second.node != node) continue;
    }
    BookClaim(key, rec);
  }
}

}  // namespace tessera::scheduler
