#include "node/agent.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <optional>
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
  if (!c.metrics_bind_address.empty()) TESSERA_RETURN_IF_ERROR(ParseBindAddress(c.metrics_bind_address).status());
  return Status::Ok();
}

std::string EffectiveGpuSource(const NodeConfig& c) {
  if (c.gpu_source != "auto") return c.gpu_source;
  return c.simulated_gpus_file.empty() ? "nvml" : "file";
}

// Event reasons tessera-node raises on pods.
constexpr const char* kAllocateFailedReason = "TesseraAllocateFailed";
constexpr const char* kMismatchReason = "TesseraAllocationMismatch";

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
  std::vector<core::GpuInfo> gpus;
  bool registered = false;
  bool published = false;

  Impl(NodeConfig c, kube::Client k, std::unique_ptr<GpuSource> s, std::shared_ptr<spdlog::logger> l)
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
    for (const PodRef& pod : pods) events.Record(WarningOn(pod, kAllocateFailedReason, st.message()));
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

  // Runs Reconcile every reconcile interval until *stop or *quit.
  void ReconcileLoop(const std::atomic<bool>& stop, const std::atomic<bool>& quit) {
    while (true) {
      const auto until = std::chrono::steady_clock::now() + config.reconcile_interval;
      while (std::chrono::steady_clock::now() < until) {
        if (stop.load() || quit.load()) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      Reconcile();
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
  TESSERA_ASSIGN_OR_RETURN(s.node_metrics, NodeMetrics::Register(s.registry));
  TESSERA_ASSIGN_OR_RETURN(s.gpus, s.source->Read());
  for (auto& g : s.gpus) g.max_sharers = s.config.slots_per_gpu;
  TESSERA_RETURN_IF_ERROR(s.service.SetGpus(s.gpus));
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
  // Reconciliation runs on its own thread so a slow API server or kubelet
  // never delays re-registration; it ends with Run, however Run returns.
  std::atomic<bool> quit_reconcile{false};
  std::thread reconciler([&] { s.ReconcileLoop(stop, quit_reconcile); });
  struct JoinReconciler {
    std::atomic<bool>& quit;
    std::thread& thread;
    ~JoinReconciler() {
      quit.store(true);
      thread.join();
    }
  } join_reconciler{quit_reconcile, reconciler};
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
  return Status::Ok();
}

}  // namespace tessera::node
