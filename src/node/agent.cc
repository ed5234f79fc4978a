#include "node/agent.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <optional>
#include <thread>

#include "node/allocator.h"
#include "node/device_plugin.h"
#include "node/dir_watch.h"

namespace tessera::node {

Status ValidateConfig(const NodeConfig& c) {
  if (c.node_name.empty()) return InvalidArgument("--node-name is required (the Node this agent runs on)");
  if (c.gpu_source != "auto" && c.gpu_source != "nvml" && c.gpu_source != "file") {
    return InvalidArgument("--gpu-source must be auto, nvml or file, got \"" + c.gpu_source + "\"");
  }
  if (c.gpu_source == "file" && c.simulated_gpus_file.empty()) {
    return InvalidArgument("--gpu-source=file needs --simulated-gpus naming the GPU file");
  }
  if (c.gpu_source == "nvml" && !c.simulated_gpus_file.empty()) {
    return InvalidArgument("--simulated-gpus is not read with --gpu-source=nvml: drop one of them");
  }
  if (c.slots_per_gpu < 1 || c.slots_per_gpu > 1000) {
    return InvalidArgument("--slots-per-gpu must be in 1..1000, got " + std::to_string(c.slots_per_gpu));
  }
  if (c.socket_name.empty() || c.socket_name.find('/') != std::string::npos) {
    return InvalidArgument("--socket-name must be a file name, got \"" + c.socket_name + "\"");
  }
  if (c.resource_name.find('/') == std::string::npos) {
    return InvalidArgument("--resource-name must look like domain/name, got \"" + c.resource_name + "\"");
  }
  if (c.resync.count() <= 0) return InvalidArgument("--resync-ms must be positive");
  return Status::Ok();
}

std::string EffectiveGpuSource(const NodeConfig& c) {
  if (c.gpu_source != "auto") return c.gpu_source;
  return c.simulated_gpus_file.empty() ? "nvml" : "file";
}

struct NodeAgent::Impl {
  NodeConfig config;
  kube::Client client;
  std::unique_ptr<GpuSource> source;
  std::shared_ptr<spdlog::logger> log;
  Allocator allocator;
  DevicePluginService service;
  std::unique_ptr<grpc::Server> server;
  std::vector<core::GpuInfo> gpus;
  bool registered = false;
  bool published = false;

  Impl(NodeConfig c, kube::Client k, std::unique_ptr<GpuSource> s, std::shared_ptr<spdlog::logger> l)
      : config(std::move(c)),
        client(std::move(k)),
        source(std::move(s)),
        log(std::move(l)),
        allocator(client, config.node_name, config.mounts, log),
        service(allocator, config.slots_per_gpu, log) {
    service.SetReplyDelayForTesting(config.testing_allocate_reply_delay);
  }

  std::string SocketPath() const { return config.device_plugin_dir + "/" + config.socket_name; }
  std::string KubeletSocket() const { return config.device_plugin_dir + "/kubelet.sock"; }

  Status Serve() {
    std::error_code ec;
    std::filesystem::remove(SocketPath(), ec);  // a stale socket from a previous run
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + SocketPath(), grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    if (!server) return Internal("cannot serve the device plugin on " + SocketPath());
    log->info("serving the device plugin on {}", SocketPath());
    return Status::Ok();
  }

  void StopServing() {
    if (!server) return;
    service.EndStreams();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server->Wait();
    server.reset();
  }

  Status Register() {
    auto channel = grpc::CreateChannel("unix://" + KubeletSocket(), grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest request;
    request.set_version("v1beta1");
    request.set_endpoint(config.socket_name);
    request.set_resource_name(config.resource_name);
    request.mutable_options()->set_pre_start_required(false);
    request.mutable_options()->set_get_preferred_allocation_available(true);
    v1beta1::Empty reply;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status st = stub->Register(&context, request, &reply);
    if (!st.ok()) {
      return Status(static_cast<StatusCode>(st.error_code()), "Register with " + KubeletSocket() + ": " +
                                                                  st.error_message());
    }
    return Status::Ok();
  }

  // Re-reads the GPUs; updates slots and the Node when they changed.
  void Resync() {
    auto read = source->Read();
    if (read.ok()) {
      // The scheduler must not put more containers on a GPU than it has slots.
      for (auto& g : *read) g.max_sharers = config.slots_per_gpu;
    }
    if (!read.ok()) {
      log->warn("reading GPUs from {} failed, keeping the last inventory: {}", source->Describe(),
                read.status().message());
    } else if (*read != gpus || !published) {
      if (*read != gpus) log->info("GPU inventory from {} changed: {} GPU(s)", source->Describe(), read->size());
      if (Status st = service.SetGpus(*read); !st.ok()) {
        log->warn("GPU inventory rejected: {}", st.message());
        return;
      }
      gpus = *read;
      auto patched = PublishInventory(client, config.node_name, gpus);
      published = patched.ok();
      if (!patched.ok()) {
        log->warn("publishing the inventory on node {} failed (will retry): {}", config.node_name,
                  patched.status().message());
      } else if (*patched) {
        log->info("published the inventory of {} GPU(s) on node {}", gpus.size(), config.node_name);
      }
    }
  }
};

NodeAgent::NodeAgent(NodeConfig config, kube::Client client, std::unique_ptr<GpuSource> source,
                     std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(client), std::move(source), std::move(log))) {}

NodeAgent::~NodeAgent() {
  impl_->service.Shutdown();
  impl_->StopServing();
}

Status NodeAgent::Run(const std::atomic<bool>& stop) {
  Impl& s = *impl_;
  TESSERA_ASSIGN_OR_RETURN(s.gpus, s.source->Read());
  for (auto& g : s.gpus) g.max_sharers = s.config.slots_per_gpu;
  TESSERA_RETURN_IF_ERROR(s.service.SetGpus(s.gpus));
  s.Resync();  // publishes
  TESSERA_RETURN_IF_ERROR(s.Serve());
  // inotify wakes the loop at once when the kubelet wipes its directory; the
  // socket check below stays as the fallback.
  std::optional<DirWatch> watch;
  if (auto opened = DirWatch::Open(s.config.device_plugin_dir); opened.ok()) {
    watch.emplace(std::move(opened).value());
  } else {
    s.log->warn("{}; checking the socket every {} ms instead", opened.status().message(), s.config.resync.count());
  }
  while (!stop.load()) {
    if (!std::filesystem::exists(s.SocketPath())) {
      // The kubelet deletes every socket in its directory when it starts.
      s.log->warn("{} is gone (kubelet restart?): serving again and re-registering", s.SocketPath());
      s.StopServing();
      TESSERA_RETURN_IF_ERROR(s.Serve());
      s.registered = false;
    }
    if (!s.registered) {
      // Events queued so far (our own re-serve, the kubelet.sock that is
      // already there) are answered by this registration.
      if (watch) (void)watch->Wait(std::chrono::milliseconds(0));
      if (Status st = s.Register(); st.ok()) {
        s.registered = true;
        s.log->info("registered {} with the kubelet at {} (endpoint {})", s.config.resource_name, s.KubeletSocket(),
                    s.config.socket_name);
      } else {
        s.log->warn("{} (retrying every {} ms)", st.message(), s.config.resync.count());
      }
    }
    s.Resync();
    auto until = std::chrono::steady_clock::now() + s.config.resync;
    bool woken = false;
    while (!stop.load() && !woken && std::chrono::steady_clock::now() < until) {
      if (!watch) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      auto events = watch->Wait(std::chrono::milliseconds(100));
      if (!events.ok()) {
        s.log->warn("{}; falling back to checking the socket every {} ms", events.status().message(),
                    s.config.resync.count());
        watch.reset();
        continue;
      }
      for (const DirEvent& e : *events) {
        if (e.name == "kubelet.sock" && e.created) {
          s.log->info("kubelet.sock was created again (kubelet restart): registering again");
          s.registered = false;
          woken = true;
        } else if (e.name == s.config.socket_name && !e.created) {
          woken = true;  // handled at the top of the loop
        }
      }
    }
  }
  s.log->info("stopping");
  s.service.Shutdown();
  s.StopServing();
  return Status::Ok();
}

}  // namespace tessera::node
