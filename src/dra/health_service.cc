#include "dra/health_service.h"

#include "dra/resource_slice.h"

namespace tessera::dra {

healthpb::NodeWatchResourcesResponse HealthReport(const std::string& pool, const std::vector<core::GpuInfo>& gpus,
                                                  int64_t now_seconds) {
  healthpb::NodeWatchResourcesResponse response;
  for (const core::GpuInfo& gpu : gpus) {
    healthpb::DeviceHealth* d = response.add_devices();
    d->mutable_device()->set_pool_name(pool);
    d->mutable_device()->set_device_name(DeviceName(gpu.index));
    d->set_health(gpu.healthy ? healthpb::HEALTHY : healthpb::UNHEALTHY);
    d->set_last_updated_time(now_seconds);
    d->set_health_check_timeout_seconds(kHealthTimeoutSeconds);
    if (!gpu.healthy) d->set_message("GPU " + gpu.uuid + " is unhealthy; it left the ResourceSlice");
  }
  return response;
}

DraHealthService::DraHealthService(std::string pool, std::shared_ptr<spdlog::logger> log,
                                   std::chrono::milliseconds heartbeat)
    : pool_(std::move(pool)), log_(std::move(log)), heartbeat_(heartbeat) {}

void DraHealthService::SetGpus(std::vector<core::GpuInfo> gpus) {
  MutexLock lock(mu_);
  if (gpus == gpus_) return;
  gpus_ = std::move(gpus);
  ++generation_;
  changed_.NotifyAll();
}

void DraHealthService::Shutdown() {
  MutexLock lock(mu_);
  stopping_ = true;
  changed_.NotifyAll();
}

grpc::Status DraHealthService::NodeWatchResources(grpc::ServerContext* context,
                                                  const healthpb::NodeWatchResourcesRequest*,
                                                  grpc::ServerWriter<healthpb::NodeWatchResourcesResponse>* writer) {
  return Serve(context, writer);
}

grpc::Status DraHealthService::Serve(grpc::ServerContext* context,
                                     grpc::ServerWriterInterface<healthpb::NodeWatchResourcesResponse>* writer) {
  using Clock = std::chrono::steady_clock;
  uint64_t sent = 0;
  bool first = true;
  Clock::time_point next_beat = Clock::now();
  while (true) {
    healthpb::NodeWatchResourcesResponse response;
    {
      MutexLock lock(mu_);
      const Clock::time_point wake = std::min(next_beat, Clock::now() + kCancelPoll);
      changed_.WaitUntil(mu_, wake, [&] {
        mu_.AssertHeld();
        return stopping_ || first || generation_ != sent;
      });
      if (stopping_) return grpc::Status::OK;
      if (context != nullptr && context->IsCancelled()) return grpc::Status::CANCELLED;
      const bool changed = first || generation_ != sent;
      if (!changed && Clock::now() < next_beat) continue;  // woken by the poll: nothing to send
      if (changed) {
        log_->info("DRA device health: sending {} GPU(s) to the kubelet", gpus_.size());
      }
      first = false;
      sent = generation_;
      const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      response = HealthReport(pool_, gpus_, now);
    }
    next_beat = Clock::now() + heartbeat_;
    if (!writer->Write(response)) return grpc::Status::CANCELLED;
  }
}

}  // namespace tessera::dra
