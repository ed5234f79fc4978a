#include "node/agent.h"

#include <algorithm>
#include <thread>

#include "node/device_plugin.h"
#include "node/event_recorder.h"
#include "node/gpu_inventory.h"
#include "node/metrics_server.h"
#include "node/node_metrics.h"
#include "node/node_pods.h"
#include "node/periodic.h"
#include "node/reconciler.h"
#include "node/region_gc.h"
#include "node/usage_metrics.h"
#include "node/usage_reporter.h"

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
  if (c.reconcile_interval.count() <= 0) return InvalidArgument("--reconcile-interval-ms must be positive");
  if (c.usage_interval.count() < 0) return InvalidArgument("--usage-interval-ms must be 0 (off) or positive");
  if (c.usage_annotation_interval.count() < 0) {
    return InvalidArgument("--usage-annotation-interval-ms must be 0 (off) or positive");
  }
  if (c.region_gc_grace.count() < 0) return InvalidArgument("--region-gc-grace-seconds must be 0 (off) or positive");
  if (!c.metrics_bind_address.empty()) TESSERA_RETURN_IF_ERROR(ParseBindAddress(c.metrics_bind_address).status());
  if (c.mps != "auto" && c.mps != "on" && c.mps != "off") {
    return InvalidArgument("--mps must be auto, on or off, got \"" + c.mps + "\"");
  }
  if (c.mps != "off" && c.mps_control.empty()) {
    return InvalidArgument("--mps-control must name the MPS control program (or use --mps=off)");
  }
  if (c.mps != "off" && (c.mps_root.empty() || c.mps_root.front() != '/')) {
    return InvalidArgument("--mps-root must be an absolute path, got \"" + c.mps_root + "\"");
  }
  if (c.mps != "off" && (c.mps_shm.empty() || c.mps_shm.front() != '/')) {
    return InvalidArgument("--mps-shm must be an absolute path, got \"" + c.mps_shm + "\"");
  }
  return Status::Ok();
}

std::string EffectiveGpuSource(const NodeConfig& c) {
  if (c.gpu_source != "auto") return c.gpu_source;
  return c.simulated_gpus_file.empty() ? "nvml" : "file";
}

namespace {

NodeConfig WithMpsRoot(NodeConfig config, const MpsPlan& mps) {
  config.mounts.mps_root = mps.enabled ? config.mps_root : "";
  config.mounts.mps_shm = mps.enabled ? config.mps_shm : "";
  return config;
}

PluginHostOptions HostOptions(const NodeConfig& config) {
  PluginHostOptions options;
  options.node = config.node_name;
  options.server.dir = config.device_plugin_dir;
  options.server.resync = config.resync;
  return options;
}

}  // namespace

// Members are declared in the order they are needed, so they are destroyed
// in the reverse: the loops first, then the host (no Allocate runs after it),
// then what the loops and the Allocator's observer use.
struct NodeAgent::Impl {
  NodeConfig config;
  kube::Api& api;
  std::shared_ptr<spdlog::logger> log;
  // What /metrics serves. Run registers the families before the host
  // serves; gRPC and loop threads update them.
  metrics::Registry registry;
  NodeMetrics node_metrics;
  SnapshotStore usage_store;  // the latest usage, for /metrics
  EventRecorder events;
  std::unique_ptr<MpsSupervisor> mps;  // null when this node runs no MPS; the Allocator asks it while serving
  PluginHost host;
  Status own_resource;  // whether the agent's own resource was added to the host
  GpuInventory inventory;
  std::unique_ptr<MetricsServer> metrics_server;
  std::unique_ptr<ArbiterLoop> arbiter;  // compute grants
  std::unique_ptr<Reconciler> reconciler;
  std::unique_ptr<UsageReporter> usage;
  std::unique_ptr<RegionGc> region_gc;  // null when --region-gc-grace-seconds is 0
  std::vector<std::unique_ptr<PeriodicLoop>> loops;

  Impl(NodeConfig c, kube::Api& a, std::unique_ptr<GpuSource> source, std::shared_ptr<spdlog::logger> l,
       const MpsPlan& mps_plan)
      : config(std::move(c)),
        api(a),
        log(std::move(l)),
        events([api = &a](const std::string& path, const nlohmann::json& body) {
                 return api->Create(path, body).status();
               },
               EventRecorderOptions{}, log),
        mps(mps_plan.enabled ? std::make_unique<MpsSupervisor>(MpsOptions{mps_plan.control, config.mps_root}, log)
                             : nullptr),
        host(HostOptions(config), api, config.mounts, log),
        inventory(GpuInventoryOptions{config.node_name, config.slots_per_gpu}, std::move(source), mps.get(),
                  [this](const std::vector<core::GpuInfo>& gpus) { return host.SetGpus(gpus); },
                  [this](const std::vector<core::GpuInfo>& gpus) {
                    return PublishInventory(api, config.node_name, gpus);
                  },
                  log) {
    if (mps) host.allocator().SetMpsProbe([this](const std::string& uuid) { return mps->Running(uuid); });
    host.allocator().SetObserver([this](const Status& st, const std::vector<PodRef>& pods) { OnAllocate(st, pods); });
    auto service =
        std::make_unique<DevicePluginService>(host.allocator(), config.resource_name, config.slots_per_gpu, log);
    service->SetReplyDelayForTesting(config.testing_allocate_reply_delay);
    own_resource = host.Add(config.resource_name, config.socket_name, std::move(service));
  }

  // Before the kubelet is answered, for every resource the host serves:
  // counts, and queues (never posts) an Event on each pod a refusal names.
  void OnAllocate(const Status& st, const std::vector<PodRef>& pods) {
    if (st.ok()) {
      node_metrics.allocations->Increment();
      return;
    }
    node_metrics.allocate_failures->Increment();
    const bool refused = st.code() == StatusCode::kPermissionDenied;
    if (refused) node_metrics.assignments_refused->Increment();
    for (const PodRef& pod : pods) {
      events.Record(
          PodWarning(pod, refused ? kAssignmentRefusedReason : kAllocateFailedReason, st.message(), config.node_name));
    }
  }

  // The loops beside the host, each on its own thread so a slow API server
  // or kubelet never delays another or the kubelet watch.
  void StartLoops() {
    ReconcilerOptions reconcile;
    reconcile.node = config.node_name;
    reconcile.resource = config.resource_name;
    reconcile.socket = config.pod_resources_socket;
    reconciler = std::make_unique<Reconciler>(std::move(reconcile), api, events, node_metrics, log);
    loops.push_back(std::make_unique<PeriodicLoop>(config.reconcile_interval, [this] { reconciler->Pass(); }));
    if (config.usage_interval.count() > 0) {
      UsageReporterOptions options;
      options.node = config.node_name;
      options.region_root = config.mounts.region_root_host;
      options.annotation_interval = config.usage_annotation_interval;
      UsageSources sources;
      sources.pods = [this] { return host.allocator().CachedPods(); };
      sources.gpus = [this] { return inventory.Current(); };
      sources.load = [this] { return inventory.ReadLoad(); };
      usage = std::make_unique<UsageReporter>(std::move(options), api, std::move(sources), events, usage_store, log);
      loops.push_back(std::make_unique<PeriodicLoop>(config.usage_interval, [this] { usage->Pass(); }));
    }
    if (config.region_gc_grace.count() > 0) {
      RegionGcOptions gc;
      gc.root = config.mounts.region_root_host;
      gc.node = config.node_name;
      gc.grace = config.region_gc_grace;
      region_gc = std::make_unique<RegionGc>(std::move(gc), log, node_metrics.region_folders_removed);
      const std::chrono::milliseconds every =
          std::min<std::chrono::milliseconds>(config.region_gc_grace, std::chrono::seconds(30));
      log->info("region folders under {} are removed {}s after their pod left node {} (checked every {}s)",
                config.mounts.region_root_host, config.region_gc_grace.count(), config.node_name,
                every.count() / 1000);
      loops.push_back(std::make_unique<PeriodicLoop>(every, [this] {
        region_gc->Pass(
            host.allocator().CachedPods(), [this] { return ListNodePods(api, config.node_name); },
            std::chrono::steady_clock::now());
      }));
    } else {
      log->info("region cleanup off (--region-gc-grace-seconds=0): folders under {} are never removed",
                config.mounts.region_root_host);
    }
    for (auto& loop : loops) loop->Start();
  }

  // Everything Run started, in reverse; safe to call twice.
  void StopAll() {
    for (auto& loop : loops) loop->Stop();
    host.Stop();
    if (metrics_server) metrics_server->Stop();
    if (arbiter) arbiter->Stop();
    if (mps) mps->Stop();  // quits the daemons: MPS clients left on this node lose their server
  }
};

NodeAgent::NodeAgent(NodeConfig config, kube::Api& api, std::unique_ptr<GpuSource> source,
                     std::shared_ptr<spdlog::logger> log, MpsPlan mps)
    : impl_(std::make_unique<Impl>(WithMpsRoot(std::move(config), mps), api, std::move(source), std::move(log),
                                   mps)) {}

NodeAgent::~NodeAgent() {
  for (auto& loop : impl_->loops) loop->Stop();
  impl_->host.Stop();
}

PluginHost& NodeAgent::host() { return impl_->host; }

Status NodeAgent::Run(const std::atomic<bool>& stop) {
  Impl& s = *impl_;
  TESSERA_RETURN_IF_ERROR(s.own_resource);
  TESSERA_ASSIGN_OR_RETURN(s.node_metrics, NodeMetrics::Register(s.registry, s.config.node_name));
  TESSERA_RETURN_IF_ERROR(RegisterUsageMetrics(s.registry, s.config.node_name, s.usage_store));
  // The first inventory is read, offered to every resource and published
  // before anything is served.
  TESSERA_RETURN_IF_ERROR(s.inventory.Start());
  struct StopOnReturn {
    Impl& s;
    ~StopOnReturn() { s.StopAll(); }
  } stop_on_return{s};
  if (!s.config.metrics_bind_address.empty()) {
    TESSERA_ASSIGN_OR_RETURN(BindAddress address, ParseBindAddress(s.config.metrics_bind_address));
    s.metrics_server = std::make_unique<MetricsServer>([&s] { return s.registry.Render(); }, s.log);
    TESSERA_RETURN_IF_ERROR(s.metrics_server->Start(address).status());
  }
  // The per-GPU compute arbiter (arbiter_loop.h), on its own thread.
  s.arbiter = StartArbiter(s.config.mounts.region_root_host, s.config.arbiter);
  // The watch of this node's pods syncs in the background (Allocate LISTs
  // until it has); every resource is served, then registered by the host's
  // own thread, which also follows kubelet restarts.
  TESSERA_RETURN_IF_ERROR(s.host.Start());
  std::string served;
  for (const std::string& r : s.host.Resources()) served += (served.empty() ? "" : ", ") + r;
  s.log->info("plugin host serving {} through one Allocator", served);
  s.StartLoops();
  while (!stop.load()) {
    const auto until = std::chrono::steady_clock::now() + s.config.resync;
    while (!stop.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(50, s.config.resync.count())));
    }
    if (!stop.load()) s.inventory.Resync();
  }
  s.log->info("stopping");
  return Status::Ok();
}

}  // namespace tessera::node
