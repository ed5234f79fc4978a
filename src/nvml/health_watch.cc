#include "nvml/health_watch.h"

#include <cstdio>
#include <utility>

#include "nvml/xid.h"

namespace tessera::nvml {
namespace {

constexpr unsigned long long kWanted = nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError;

void Log(const LogFn& log, LogLevel level, const std::string& message) {
  if (log) log(level, message);
}

std::string Hex(unsigned long long v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", v);
  return buf;
}

std::string Name(const HealthWatch::Device& d) { return "GPU " + std::to_string(d.index) + " (" + d.uuid + ")"; }

}  // namespace

std::unique_ptr<HealthWatch> HealthWatch::Start(const Library& lib, std::vector<Device> devices,
                                                std::chrono::milliseconds wait, LogFn log) {
  std::optional<EventSet> set;
  auto created = lib.CreateEventSet();
  if (!created.ok()) {
    Log(log, LogLevel::kWarn, "no XID health events, health from queries only: " + created.status().message());
  } else {
    bool any = false;
    for (const Device& d : devices) {
      auto supported = lib.SupportedEventTypes(d.handle);
      const unsigned long long types = supported.ok() ? (*supported & kWanted) : 0;
      if (types == 0) {
        Log(log, LogLevel::kWarn,
            Name(d) + ": no critical-XID events, health from queries only" +
                (supported.ok() ? std::string() : ": " + supported.status().message()));
        continue;
      }
      if (Status st = lib.RegisterEvents(d.handle, types, *created); !st.ok()) {
        Log(log, LogLevel::kWarn, Name(d) + ": health from queries only: " + st.message());
        continue;
      }
      any = true;
    }
    if (any) set.emplace(std::move(created).value());
  }
  return std::unique_ptr<HealthWatch>(new HealthWatch(lib, std::move(devices), wait, std::move(log), std::move(set)));
}

HealthWatch::HealthWatch(const Library& lib, std::vector<Device> devices, std::chrono::milliseconds wait,
                         LogFn log, std::optional<EventSet> set)
    : lib_(lib), devices_(std::move(devices)), wait_(wait), log_(std::move(log)), set_(std::move(set)) {
  if (set_) thread_ = std::thread([this] { Loop(); });
}

HealthWatch::~HealthWatch() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::set<std::string> HealthWatch::LostUuids() const {
  MutexLock lock(mu_);
  return lost_;
}

void HealthWatch::Loop() {
  const auto timeout = static_cast<unsigned>(wait_.count());
  bool failing = false;  // log a run of failed waits once
  while (!stop_.load()) {
    auto event = lib_.WaitEvent(*set_, timeout);
    if (!event.ok()) {
      if (!failing) Log(log_, LogLevel::kWarn, "waiting for NVML events failed: " + event.status().message());
      failing = true;
      std::this_thread::sleep_for(wait_);  // no busy loop on a broken event set
      continue;
    }
    failing = false;
    if (event->has_value()) Handle(**event);
  }
}

void HealthWatch::Handle(const nvmlEventData_t& event) {
  const Device* device = nullptr;
  for (const Device& d : devices_) {
    if (d.handle == event.device) device = &d;
  }
  const std::optional<std::string> reason = LostReason(event.eventType, event.eventData);
  const std::string what = "NVML event type " + Hex(event.eventType) + " data " + std::to_string(event.eventData);
  if (device == nullptr) {
    Log(log_, LogLevel::kWarn, what + " for a device this agent does not know; ignored");
    return;
  }
  if (!reason) {
    Log(log_, LogLevel::kInfo,
        Name(*device) + ": " + what + " (" + std::string(XidReason(event.eventData)) +
            ") leaves the GPU healthy");
    return;
  }
  bool inserted = false;
  {
    MutexLock lock(mu_);
    inserted = lost_.insert(device->uuid).second;
  }
  if (inserted) Log(log_, LogLevel::kError, Name(*device) + " marked unhealthy: " + *reason);
}

}  // namespace tessera::nvml
