#include "node/compat_plugins.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "node/device_plugin.h"

namespace tessera::node {
namespace {

constexpr int64_t kMiBPerGiB = 1024;

bool ExtendedName(const std::string& name) {
  const auto slash = name.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < name.size() &&
         name.find('/', slash + 1) == std::string::npos;
}

// The inode of `path`, 0 when it does not exist: a new kubelet.sock is a new inode.
uint64_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

Status ValidateCompatOptions(const CompatOptions& o, const std::string& own_resource) {
  std::vector<std::pair<std::string, std::string>> names;  // flag, value
  if (o.resources.gpushare.enabled) names.push_back({"--gpushare-resource", o.resources.gpushare.mem});
  if (o.resources.hami.enabled) names.push_back({"--hami-gpu-resource", o.resources.hami.gpu});
  for (size_t i = 0; i < names.size(); ++i) {
    if (!ExtendedName(names[i].second)) {
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

GpushareService::GpushareService(Allocator& allocator, std::shared_ptr<spdlog::logger> log)
    : allocator_(allocator), log_(std::move(log)) {}

Status GpushareService::SetGpus(std::vector<core::GpuInfo> gpus) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Slot> units, GibUnits(gpus));
  std::lock_guard<std::mutex> lock(mu_);
  gpus_ = std::move(gpus);
  if (units != units_) {
    units_ = std::move(units);
    ++generation_;
    changed_.notify_all();
  }
  return Status::Ok();
}

void GpushareService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  changed_.notify_all();
}

grpc::Status GpushareService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                     v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status GpushareService::ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                                           grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t sent = 0;
  bool first = true;
  while (true) {
    v1beta1::ListAndWatchResponse response;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping_ || first || generation_ != sent; });
      if (stopping_) return grpc::Status::OK;
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      if (!first && generation_ == sent) continue;
      first = false;
      sent = generation_;
      for (const Slot& unit : units_) {
        v1beta1::Device* device = response.add_devices();
        device->set_id(unit.id);
        device->set_health(unit.healthy ? kHealthy : kUnhealthy);
        if (unit.numa_node >= 0) device->mutable_topology()->add_nodes()->set_id(unit.numa_node);
      }
    }
    log_->info("gpushare ListAndWatch: sending {} GiB unit(s)", response.devices_size());
    if (!writer->Write(response)) return grpc::Status::CANCELLED;
  }
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
    auto chosen = allocator_.Prefer(gpu_slots, {}, 1);
    if (!chosen.ok()) {
      log_->warn("gpushare GetPreferredAllocation failed: {}", chosen.status().ToString());
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
    std::lock_guard<std::mutex> lock(mu_);
    gpus = gpus_;
  }
  for (const auto& req : request->container_requests()) {
    const std::vector<std::string> units(req.devices_ids().begin(), req.devices_ids().end());
    auto slots = GpuSlotsOfUnits(units);
    if (!slots.ok()) return ToGrpc(slots.status());
    auto env = allocator_.Allocate(*slots, gpus);
    if (!env.ok()) {
      log_->error("gpushare Allocate of {} GiB refused, the container gets no GPU: {}", units.size(),
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

// --- CompatPlugins ---

struct CompatPlugins::Impl {
  // One served and registered resource.
  struct Plugin {
    std::string resource, socket_name;
    grpc::Service* service = nullptr;
    std::function<Status(const std::vector<core::GpuInfo>&)> set_gpus;
    std::function<void()> shutdown;
    std::unique_ptr<grpc::Server> server;
    bool registered = false;
  };

  CompatOptions options;
  std::function<std::vector<core::GpuInfo>()> gpus_fn;
  std::shared_ptr<spdlog::logger> log;
  Allocator allocator;
  std::unique_ptr<GpushareService> gpushare;
  std::unique_ptr<DevicePluginService> hami;
  std::vector<Plugin> plugins;
  std::vector<core::GpuInfo> gpus;
  uint64_t kubelet_inode = 0;

  Impl(CompatOptions o, kube::Client client, MountPaths mounts, std::function<std::vector<core::GpuInfo>()> g,
       std::shared_ptr<spdlog::logger> l)
      : options(std::move(o)),
        gpus_fn(std::move(g)),
        log(std::move(l)),
        allocator(std::move(client), options.node_name, std::move(mounts), log) {
    if (options.resources.gpushare.enabled) {
      gpushare = std::make_unique<GpushareService>(allocator, log);
      Plugin p;
      p.resource = options.resources.gpushare.mem;
      p.socket_name = options.gpushare_socket;
      p.service = gpushare.get();
      p.set_gpus = [this](const std::vector<core::GpuInfo>& now) { return gpushare->SetGpus(now); };
      p.shutdown = [this] { gpushare->Shutdown(); };
      plugins.push_back(std::move(p));
    }
    if (options.resources.hami.enabled) {
      hami = std::make_unique<DevicePluginService>(allocator, options.slots_per_gpu, log);
      Plugin p;
      p.resource = options.resources.hami.gpu;
      p.socket_name = options.hami_socket;
      p.service = hami.get();
      p.set_gpus = [this](const std::vector<core::GpuInfo>& now) { return hami->SetGpus(now); };
      p.shutdown = [this] { hami->Shutdown(); };
      plugins.push_back(std::move(p));
    }
  }

  std::string SocketPath(const Plugin& p) const { return options.device_plugin_dir + "/" + p.socket_name; }
  std::string KubeletSocket() const { return options.device_plugin_dir + "/kubelet.sock"; }

  Status Serve(Plugin& p) {
    std::error_code ec;
    std::filesystem::remove(SocketPath(p), ec);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + SocketPath(p), grpc::InsecureServerCredentials());
    builder.RegisterService(p.service);
    p.server = builder.BuildAndStart();
    if (!p.server) return Internal("cannot serve the " + p.resource + " device plugin on " + SocketPath(p));
    log->info("serving the {} device plugin on {}", p.resource, SocketPath(p));
    return Status::Ok();
  }

  void StopServing(Plugin& p) {
    if (!p.server) return;
    p.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    p.server->Wait();
    p.server.reset();
  }

  Status Register(const Plugin& p) {
    auto channel = grpc::CreateChannel("unix://" + KubeletSocket(), grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest request;
    request.set_version("v1beta1");
    request.set_endpoint(p.socket_name);
    request.set_resource_name(p.resource);
    request.mutable_options()->set_pre_start_required(false);
    request.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty reply;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status st = stub->Register(&context, request, &reply);
    if (!st.ok()) {
      return Status(static_cast<StatusCode>(st.error_code()),
                    "Register " + p.resource + " with " + KubeletSocket() + ": " + st.error_message());
    }
    return Status::Ok();
  }

  void RefreshGpus() {
    std::vector<core::GpuInfo> now = gpus_fn();
    if (now.empty() || now == gpus) return;
    for (auto& p : plugins) {
      if (Status st = p.set_gpus(now); !st.ok()) {
        log->warn("{}: GPU inventory rejected: {}", p.resource, st.message());
        return;
      }
    }
    gpus = std::move(now);
  }

  void Step() {
    RefreshGpus();
    if (const uint64_t inode = Inode(KubeletSocket()); inode != kubelet_inode) {
      if (kubelet_inode != 0) log->info("kubelet.sock changed (kubelet restart?): registering the compat resources again");
      kubelet_inode = inode;
      for (auto& p : plugins) p.registered = false;
    }
    for (auto& p : plugins) {
      if (!std::filesystem::exists(SocketPath(p))) {
        log->warn("{} is gone (kubelet restart?): serving again and re-registering", SocketPath(p));
        StopServing(p);
        if (Status st = Serve(p); !st.ok()) {
          log->warn("{}", st.message());
          continue;
        }
        p.registered = false;
      }
      if (p.registered || gpus.empty()) continue;
      if (Status st = Register(p); st.ok()) {
        p.registered = true;
        log->info("registered {} with the kubelet at {} (endpoint {})", p.resource, KubeletSocket(), p.socket_name);
      } else {
        log->warn("{} (retrying every {} ms)", st.message(), options.resync.count());
      }
    }
  }
};

CompatPlugins::CompatPlugins(CompatOptions options, kube::Client client, MountPaths mounts,
                             std::function<std::vector<core::GpuInfo>()> gpus, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(client), std::move(mounts), std::move(gpus),
                                   std::move(log))) {}

CompatPlugins::~CompatPlugins() {
  for (auto& p : impl_->plugins) {
    p.shutdown();
    impl_->StopServing(p);
  }
}

Status CompatPlugins::Run(const std::atomic<bool>& stop) {
  Impl& s = *impl_;
  if (s.plugins.empty()) return Status::Ok();
  TESSERA_RETURN_IF_ERROR(s.allocator.Start());
  for (auto& p : s.plugins) TESSERA_RETURN_IF_ERROR(s.Serve(p));
  while (!stop.load()) {
    s.Step();
    const auto until = std::chrono::steady_clock::now() + s.options.resync;
    while (!stop.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  for (auto& p : s.plugins) {
    p.shutdown();
    s.StopServing(p);
  }
  return Status::Ok();
}

}  // namespace tessera::node
