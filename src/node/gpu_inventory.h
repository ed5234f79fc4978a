// The node's GPU inventory as tessera-node keeps it: read from its GpuSource
// every resync, each GPU's sharer limit set to the slot count and its `mps`
// flag to whether its MPS daemon runs (the MpsSupervisor, when the node runs
// MPS, is asked to start what is missing first), offered to the plugin host
// (every served resource's device list) and published on the Node when it
// changed, or until a publication succeeds. A read that fails keeps the
// last inventory; one the host refuses is neither kept nor published.
//
// Thread-safety: Start and Resync from one thread (the agent's loop);
// Current and ReadLoad from any thread (the source is called by one at a
// time).
//
//   GpuInventory inventory(options, std::move(source), mps.get(), offer, publish, log);
//   TESSERA_RETURN_IF_ERROR(inventory.Start());
//   while (!stop) { inventory.Resync(); sleep(resync); }
#pragma once

#include <spdlog/logger.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "node/inventory.h"
#include "node/mps.h"

namespace tessera::node {

struct GpuInventoryOptions {
  std::string node;       // this Node's name, for the log
  int slots_per_gpu = 8;  // each GPU's max_sharers
};

class GpuInventory {
 public:
  // Hands the GPUs to what serves them (PluginHost::SetGpus); an error
  // refuses the inventory.
  using Offer = std::function<Status(const std::vector<core::GpuInfo>& gpus)>;
  // Publishes the GPUs on the Node (PublishInventory): true when a patch
  // was sent, false when the Node already said so.
  using Publish = std::function<Result<bool>(const std::vector<core::GpuInfo>& gpus)>;

  // `mps` may be null (no MPS on this node) and must outlive the inventory.
  GpuInventory(GpuInventoryOptions options, std::unique_ptr<GpuSource> source, MpsSupervisor* mps, Offer offer,
               Publish publish, std::shared_ptr<spdlog::logger> log);

  // The first inventory: read, offered, kept, then published (a failed
  // publication is retried by Resync). Fails, keeping nothing, when the
  // source cannot be read or the offer is refused.
  Status Start();

  // Reads the GPUs again; when they changed (or were never published),
  // offers, keeps and publishes them. Failures are logged and retried at
  // the next Resync.
  void Resync();

  // The GPUs last kept; empty before Start.
  std::vector<core::GpuInfo> Current() const TESSERA_EXCLUDES(mu_);

  // The source's load measurement (GpuSource::ReadLoad), its errors naming
  // the source.
  Result<std::vector<GpuLoad>> ReadLoad() TESSERA_EXCLUDES(source_mu_);

  // The source, for logs: "file gpus.yaml", "NVML".
  std::string Describe() const TESSERA_EXCLUDES(source_mu_);

 private:
  // Reads the source: max_sharers and mps flags set.
  Result<std::vector<core::GpuInfo>> Read() TESSERA_EXCLUDES(source_mu_);
  // Logs each GPU whose mps flag differs from the kept inventory's.
  void LogMpsChanges(const std::vector<core::GpuInfo>& read) const TESSERA_EXCLUDES(mu_);
  void Keep(std::vector<core::GpuInfo> gpus) TESSERA_EXCLUDES(mu_);
  void PublishKept();

  const GpuInventoryOptions options_;
  // GpuSource is one-caller-at-a-time: Read (agent loop), ReadLoad (usage loop), Describe (logs).
  mutable Mutex source_mu_;
  const std::unique_ptr<GpuSource> source_ TESSERA_PT_GUARDED_BY(source_mu_);
  MpsSupervisor* const mps_;
  const Offer offer_;
  const Publish publish_;
  std::shared_ptr<spdlog::logger> log_;
  mutable Mutex mu_;
  std::vector<core::GpuInfo> gpus_ TESSERA_GUARDED_BY(mu_);  // written by the Start/Resync thread only
  bool published_ = false;                                   // Start/Resync thread only
};

}  // namespace tessera::node
