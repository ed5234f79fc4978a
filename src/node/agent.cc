#include "node/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "kube/paths.h"
#include "node/allocator.h"
#include "node/device_plugin.h"
#include "node/dir_watch.h"
#include "node/event_recorder.h"
#include "node/metrics_server.h"
#include "node/node_metrics.h"
#include "node/pod_resources.h"
#include "node/reconcile.h"
#include "node/region_gc.h"
#include "node/usage.h"
#include "node/usage_metrics.h"

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
  return Status::Ok();
}

std::string EffectiveGpuSource(const NodeConfig& c) {
  if (c.gpu_source != "auto") return c.gpu_source;
  return c.simulated_gpus_file.empty() ? "nvml" : "file";
}

// A pod's usage annotation as last written.
struct PublishedUsage {
  core::PodUsage usage;
  std::chrono::steady_clock::time_point when;
};

struct NodeAgent::Impl {
  NodeConfig config;
  kube::Client client;
  std::unique_ptr<GpuSource> source;
  std::shared_ptr<spdlog::logger> log;
  // What /metrics serves. Run registers the families before the device
  // plugin serves; gRPC and reconcile threads update them.
  metrics::Registry registry;
  NodeMetrics node_metrics;
  EventRecorder events;
  MismatchTracker mismatch_tracker;  // reconcile thread only
  bool warned_no_pod_resources = false;  // reconcile thread only
  Allocator allocator;
  DevicePluginService service;
  std::unique_ptr<MetricsServer> metrics_server;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<ArbiterLoop> arbiter;  // compute grants; Snapshot() has per-container stats
  std::unique_ptr<MpsSupervisor> mps;    // null when this node runs no MPS; the allocator asks it while serving
  std::unique_ptr<RegionGc> region_gc;   // null when --region-gc-grace-seconds is 0; its loop only
  std::vector<core::GpuInfo> gpus;  // written by the main loop only
  mutable std::mutex inventory_mu;
  std::vector<core::GpuInfo> inventory;  // GUARDED_BY(inventory_mu): a copy of gpus for the usage loop
  SnapshotStore usage_store;             // the latest usage, for /metrics
  // Usage loop only.
  std::optional<UsageSnapshot> last_usage;
  std::map<std::string, PublishedUsage> published_usage;  // by pod uid
  std::set<std::string> warned_regions;
  bool warned_load = false;
  std::mutex source_mu;  // GpuSource is one-caller-at-a-time: the main loop's Read, the usage loop's ReadLoad
  bool registered = false;
  bool published = false;

  Impl(NodeConfig c, kube::Client k, std::unique_ptr<GpuSource> s, std::shared_ptr<spdlog::logger> l,
       const MpsPlan& mps_plan)
      : config(std::move(c)),
        client(std::move(k)),
        source(std::move(s)),
        log(std::move(l)),
        events([k = client](const std::string& path, const nlohmann::json& body) mutable {
                 return k.Create(path, body).status();
               },
               EventRecorderOptions{}, log),
        allocator(client, config.node_name, config.mounts, log),
        service(allocator, config.slots_per_gpu, log,
                [this](const Status& st, const std::vector<PodRef>& pods) { OnAllocate(st, pods); }) {
    service.SetReplyDelayForTesting(config.testing_allocate_reply_delay);
    if (mps_plan.enabled) {
      MpsOptions options;
      options.control = mps_plan.control;
      options.root = config.mps_root;
      mps = std::make_unique<MpsSupervisor>(std::move(options), log);
      allocator.SetMpsProbe([this](const std::string& uuid) { return mps->Running(uuid); });
    }
  }

  // Starts what is missing among the GPUs' MPS daemons (when MPS is on) and
  // sets each GPU's mps flag: whether its daemon runs now.
  void MarkMps(std::vector<core::GpuInfo>& read) {
    if (mps) mps->Ensure(read);
    for (core::GpuInfo& g : read) g.mps = mps != nullptr && g.healthy && mps->Running(g.uuid);
  }

  // Logs each GPU whose mps flag changed since the last inventory.
  void LogMpsChanges(const std::vector<core::GpuInfo>& read) const {
    for (const core::GpuInfo& g : read) {
      auto old = std::find_if(gpus.begin(), gpus.end(), [&](const core::GpuInfo& o) { return o.uuid == g.uuid; });
      if (old == gpus.end() || old->mps == g.mps) continue;
      if (g.mps) {
        log->info("GPU {}: its MPS daemon runs again; MPS pods may be placed on it", g.uuid);
      } else {
        log->warn("GPU {}: its MPS daemon is not running; MPS pods are neither placed on it nor admitted until it is "
                  "started again", g.uuid);
      }
    }
  }

  kube::EventSpec WarningOn(const PodRef& pod, const char* reason, const std::string& message) const {
    kube::EventSpec spec;
    spec.object.ns = pod.ns;
    spec.object.name = pod.name;
    spec.object.uid = pod.uid;
    spec.reason = reason;
    spec.message = message;
    spec.component = "tessera-node";
    spec.host = config.node_name;
    return spec;
  }

  // On the gRPC thread, before the kubelet is answered: counts, and queues
  // (never posts) an Event on each pod a refusal names.
  void OnAllocate(const Status& st, const std::vector<PodRef>& pods) {
    if (st.ok()) {
      node_metrics.allocations->Increment();
      return;
    }
    node_metrics.allocate_failures->Increment();
    const bool refused = st.code() == StatusCode::kPermissionDenied;
    if (refused) node_metrics.assignments_refused->Increment();
    for (const PodRef& pod : pods) {
      events.Record(WarningOn(pod, refused ? kAssignmentRefusedReason : kAllocateFailedReason, st.message()));
    }
  }

  // One pass: the kubelet's record against the assignments; each new
  // mismatch is logged, counted and raised as an Event once.
  void Reconcile() {
    const std::string& socket = config.pod_resources_socket;
    std::error_code ec;
    if (!std::filesystem::exists(socket, ec)) {
      if (!warned_no_pod_resources) {
        log->warn("{} is absent: allocations are not checked against the kubelet until it appears", socket);
        warned_no_pod_resources = true;
      } else {
        log->debug("{} is still absent: reconciliation skipped", socket);
      }
      return;
    }
    warned_no_pod_resources = false;
    auto records = ListKubeletRecords(socket, config.resource_name, std::chrono::seconds(5));
    if (!records.ok()) {
      log->warn("reconciliation skipped: {}", records.status().message());
      return;
    }
    auto pods = client.List(kube::PodsPath(""), "", "spec.nodeName=" + config.node_name);
    if (!pods.ok()) {
      log->warn("reconciliation skipped: listing the pods of node {}: {}", config.node_name,
                pods.status().message());
      return;
    }
    std::vector<Mismatch> found = FindMismatches(*records, PodAssignmentsFromList((*pods)["items"]), config.node_name);
    for (const Mismatch& m : mismatch_tracker.New(found)) {
      node_metrics.mismatches->Increment();
      log->warn("allocation mismatch ({}): {}", MismatchKindName(m.kind), m.message);
      events.Record(WarningOn({m.ns, m.pod, m.uid}, kMismatchReason, m.message));
    }
    node_metrics.reconcile_runs->Increment();
    log->debug("reconciled {} kubelet record(s): {} mismatch(es)", records->size(), found.size());
  }

  // One pass of the region cleanup: folders of pods gone from the node.
  void RegionGcPass() {
    region_gc->Pass(
        allocator.CachedPods(),
        [this]() -> Result<std::vector<nlohmann::json>> {
          TESSERA_ASSIGN_OR_RETURN(nlohmann::json pods,
                                   client.List(kube::PodsPath(""), "", "spec.nodeName=" + config.node_name));
          auto items = pods.find("items");
          if (items == pods.end() || !items->is_array()) return Internal("the pod list has no items");
          return items->get<std::vector<nlohmann::json>>();
        },
        std::chrono::steady_clock::now());
  }

  void SetInventory(std::vector<core::GpuInfo> read) {
    gpus = read;
    std::lock_guard<std::mutex> lock(inventory_mu);
    inventory = std::move(read);
  }

  std::optional<std::vector<RegionCounters>> LookupRegion(const std::string& uid, const std::string& container,
                                                          int n) {
    const std::string dir = RegionHostDir(config.mounts.region_root_host, uid, container);
    auto counters = ReadRegionCounters(dir, n);
    if (counters.ok()) {
      warned_regions.erase(dir);
      return std::move(counters).value();
    }
    // No region yet: the container has not touched its GPU. Anything else is worth one line.
    if (counters.status().code() != StatusCode::kNotFound && warned_regions.insert(dir).second) {
      log->warn("cannot read the region of {}: {}", dir, counters.status().message());
    }
    return std::nullopt;
  }

  // One pass: the regions of the containers with a share here, read and
  // joined with their assignments; new OOM refusals raised; usage
  // annotations written where the usage moved.
  void UsagePass() {
    std::optional<std::vector<nlohmann::json>> pods = allocator.CachedPods();
    if (!pods) {
      log->debug("usage pass skipped: the watch of node {}'s pods has not synced", config.node_name);
      return;
    }
    std::vector<core::GpuInfo> now_gpus;
    {
      std::lock_guard<std::mutex> lock(inventory_mu);
      now_gpus = inventory;
    }
    std::optional<std::vector<GpuLoad>> load;
    {
      std::lock_guard<std::mutex> lock(source_mu);
      auto read = source->ReadLoad();
      if (read.ok()) {
        load = std::move(read).value();
        warned_load = false;
      } else if (read.status().code() != StatusCode::kUnimplemented && !warned_load) {
        log->warn("GPU load from {} unavailable, using the containers' regions: {}", source->Describe(),
                  read.status().message());
        warned_load = true;
      }
    }
    UsageSnapshot snapshot = JoinUsage(
        ActiveAssignments(*pods, config.node_name), now_gpus,
        [this](const std::string& uid, const std::string& container, int n) { return LookupRegion(uid, container, n); },
        std::chrono::system_clock::now(), std::chrono::steady_clock::now(), last_usage ? &*last_usage : nullptr,
        load ? &*load : nullptr);
    for (const OomRefusal& r : NewOomRefusals(last_usage ? &*last_usage : nullptr, snapshot)) {
      const std::string message = OomRefusalMessage(r);
      log->info("{}/{}: {}", r.share.pod.ns, r.share.pod.name, message);
      events.Record(WarningOn(r.share.pod, kOomRefusedReason, message));
    }
    if (config.usage_annotation_interval.count() > 0) PublishUsage(snapshot);
    usage_store.Set(snapshot);
    last_usage = std::move(snapshot);
  }

  void PublishUsage(const UsageSnapshot& snapshot) {
    const std::map<std::string, core::PodUsage> usages = PodUsages(snapshot);
    std::erase_if(published_usage, [&](const auto& entry) { return !usages.contains(entry.first); });
    const auto now = std::chrono::steady_clock::now();
    UsagePublishPolicy policy;
    policy.min_interval = config.usage_annotation_interval;
    for (const auto& [uid, usage] : usages) {
      auto last = published_usage.find(uid);
      if (last != published_usage.end() &&
          (now - last->second.when < policy.min_interval || !UsageChanged(last->second.usage, usage, policy))) {
        continue;
      }
      const ContainerGpu& any = *std::find_if(snapshot.containers.begin(), snapshot.containers.end(),
                                              [&](const ContainerGpu& c) { return c.pod.uid == uid; });
      auto encoded = core::EncodeUsage(usage);
      if (!encoded.ok()) {
        log->warn("usage of {}/{} not written: {}", any.pod.ns, any.pod.name, encoded.status().message());
        continue;
      }
      nlohmann::json patch = {{"metadata", {{"uid", uid}, {"annotations", {{std::string(core::kUsageAnnotation), *encoded}}}}}};
      auto patched = client.Patch(kube::PodPath(any.pod.ns, any.pod.name), kube::PatchType::kMerge, patch);
      if (!patched.ok()) {
        log->warn("writing the usage of {}/{} failed (will retry): {}", any.pod.ns, any.pod.name,
                  patched.status().message());
        continue;
      }
      published_usage[uid] = PublishedUsage{usage, now};
    }
  }

  // Runs `pass` every `interval` until *stop or *quit.
  template <typename Pass>
  static void Every(std::chrono::milliseconds interval, Pass pass, const std::atomic<bool>& stop,
                    const std::atomic<bool>& quit) {
    while (true) {
      const auto until = std::chrono::steady_clock::now() + interval;
      while (std::chrono::steady_clock::now() < until) {
        if (stop.load() || quit.load()) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(50, interval.count())));
      }
      pass();
    }
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
    auto read = [this] {
      std::lock_guard<std::mutex> lock(source_mu);
      return source->Read();
    }();
    if (read.ok()) {
      // The scheduler must not put more containers on a GPU than it has slots.
      for (auto& g : *read) g.max_sharers = config.slots_per_gpu;
      MarkMps(*read);
      LogMpsChanges(*read);
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
      SetInventory(*read);
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

namespace {
NodeConfig WithMpsRoot(NodeConfig config, const MpsPlan& mps) {
  config.mounts.mps_root = mps.enabled ? config.mps_root : "";
  return config;
}
}  // namespace

NodeAgent::NodeAgent(NodeConfig config, kube::Client client, std::unique_ptr<GpuSource> source,
                     std::shared_ptr<spdlog::logger> log, MpsPlan mps)
    : impl_(std::make_unique<Impl>(WithMpsRoot(std::move(config), mps), std::move(client), std::move(source),
                                   std::move(log), mps)) {}

NodeAgent::~NodeAgent() {
  impl_->service.Shutdown();
  impl_->StopServing();
}

Status NodeAgent::Run(const std::atomic<bool>& stop) {
  Impl& s = *impl_;
  TESSERA_ASSIGN_OR_RETURN(s.node_metrics, NodeMetrics::Register(s.registry, s.config.node_name));
  TESSERA_RETURN_IF_ERROR(RegisterUsageMetrics(s.registry, s.config.node_name, s.usage_store));
  TESSERA_ASSIGN_OR_RETURN(std::vector<core::GpuInfo> first, s.source->Read());
  for (auto& g : first) g.max_sharers = s.config.slots_per_gpu;
  s.MarkMps(first);  // the first publication already says which GPUs run MPS
  TESSERA_RETURN_IF_ERROR(s.service.SetGpus(first));
  s.SetInventory(std::move(first));
  s.Resync();  // publishes
  if (!s.config.metrics_bind_address.empty()) {
    TESSERA_ASSIGN_OR_RETURN(BindAddress address, ParseBindAddress(s.config.metrics_bind_address));
    s.metrics_server = std::make_unique<MetricsServer>([&s] { return s.registry.Render(); }, s.log);
    TESSERA_RETURN_IF_ERROR(s.metrics_server->Start(address).status());
  }
  // The per-GPU compute arbiter (arbiter_loop.h), on its own thread.
  s.arbiter = StartArbiter(s.config.mounts.region_root_host, s.config.arbiter);
  // The watch of this node's pods syncs in the background; Allocate LISTs until it has.
  TESSERA_RETURN_IF_ERROR(s.allocator.Start());
  TESSERA_RETURN_IF_ERROR(s.Serve());
  // Reconciliation and the usage pass run on their own threads so a slow API
  // server or kubelet never delays re-registration; they end with Run,
  // however Run returns.
  std::atomic<bool> quit_loops{false};
  std::vector<std::thread> loops;
  struct JoinLoops {
    std::atomic<bool>& quit;
    std::vector<std::thread>& threads;
    ~JoinLoops() {
      quit.store(true);
      for (std::thread& t : threads) t.join();
    }
  } join_loops{quit_loops, loops};
  loops.emplace_back([&] { Impl::Every(s.config.reconcile_interval, [&] { s.Reconcile(); }, stop, quit_loops); });
  if (s.config.usage_interval.count() > 0) {
    loops.emplace_back([&] { Impl::Every(s.config.usage_interval, [&] { s.UsagePass(); }, stop, quit_loops); });
  }
  if (s.config.region_gc_grace.count() > 0) {
    RegionGcOptions gc;
    gc.root = s.config.mounts.region_root_host;
    gc.node = s.config.node_name;
    gc.grace = s.config.region_gc_grace;
    s.region_gc = std::make_unique<RegionGc>(std::move(gc), s.log, s.node_metrics.region_folders_removed);
    const std::chrono::milliseconds every = std::min<std::chrono::milliseconds>(s.config.region_gc_grace,
                                                                               std::chrono::seconds(30));
    s.log->info("region folders under {} are removed {}s after their pod left node {} (checked every {}s)",
                s.config.mounts.region_root_host, s.config.region_gc_grace.count(), s.config.node_name,
                every.count() / 1000);
    loops.emplace_back([&s, &stop, &quit_loops, every] {
      Impl::Every(every, [&s] { s.RegionGcPass(); }, stop, quit_loops);
    });
  } else {
    s.log->info("region cleanup off (--region-gc-grace-seconds=0): folders under {} are never removed",
                s.config.mounts.region_root_host);
  }
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
  if (s.metrics_server) s.metrics_server->Stop();
  if (s.mps) s.mps->Stop();  // quits the daemons: MPS clients left on this node lose their server
  return Status::Ok();
}

}  // namespace tessera::node
