#include "tests/kubelet_sim/kubelet_sim.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/thread_annotations.h"
#include "core/timestamp.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kube/paths.h"
#include "podresources/v1/api.grpc.pb.h"

namespace tessera::testing {
namespace {

using nlohmann::json;

std::string Str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// What the device manager recorded for one admitted pod.
struct PodRecord {
  std::string ns, name;
  std::vector<std::pair<std::string, std::vector<std::string>>> containers;  // spec order; IDs may be empty
};

// v1.PodResourcesLister over snapshots of the records, as the kubelet's
// pod-resources server answers from its device manager.
class PodResourcesService final : public v1::PodResourcesLister::Service {
 public:
  PodResourcesService(std::string resource, std::function<std::vector<PodRecord>()> records,
                      std::function<std::vector<SimDevice>()> devices)
      : resource_(std::move(resource)), records_(std::move(records)), devices_(std::move(devices)) {}

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    for (const PodRecord& r : records_()) Fill(r, response->add_pod_resources());
    return grpc::Status::OK;
  }
  grpc::Status Get(grpc::ServerContext*, const v1::GetPodResourcesRequest* request,
                   v1::GetPodResourcesResponse* response) override {
    for (const PodRecord& r : records_()) {
      if (r.ns == request->pod_namespace() && r.name == request->pod_name()) {
        Fill(r, response->mutable_pod_resources());
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "pod " + request->pod_namespace() + "/" + request->pod_name() + " not found");
  }
  grpc::Status GetAllocatableResources(grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse* response) override {
    auto* devices = response->add_devices();
    devices->set_resource_name(resource_);
    for (const auto& d : devices_()) {
      if (d.health == "Healthy") devices->add_device_ids(d.id);
    }
    return grpc::Status::OK;
  }

 private:
  void Fill(const PodRecord& r, v1::PodResources* out) const {
    out->set_name(r.name);
    out->set_namespace_(r.ns);
    for (const auto& [name, ids] : r.containers) {
      auto* c = out->add_containers();
      c->set_name(name);
      if (ids.empty()) continue;
      auto* devices = c->add_devices();
      devices->set_resource_name(resource_);
      for (const auto& id : ids) devices->add_device_ids(id);
    }
  }

  const std::string resource_;
  const std::function<std::vector<PodRecord>()> records_;
  const std::function<std::vector<SimDevice>()> devices_;
};

// The status a kubelet writes once every container of `pod` has started:
// phase Running, the Initialized, ContainersReady and Ready conditions, and
// per container a running, started, ready status (init containers:
// terminated, Completed). A strategic merge patch: the conditions merge by
// type, so kube-scheduler's PodScheduled stays.
json RunningStatus(const json& pod) {
  const std::string now = core::FormatRfc3339(std::chrono::system_clock::now());
  const std::string uid = Str(pod["metadata"], "uid");
  json conditions = json::array();
  for (const char* type : {"Initialized", "ContainersReady", "Ready"}) {
    conditions.push_back({{"type", type}, {"status", "True"}, {"lastTransitionTime", now}});
  }
  auto statuses = [&](const char* list, bool init) {
    json out = json::array();
    if (!pod["spec"].contains(list)) return out;
    for (const auto& c : pod["spec"][list]) {
      const std::string name = Str(c, "name");
      json state = init ? json{{"terminated", {{"exitCode", 0}, {"reason", "Completed"}, {"startedAt", now},
                                               {"finishedAt", now}}}}
                        : json{{"running", {{"startedAt", now}}}};
      out.push_back({{"name", name},
                     {"image", Str(c, "image")},
                     {"imageID", ""},
                     {"containerID", "kubelet-sim://" + uid + "-" + name},
                     {"ready", true},
                     {"started", !init},
                     {"restartCount", 0},
                     {"state", std::move(state)}});
    }
    return out;
  };
  json status = {{"phase", "Running"}, {"startTime", now}, {"conditions", std::move(conditions)},
                 {"containerStatuses", statuses("containers", false)}};
  json init = statuses("initContainers", true);
  if (!init.empty()) status["initContainerStatuses"] = std::move(init);
  return {{"status", std::move(status)}};
}

std::string DefaultPodResourcesSocket(const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "a/dp/" -> "a/dp"
  return (p.parent_path() / "pod-resources" / "kubelet.sock").string();
}

}  // namespace

struct KubeletSim::Impl : public v1beta1::Registration::Service {
  kube::Client client;
  const KubeletSimOptions options;

  mutable Mutex mu;
  mutable CondVar cv;  // a registration, or stopping
  std::string endpoint TESSERA_GUARDED_BY(mu);  // registered socket name
  uint64_t registration_gen TESSERA_GUARDED_BY(mu) = 0;
  int registrations TESSERA_GUARDED_BY(mu) = 0;
  bool preferred_available TESSERA_GUARDED_BY(mu) = false;
  std::vector<SimDevice> devices TESSERA_GUARDED_BY(mu);
  std::shared_ptr<v1beta1::DevicePlugin::Stub> stub TESSERA_GUARDED_BY(mu);
  std::shared_ptr<grpc::ClientContext> stream_context TESSERA_GUARDED_BY(mu);
  std::map<std::string, std::vector<std::string>> in_use TESSERA_GUARDED_BY(mu);  // pod uid -> device IDs
  std::set<std::string> admitted TESSERA_GUARDED_BY(mu);                          // pod uids decided
  std::map<std::string, PodRecord> records TESSERA_GUARDED_BY(mu);                // pod uid -> what it allocated
  std::set<std::string> finished;                               // pod thread only: deletions finished
  int64_t published_capacity = -1, published_allocatable = -1;  // plugin thread only: last Node status sent
  const std::string pod_resources_socket;
  PodResourcesService pod_resources;
  std::unique_ptr<grpc::Server> pod_resources_server;
  std::atomic<bool> paused{false};
  std::atomic<bool> stopping{false};
  std::unique_ptr<grpc::Server> server;
  std::thread plugin_thread, pod_thread;
  std::mt19937_64 rng;
  std::vector<KubeletSim*> forwards;  // set before Start

  Impl(kube::Client c, KubeletSimOptions o)
      : client(std::move(c)),
        options(std::move(o)),
        pod_resources_socket(options.pod_resources_socket.empty() ? DefaultPodResourcesSocket(options.dir)
                                                                   : options.pod_resources_socket),
        pod_resources(options.resource, [this] { return Records(); },
                      [this] {
                        MutexLock lock(mu);
                        return devices;
                      }),
        rng(options.seed) {}

  std::vector<PodRecord> Records() const TESSERA_EXCLUDES(mu) {
    MutexLock lock(mu);
    std::vector<PodRecord> out;
    for (const auto& [uid, r] : records) out.push_back(r);
    return out;
  }

  Status ServePodResources() {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(pod_resources_socket).parent_path(), ec);
    std::filesystem::remove(pod_resources_socket, ec);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + pod_resources_socket, grpc::InsecureServerCredentials());
    builder.RegisterService(&pod_resources);
    pod_resources_server = builder.BuildAndStart();
    if (!pod_resources_server) return Internal("kubelet-sim: cannot serve " + pod_resources_socket);
    return Status::Ok();
  }

  std::string KubeletSocket() const { return options.dir + "/kubelet.sock"; }

  // v1beta1::Registration::Service
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request, v1beta1::Empty*) override {
    if (request->version() != "v1beta1") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + request->version());
    }
    if (request->resource_name() != options.resource) {
      for (KubeletSim* other : forwards) {
        if (other->impl_->options.resource == request->resource_name()) {
          return other->impl_->Register(nullptr, request, nullptr);
        }
      }
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unexpected resource " + request->resource_name());
    }
    MutexLock lock(mu);
    endpoint = request->endpoint();
    ++registration_gen;
    ++registrations;
    if (stream_context) stream_context->TryCancel();
    cv.NotifyAll();
    return grpc::Status::OK;
  }

  Status Serve() {
    std::error_code ec;
    std::filesystem::create_directories(options.dir, ec);
    std::filesystem::remove(KubeletSocket(), ec);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + KubeletSocket(), grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server = builder.BuildAndStart();
    if (!server) return Internal("kubelet-sim: cannot serve " + KubeletSocket());
    return Status::Ok();
  }

  // Connects to each newly registered plugin and follows its ListAndWatch.
  void PluginLoop() {
    uint64_t seen = 0;
    while (!stopping.load()) {
      std::string ep;
      {
        MutexLock lock(mu);
        cv.WaitFor(mu, std::chrono::milliseconds(200), [&] {
          mu.AssertHeld();
          return stopping.load() || registration_gen != seen;
        });
        if (stopping.load()) return;
        if (registration_gen == seen) continue;
        seen = registration_gen;
        ep = endpoint;
      }
      auto channel = grpc::CreateChannel("unix://" + options.dir + "/" + ep, grpc::InsecureChannelCredentials());
      auto plugin = std::shared_ptr<v1beta1::DevicePlugin::Stub>(v1beta1::DevicePlugin::NewStub(channel));
      v1beta1::DevicePluginOptions plugin_options;
      {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        grpc::Status st = plugin->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &plugin_options);
        if (!st.ok()) {
          spdlog::warn("kubelet-sim: GetDevicePluginOptions: {}", st.error_message());
          continue;
        }
      }
      auto ctx = std::make_shared<grpc::ClientContext>();
      {
        MutexLock lock(mu);
        stub = plugin;
        preferred_available = plugin_options.get_preferred_allocation_available();
        stream_context = ctx;
      }
      auto reader = plugin->ListAndWatch(ctx.get(), v1beta1::Empty());
      v1beta1::ListAndWatchResponse response;
      while (reader->Read(&response)) {
        std::vector<SimDevice> list;
        for (const auto& d : response.devices()) list.push_back({d.id(), d.health()});
        // The Node's status first, so whoever sees the new list sees the Node agree.
        PublishNodeStatus(list);
        MutexLock lock(mu);
        devices = std::move(list);
      }
      (void)reader->Finish();
      std::vector<SimDevice> broken;
      {
        MutexLock lock(mu);
        if (stream_context != ctx) continue;
        stream_context.reset();
        stub.reset();
        // As the kubelet does when the stream breaks: the devices are unusable.
        for (auto& d : devices) d.health = "Unhealthy";
        broken = devices;
      }
      if (!stopping.load()) PublishNodeStatus(broken);
    }
  }

  // The kubelet's node-status role for the resource: capacity counts every
  // device the plugin listed, allocatable the healthy ones. PATCHes the Node's
  // status subresource only when a count changed; a failure is logged and
  // retried with the next list. Plugin thread only.
  void PublishNodeStatus(const std::vector<SimDevice>& list) {
    const auto capacity = static_cast<int64_t>(list.size());
    const auto allocatable = static_cast<int64_t>(
        std::count_if(list.begin(), list.end(), [](const SimDevice& d) { return d.health == "Healthy"; }));
    if (capacity == published_capacity && allocatable == published_allocatable) return;
    const json patch = {{"status",
                         {{"capacity", {{options.resource, std::to_string(capacity)}}},
                          {"allocatable", {{options.resource, std::to_string(allocatable)}}}}}};
    auto st = client.Patch(kube::NodePath(options.node) + "/status", kube::PatchType::kMerge, patch);
    if (!st.ok()) {
      spdlog::warn("kubelet-sim: status of node {}: {}", options.node, st.status().message());
      return;
    }
    published_capacity = capacity;
    published_allocatable = allocatable;
  }

  void PodLoop() {
    while (!stopping.load()) {
      std::this_thread::sleep_for(options.poll);
      if (paused.load()) continue;
      auto pods = client.List(kube::PodsPath(""), "", "spec.nodeName=" + options.node);
      if (!pods.ok()) {
        spdlog::warn("kubelet-sim: listing pods: {}", pods.status().message());
        continue;
      }
      std::vector<json> items = (*pods)["items"].get<std::vector<json>>();
      ReleaseGone(items);
      if (options.serve_registration) FinishDeletions(items);
      std::sort(items.begin(), items.end(), [](const json& a, const json& b) {
        return std::make_pair(Str(a["metadata"], "creationTimestamp"), Str(a["metadata"], "name")) <
               std::make_pair(Str(b["metadata"], "creationTimestamp"), Str(b["metadata"], "name"));
      });
      for (const auto& pod : items) {
        if (stopping.load() || paused.load()) break;
        Admit(pod);
      }
    }
  }

  void ReleaseGone(const std::vector<json>& items) {
    std::set<std::string> live;
    for (const auto& pod : items) {
      const std::string phase = Str(pod["status"], "phase");
      if (phase != "Succeeded" && phase != "Failed") live.insert(Str(pod["metadata"], "uid"));
    }
    MutexLock lock(mu);
    for (auto it = in_use.begin(); it != in_use.end();) {
      it = live.count(it->first) ? std::next(it) : in_use.erase(it);
    }
    for (auto it = records.begin(); it != records.end();) {
      it = live.count(it->first) ? std::next(it) : records.erase(it);
    }
  }

  // The kubelet's last step for a pod being deleted: once its containers
  // have stopped (here at once: nothing runs) it deletes the pod with grace
  // period 0 and the pod's uid as a precondition, which removes it from the
  // API server. Without this step a graceful delete (kubectl delete, a
  // controller scaling down, an eviction) leaves the pod Terminating until
  // someone forces it. Done by the stand-in that serves kubelet.sock (the
  // node's one kubelet), for every pod of its node, even while paused; once
  // per pod, retried with the next list only when the call failed.
  void FinishDeletions(const std::vector<json>& items) {
    std::set<std::string> deleting;
    for (const auto& pod : items) {
      const json& meta = pod["metadata"];
      if (!meta.contains("deletionTimestamp")) continue;
      const std::string uid = Str(meta, "uid"), ns = Str(meta, "namespace"), name = Str(meta, "name");
      deleting.insert(uid);
      if (finished.count(uid)) continue;
      const Status st = client.Delete(kube::PodPath(ns, name), 0, uid);
      if (st.ok() || st.code() == StatusCode::kNotFound || st.code() == StatusCode::kFailedPrecondition) {
        finished.insert(uid);
        spdlog::info("kubelet-sim: pod {}/{} deleted: its containers stopped", ns, name);
      } else {
        spdlog::warn("kubelet-sim: finishing the deletion of {}/{}: {}", ns, name, st.message());
      }
    }
    for (auto it = finished.begin(); it != finished.end();) {
      it = deleting.count(*it) ? std::next(it) : finished.erase(it);
    }
  }

  // Picks `n` IDs as the device manager does; empty when too few are free.
  std::vector<std::string> Choose(const std::shared_ptr<v1beta1::DevicePlugin::Stub>& plugin, bool ask, size_t n,
                                  const std::set<std::string>& taken) {
    std::vector<std::string> available;
    {
      MutexLock lock(mu);
      for (const auto& d : devices) {
        if (d.health == "Healthy" && !taken.count(d.id)) available.push_back(d.id);
      }
    }
    if (available.size() < n) return {};
    std::shuffle(available.begin(), available.end(), rng);  // Go map order: arbitrary
    std::vector<std::string> chosen;
    if (ask) {
      v1beta1::PreferredAllocationRequest request;
      auto* c = request.add_container_requests();
      for (const auto& id : available) c->add_available_deviceids(id);
      c->set_allocation_size(static_cast<int32_t>(n));
      v1beta1::PreferredAllocationResponse response;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      if (plugin->GetPreferredAllocation(&ctx, request, &response).ok() && response.container_responses_size() > 0) {
        for (const auto& id : response.container_responses(0).deviceids()) {
          if (chosen.size() < n && std::find(available.begin(), available.end(), id) != available.end() &&
              std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
            chosen.push_back(id);
          }
        }
      }
    }
    for (const auto& id : available) {
      if (chosen.size() == n) break;
      if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
    }
    return chosen;
  }

  void Admit(const json& pod) {
    const json& meta = pod["metadata"];
    const std::string uid = Str(meta, "uid"), ns = Str(meta, "namespace"), name = Str(meta, "name");
    if (Str(pod["status"], "phase") != "Pending" || meta.contains("deletionTimestamp")) return;
    std::shared_ptr<v1beta1::DevicePlugin::Stub> plugin;
    bool ask = false;
    std::set<std::string> taken;
    {
      MutexLock lock(mu);
      if (admitted.count(uid) || !stub) return;
      plugin = stub;
      ask = preferred_available;
      for (const auto& [other, ids] : in_use) taken.insert(ids.begin(), ids.end());
    }
    json allocations = json::object();
    PodRecord record{ns, name, {}};
    std::vector<std::string> mine;
    std::string failure;
    for (const char* list : {"initContainers", "containers"}) {
      if (!pod["spec"].contains(list)) continue;
      for (const auto& c : pod["spec"][list]) {
        const json limits = c.value("resources", json::object()).value("limits", json::object());
        record.containers.push_back({Str(c, "name"), {}});
        if (!limits.contains(options.resource) || !failure.empty()) continue;
        const size_t n = std::stoul(limits[options.resource].get<std::string>());
        std::vector<std::string> ids = Choose(plugin, ask, n, taken);
        if (ids.empty()) {
          failure = "Insufficient " + options.resource;
          break;
        }
        v1beta1::AllocateRequest request;
        auto* creq = request.add_container_requests();
        for (const auto& id : ids) creq->add_devices_ids(id);
        v1beta1::AllocateResponse response;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        grpc::Status st = plugin->Allocate(&ctx, request, &response);
        if (!st.ok() || response.container_responses_size() < 1) {
          failure = "Allocate failed due to " + st.error_message() + ", which is unexpected";
          break;
        }
        const auto& r = response.container_responses(0);
        json mounts = json::array();
        for (const auto& m : r.mounts()) {
          mounts.push_back({{"containerPath", m.container_path()}, {"hostPath", m.host_path()},
                            {"readOnly", m.read_only()}});
        }
        json envs(std::map<std::string, std::string>(r.envs().begin(), r.envs().end()));
        allocations[Str(c, "name")] = {{"deviceIDs", ids}, {"envs", envs}, {"mounts", mounts}};
        taken.insert(ids.begin(), ids.end());
        mine.insert(mine.end(), ids.begin(), ids.end());
        record.containers.back().second = ids;
      }
    }
    if (allocations.empty() && failure.empty()) return;  // no device of ours
    {
      MutexLock lock(mu);
      admitted.insert(uid);
      if (failure.empty()) {
        in_use[uid] = mine;
        records[uid] = std::move(record);
      }
    }
    const std::string path = kube::PodPath(ns, name);
    json status;
    if (failure.empty()) {
      (void)client.Patch(path, kube::PatchType::kMerge,
                         {{"metadata", {{"annotations", {{kSimAllocationsAnnotation, allocations.dump()}}}}}});
      status = RunningStatus(pod);
      spdlog::info("kubelet-sim: admitted {}/{} with {}", ns, name, allocations.dump());
    } else {
      status = {{"status", {{"phase", "Failed"}, {"reason", "UnexpectedAdmissionError"}, {"message", failure}}}};
      spdlog::info("kubelet-sim: rejected {}/{}: {}", ns, name, failure);
    }
    if (auto st = client.Patch(path + "/status", kube::PatchType::kStrategicMerge, status); !st.ok()) {
      spdlog::warn("kubelet-sim: status of {}/{}: {}", ns, name, st.status().message());
    }
  }
};

KubeletSim::KubeletSim(kube::Client client, KubeletSimOptions options)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(options))) {}

KubeletSim::~KubeletSim() { Stop(); }

void KubeletSim::Forward(KubeletSim* other) { impl_->forwards.push_back(other); }

Status KubeletSim::Start() {
  if (impl_->options.serve_registration) TESSERA_RETURN_IF_ERROR(impl_->Serve());
  TESSERA_RETURN_IF_ERROR(impl_->ServePodResources());
  impl_->plugin_thread = std::thread([this] { impl_->PluginLoop(); });
  impl_->pod_thread = std::thread([this] { impl_->PodLoop(); });
  return Status::Ok();
}

void KubeletSim::Stop() {
  impl_->stopping.store(true);
  {
    MutexLock lock(impl_->mu);
    if (impl_->stream_context) impl_->stream_context->TryCancel();
    impl_->cv.NotifyAll();
  }
  if (impl_->plugin_thread.joinable()) impl_->plugin_thread.join();
  if (impl_->pod_thread.joinable()) impl_->pod_thread.join();
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->server.reset();
  }
  if (impl_->pod_resources_server) {
    impl_->pod_resources_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->pod_resources_server.reset();
  }
}

std::string KubeletSim::PodResourcesSocket() const { return impl_->pod_resources_socket; }

Status KubeletSim::CorruptRecord(const std::string& ns, const std::string& pod, const std::string& container,
                                 const std::vector<std::string>& device_ids) {
  MutexLock lock(impl_->mu);
  for (auto& [uid, record] : impl_->records) {
    if (record.ns != ns || record.name != pod) continue;
    for (auto& [name, ids] : record.containers) {
      if (name == container) {
        ids = device_ids;
        return Status::Ok();
      }
    }
  }
  return NotFound("kubelet-sim: no record of container " + container + " in pod " + ns + "/" + pod);
}

void KubeletSim::SetPaused(bool paused) { impl_->paused.store(paused); }

std::vector<SimDevice> KubeletSim::Devices() const {
  MutexLock lock(impl_->mu);
  return impl_->devices;
}

int KubeletSim::Registrations() const {
  MutexLock lock(impl_->mu);
  return impl_->registrations;
}

bool KubeletSim::WaitForDevices(const std::function<bool(const std::vector<SimDevice>&)>& done,
                                std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done(Devices())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done(Devices());
}

Status KubeletSim::Restart(bool wipe_plugin_sockets) {
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->server.reset();
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(impl_->options.dir, ec)) {
    const bool ours = entry.path().filename() == "kubelet.sock";
    if (entry.is_socket() && (ours || wipe_plugin_sockets)) std::filesystem::remove(entry.path(), ec);
  }
  return impl_->Serve();
}

}  // namespace tessera::testing
