#include "node/device_list_stream.h"

namespace tessera::node {

v1beta1::ListAndWatchResponse DeviceList(const std::vector<Slot>& devices) {
  v1beta1::ListAndWatchResponse response;
  for (const Slot& slot : devices) {
    v1beta1::Device* device = response.add_devices();
    device->set_id(slot.id);
    device->set_health(slot.healthy ? kHealthy : kUnhealthy);
    if (slot.numa_node >= 0) device->mutable_topology()->add_nodes()->set_id(slot.numa_node);
  }
  return response;
}

DeviceListStream::DeviceListStream(std::string resource, std::string unit, std::shared_ptr<spdlog::logger> log)
    : resource_(std::move(resource)), unit_(std::move(unit)), log_(std::move(log)) {}

bool DeviceListStream::Publish(std::vector<Slot> devices) {
  MutexLock lock(mu_);
  if (devices == devices_) return false;
  devices_ = std::move(devices);
  ++generation_;
  changed_.NotifyAll();
  return true;
}

std::vector<Slot> DeviceListStream::Devices() const {
  MutexLock lock(mu_);
  return devices_;
}

void DeviceListStream::EndStreams() {
  MutexLock lock(mu_);
  ++stream_epoch_;
  changed_.NotifyAll();
}

void DeviceListStream::Shutdown() {
  MutexLock lock(mu_);
  stopping_ = true;
  changed_.NotifyAll();
}

grpc::Status DeviceListStream::Serve(grpc::ServerContext* context,
                                     grpc::ServerWriterInterface<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t epoch = 0;
  {
    MutexLock lock(mu_);
    epoch = stream_epoch_;
  }
  uint64_t sent = 0;
  bool first = true;
  while (true) {
    v1beta1::ListAndWatchResponse response;
    int unhealthy = 0;
    {
      MutexLock lock(mu_);
      changed_.WaitFor(mu_, kCancelPoll, [&] {
        mu_.AssertHeld();
        return stopping_ || first || generation_ != sent || stream_epoch_ != epoch;
      });
      if (stopping_ || stream_epoch_ != epoch) return grpc::Status::OK;
      if (context != nullptr && context->IsCancelled()) return grpc::Status::CANCELLED;
      if (!first && generation_ == sent) continue;  // woken by the poll: nothing new
      first = false;
      sent = generation_;
      response = DeviceList(devices_);
      for (const Slot& slot : devices_) unhealthy += slot.healthy ? 0 : 1;
    }
    log_->info("ListAndWatch of {}: sending {} {}(s), {} unhealthy", resource_, response.devices_size(), unit_,
               unhealthy);
    if (!writer->Write(response)) return grpc::Status::CANCELLED;
  }
}

}  // namespace tessera::node
