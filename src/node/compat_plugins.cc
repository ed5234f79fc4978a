#include "node/compat_plugins.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <set>

#include "node/device_plugin.h"
#include "node/plugin_server.h"

namespace tessera::node {
namespace {

constexpr int64_t kMiBPerGiB = 1024;

}  // namespace

Status ValidateCompatOptions(const CompatOptions& o, const std::string& own_resource) {
  std::vector<std::pair<std::string, std::string>> names;  // flag, value
  if (o.resources.gpushare.enabled) names.push_back({"--gpushare-resource", o.resources.gpushare.mem});
  if (o.resources.hami.enabled) names.push_back({"--hami-gpu-resource", o.resources.hami.gpu});
  for (size_t i = 0; i < names.size(); ++i) {
    if (!IsExtendedResourceName(names[i].second)) {
      return InvalidArgument(names[i].first + " must look like domain/name, got \"" + names[i].second + "\"");
    }
    if (names[i].second == own_resource) {
      return InvalidArgument(names[i].first + " \"" + names[i].second + "\" is --resource-name already; pick another");
    }
    for (size_t j = 0; j < i; ++j) {
      if (names[j].second == names[i].second) {
        return InvalidArgument(names[i].first + " and " + names[j].first + " name the same resource");
      }
    }
  }
  for (const std::string* socket : {&o.gpushare_socket, &o.hami_socket}) {
    if (socket->empty() || socket->find('/') != std::string::npos) {
      return InvalidArgument("compat socket names must be file names, got \"" + *socket + "\"");
    }
  }
  if (o.gpushare_socket == o.hami_socket) return InvalidArgument("the gpushare and HAMi sockets must differ");
  return Status::Ok();
}

Result<std::vector<Slot>> GibUnits(const std::vector<core::GpuInfo>& gpus) {
  std::vector<Slot> out;
  for (const auto& g : gpus) {
    if (g.uuid.empty()) return InvalidArgument("GPU " + std::to_string(g.index) + " has no uuid");
    const int64_t units = g.memory_mib / kMiBPerGiB;
    for (int64_t k = 0; k < units; ++k) {
      Slot s;
      s.id = SlotId(g.uuid, static_cast<int>(k));
      if (s.id.size() > kMaxDeviceIdLength) {
        return InvalidArgument("device ID " + s.id + " is longer than " + std::to_string(kMaxDeviceIdLength));
      }
      s.uuid = g.uuid;
      s.k = static_cast<int>(k);
      s.numa_node = g.numa_node;
      s.healthy = g.healthy;
      out.push_back(std::move(s));
    }
  }
  return out;
}

Result<std::vector<std::string>> GpuSlotsOfUnits(const std::vector<std::string>& unit_ids) {
  std::vector<std::string> uuids;
  for (const auto& id : unit_ids) {
    TESSERA_ASSIGN_OR_RETURN(std::string uuid, SlotGpu(id));
    if (std::find(uuids.begin(), uuids.end(), uuid) == uuids.end()) uuids.push_back(uuid);
  }
  std::vector<std::string> out;
  for (const auto& u : uuids) out.push_back(SlotId(u, 0));
  return out;
}

std::vector<std::string> UnitsOn(const std::string& uuid, const std::vector<std::string>& available,
                                 const std::vector<std::string>& must_include, size_t size) {
  std::vector<std::string> out;
  auto on_gpu = [&](const std::string& id) {
    auto gpu = SlotGpu(id);
    return gpu.ok() && *gpu == uuid;
  };
  for (const auto& list : {must_include, available}) {
    for (const auto& id : list) {
      if (out.size() == size) break;
      if (on_gpu(id) && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
  }
  if (out.size() < size) out.clear();
  return out;
}

// --- GpushareService ---

GpushareService::GpushareService(Allocator& allocator, std::string resource, std::shared_ptr<spdlog::logger> log)
    : allocator_(allocator), resource_(std::move(resource)), log_(std::move(log)), units_(resource_, "GiB unit", log_) {}

Status GpushareService::SetGpus(std::vector<core::GpuInfo> gpus) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Slot> units, GibUnits(gpus));
  MutexLock lock(mu_);  // the GPUs and their units change together
  gpus_ = std::move(gpus);
  units_.Publish(std::move(units));
  return Status::Ok();
}

grpc::Status GpushareService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                     v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status GpushareService::ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                                           grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  return units_.Serve(context, writer);
}

grpc::Status GpushareService::GetPreferredAllocation(grpc::ServerContext*,
                                                     const v1beta1::PreferredAllocationRequest* request,
                                                     v1beta1::PreferredAllocationResponse* response) {
  for (const auto& req : request->container_requests()) {
    const std::vector<std::string> available(req.available_deviceids().begin(), req.available_deviceids().end());
    const std::vector<std::string> must(req.must_include_deviceids().begin(), req.must_include_deviceids().end());
    const size_t size = static_cast<size_t>(std::max(0, req.allocation_size()));
    // One stand-in slot per GPU with enough free units: the Allocator steers
    // to the GPU of the next pending one-GPU container among them.
    std::vector<std::string> gpu_slots;
    std::set<std::string> seen;
    for (const auto& id : available) {
      auto gpu = SlotGpu(id);
      if (!gpu.ok() || !seen.insert(*gpu).second) continue;
      if (!UnitsOn(*gpu, available, must, size).empty()) gpu_slots.push_back(SlotId(*gpu, 0));
    }
    auto chosen = allocator_.Prefer(resource_, gpu_slots, {}, 1);
    if (!chosen.ok()) {
      log_->warn("GetPreferredAllocation of {} failed: {}", resource_, chosen.status().ToString());
      return ToGrpc(chosen.status());
    }
    auto* out = response->add_container_responses();
    if (chosen->size() != 1) continue;  // no preference: the kubelet chooses
    auto gpu = SlotGpu(chosen->front());
    if (!gpu.ok()) continue;
    for (const auto& id : UnitsOn(*gpu, available, must, size)) out->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status GpushareService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                                       v1beta1::AllocateResponse* response) {
  std::vector<core::GpuInfo> gpus;
  {
    MutexLock lock(mu_);
    gpus = gpus_;
  }
  for (const auto& req : request->container_requests()) {
    const std::vector<std::string> units(req.devices_ids().begin(), req.devices_ids().end());
    auto slots = GpuSlotsOfUnits(units);
    if (!slots.ok()) return ToGrpc(slots.status());
    auto env = allocator_.Allocate(resource_, *slots, gpus);
    if (!env.ok()) {
      log_->error("Allocate of {} GiB of {} refused, the container gets no GPU: {}", units.size(), resource_,
                  env.status().message());
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
  return grpc::Status::OK;
}

grpc::Status GpushareService::PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                                v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

// --- the front ends' resources on the host ---

Status AddCompatPlugins(const CompatOptions& options, PluginHost& host, std::shared_ptr<spdlog::logger> log) {
  const core::ResourceNames& names = options.resources;
  if (names.gpushare.enabled) {
    TESSERA_RETURN_IF_ERROR(host.Add(names.gpushare.mem, options.gpushare_socket,
                                     std::make_unique<GpushareService>(host.allocator(), names.gpushare.mem, log)));
  }
  if (names.hami.enabled) {
    TESSERA_RETURN_IF_ERROR(host.Add(names.hami.gpu, options.hami_socket,
                                     std::make_unique<DevicePluginService>(host.allocator(), names.hami.gpu,
                                                                           options.slots_per_gpu, log)));
  }
  return Status::Ok();
}

}  // namespace tessera::node
