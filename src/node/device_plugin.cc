#include "node/device_plugin.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace tessera::node {

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

DevicePluginService::DevicePluginService(Allocator& allocator, std::string resource, int slots_per_gpu,
                                         std::shared_ptr<spdlog::logger> log)
    : allocator_(allocator),
      resource_(std::move(resource)),
      slots_per_gpu_(slots_per_gpu),
      log_(std::move(log)),
      devices_(resource_, "slot", log_) {}

Status DevicePluginService::SetGpus(std::vector<core::GpuInfo> gpus) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Slot> slots, SlotsFor(gpus, slots_per_gpu_));
  MutexLock lock(mu_);  // the GPUs and their slots change together
  gpus_ = std::move(gpus);
  devices_.Publish(std::move(slots));
  return Status::Ok();
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                                               grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  return devices_.Serve(context, writer);
}

grpc::Status DevicePluginService::GetPreferredAllocation(grpc::ServerContext*,
                                                         const v1beta1::PreferredAllocationRequest* request,
                                                         v1beta1::PreferredAllocationResponse* response) {
  for (const auto& req : request->container_requests()) {
    std::vector<std::string> available(req.available_deviceids().begin(), req.available_deviceids().end());
    std::vector<std::string> must(req.must_include_deviceids().begin(), req.must_include_deviceids().end());
    auto chosen =
        allocator_.Prefer(resource_, available, must, static_cast<size_t>(std::max(0, req.allocation_size())));
    if (!chosen.ok()) {
      log_->warn("GetPreferredAllocation of {} failed: {}", resource_, chosen.status().ToString());
      return ToGrpc(chosen.status());
    }
    auto* out = response->add_container_responses();
    for (const auto& id : *chosen) out->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                                           v1beta1::AllocateResponse* response) {
  std::vector<core::GpuInfo> gpus;
  {
    MutexLock lock(mu_);
    gpus = gpus_;
  }
  for (const auto& req : request->container_requests()) {
    std::vector<std::string> ids(req.devices_ids().begin(), req.devices_ids().end());
    auto env = allocator_.Allocate(resource_, ids, gpus);
    if (!env.ok()) {
      log_->error("Allocate of {} refused, the container gets no GPU: {}", resource_, env.status().message());
      return ToGrpc(env.status());
    }
    auto* out = response->add_container_responses();
    for (const auto& [key, value] : env->envs) (*out->mutable_envs())[key] = value;
    for (const auto& m : env->mounts) {
      auto* mount = out->add_mounts();
      mount->set_container_path(m.container_path);
      mount->set_host_path(m.host_path);
      mount->set_read_only(m.read_only);
    }
  }
  if (reply_delay_.count() > 0) {
    log_->warn("testing: holding the Allocate answer for {} ms", reply_delay_.count());
    std::this_thread::sleep_for(reply_delay_);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                                    v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

}  // namespace tessera::node
