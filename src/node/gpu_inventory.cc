#include "node/gpu_inventory.h"

#include <algorithm>

namespace tessera::node {

GpuInventory::GpuInventory(GpuInventoryOptions options, std::unique_ptr<GpuSource> source, MpsSupervisor* mps,
                           Offer offer, Publish publish, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)),
      source_(std::move(source)),
      mps_(mps),
      offer_(std::move(offer)),
      publish_(std::move(publish)),
      log_(std::move(log)) {}

std::string GpuInventory::Describe() const {
  MutexLock lock(source_mu_);
  return source_->Describe();
}

std::vector<core::GpuInfo> GpuInventory::Current() const {
  MutexLock lock(mu_);
  return gpus_;
}

Result<std::vector<GpuLoad>> GpuInventory::ReadLoad() {
  MutexLock lock(source_mu_);
  auto load = source_->ReadLoad();
  if (!load.ok() && load.status().code() != StatusCode::kUnimplemented) {
    return load.status().WithContext("GPU load from " + source_->Describe() + " unavailable");
  }
  return load;
}

Result<std::vector<core::GpuInfo>> GpuInventory::Read() {
  Result<std::vector<core::GpuInfo>> read = [this] {
    MutexLock lock(source_mu_);
    return source_->Read();
  }();
  if (!read.ok()) return read;
  // The scheduler must not put more containers on a GPU than it has slots.
  for (core::GpuInfo& g : *read) g.max_sharers = options_.slots_per_gpu;
  if (mps_) mps_->Ensure(*read);
  for (core::GpuInfo& g : *read) g.mps = mps_ != nullptr && g.healthy && mps_->Running(g.uuid);
  return read;
}

void GpuInventory::LogMpsChanges(const std::vector<core::GpuInfo>& read) const {
  const std::vector<core::GpuInfo> kept = Current();
  for (const core::GpuInfo& g : read) {
    auto old = std::find_if(kept.begin(), kept.end(), [&](const core::GpuInfo& o) { return o.uuid == g.uuid; });
    if (old == kept.end() || old->mps == g.mps) continue;
    if (g.mps) {
      log_->info("GPU {}: its MPS daemon runs again; MPS pods may be placed on it", g.uuid);
    } else {
      log_->warn("GPU {}: its MPS daemon is not running; MPS pods are neither placed on it nor admitted until it is "
                 "started again", g.uuid);
    }
  }
}

void GpuInventory::Keep(std::vector<core::GpuInfo> gpus) {
  MutexLock lock(mu_);
  gpus_ = std::move(gpus);
}

void GpuInventory::PublishKept() {
  const std::vector<core::GpuInfo> gpus = Current();
  auto patched = publish_(gpus);
  published_ = patched.ok();
  if (!patched.ok()) {
    log_->warn("publishing the inventory on node {} failed (will retry): {}", options_.node,
               patched.status().message());
  } else if (*patched) {
    log_->info("published the inventory of {} GPU(s) on node {}", gpus.size(), options_.node);
  }
}

Status GpuInventory::Start() {
  TESSERA_ASSIGN_OR_RETURN(std::vector<core::GpuInfo> first, Read());  // already says which GPUs run MPS
  TESSERA_RETURN_IF_ERROR(offer_(first));
  Keep(std::move(first));
  PublishKept();
  return Status::Ok();
}

void GpuInventory::Resync() {
  auto read = Read();
  if (!read.ok()) {
    log_->warn("reading GPUs from {} failed, keeping the last inventory: {}", Describe(),
               read.status().message());
    return;
  }
  LogMpsChanges(*read);
  const bool changed = *read != Current();
  if (!changed && published_) return;
  if (changed) log_->info("GPU inventory from {} changed: {} GPU(s)", Describe(), read->size());
  if (Status st = offer_(*read); !st.ok()) {
    log_->warn("GPU inventory rejected: {}", st.message());
    return;
  }
  Keep(std::move(read).value());
  PublishKept();
}

}  // namespace tessera::node
