// HealthWatch: a background thread that waits on NVML events and remembers
// which GPUs a critical XID (see xid.h) or a double-bit ECC error has lost.
// A lost GPU stays lost until the process restarts (it needs a reset anyway).
// Thread-safety: LostUuids() may be called from any thread.
//
//   auto watch = HealthWatch::Start(lib, devices, std::chrono::milliseconds(500), log);
//   if (watch->LostUuids().count(uuid)) gpu.healthy = false;
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"
#include "nvml/library.h"
#include "nvml/log.h"

namespace tessera::nvml {

class HealthWatch {
 public:
  struct Device {
    nvmlDevice_t handle;
    int index;
    std::string uuid;
  };

  // Registers each device for critical-XID and double-bit-ECC events and
  // starts the thread. Never fails: a driver or GPU without events is logged
  // and then watched only by the queries GpuReader makes. `lib` must outlive
  // the result; `wait` bounds how long the destructor takes.
  static std::unique_ptr<HealthWatch> Start(const Library& lib, std::vector<Device> devices,
                                            std::chrono::milliseconds wait, LogFn log);
  HealthWatch(const HealthWatch&) = delete;
  HealthWatch& operator=(const HealthWatch&) = delete;
  // Stops the thread and joins it (within about `wait`), then frees the set.
  ~HealthWatch();

  // UUIDs of the GPUs an event has marked lost.
  std::set<std::string> LostUuids() const;

 private:
  HealthWatch(const Library& lib, std::vector<Device> devices, std::chrono::milliseconds wait, LogFn log,
              std::optional<EventSet> set);
  void Loop();
  void Handle(const nvmlEventData_t& event);

  const Library& lib_;
  const std::vector<Device> devices_;
  const std::chrono::milliseconds wait_;
  const LogFn log_;
  std::optional<EventSet> set_;  // nullopt: nothing registered, no thread
  std::atomic<bool> stop_{false};
  mutable Mutex mu_;
  std::set<std::string> lost_ TESSERA_GUARDED_BY(mu_);
  std::thread thread_;          // last: started once everything above exists
};

}  // namespace tessera::nvml
