#include "dra/kubelet_plugin.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/pod_view.h"
#include "dra/cdi.h"
#include "kube/api_error.h"
#include "kube/paths.h"
#include "node/arbiter_loop.h"
#include "node/claim_record.h"
#include "node/node_pods.h"

namespace tessera::dra {

namespace fs = std::filesystem;

std::string RegistrationSocket(const KubeletPluginOptions& options) {
  return options.registry_dir + "/" + options.driver + "-reg.sock";
}
std::string DraSocket(const KubeletPluginOptions& options) {
  return options.plugins_dir + "/" + options.driver + "/dra.sock";
}

namespace {

grpc::Status Ok() { return grpc::Status::OK; }

// Writes `content` to `path` through a temporary file in the same folder
// renamed over it, so a reader sees the old file or the new one, never part.
// The temporary name does not end in .json, so CDI readers skip it.
Status WriteAtomically(const std::string& path, const std::string& content) {
  const fs::path target(path);
  const fs::path temp = target.parent_path() / ("." + target.filename().string() + ".tmp");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << content;
    out.close();
    if (!out) return Internal("writing " + temp.string() + " failed");
  }
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    return Internal("renaming " + temp.string() + " to " + path + ": " + ec.message());
  }
  return Status::Ok();
}

// `devices` as we write them: the API server adds each taint's timeAdded.
nlohmann::json WithoutTimeAdded(nlohmann::json devices) {
  for (nlohmann::json& d : devices) {
    if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
    for (nlohmann::json& t : d["taints"]) {
      if (t.is_object()) t.erase("timeAdded");
    }
  }
  return devices;
}

}  // namespace

Result<node::ComputeAnnotations> ClaimCompute(kube::Api& api, const nlohmann::json& claim,
                                              const core::ResourceNames& names, spdlog::logger& log) {
  std::optional<node::ComputeAnnotations> taken;
  std::string taken_from;
  std::vector<std::string> differing;
  for (const node::PodRef& ref : ReservedPods(claim)) {
    const std::string pod_key = ref.ns + "/" + ref.name;
    auto object = api.Get(kube::PodPath(ref.ns, ref.name));
    if (!object.ok()) {
      if (object.status().code() == StatusCode::kNotFound) continue;  // gone: the next reserved pod
      if (!taken) {
        return Status(object.status().code(), "reading pod " + pod_key + " (the claim's annotations): " +
                                                  std::string(object.status().message()));
      }
      continue;  // only compared: the first pod's are taken anyway
    }
    auto pod = core::DecodePod(*object, names);
    if (!pod.ok()) {
      if (!taken) return Status(pod.status().code(), "pod " + pod_key + ": " + std::string(pod.status().message()));
      continue;
    }
    if (!ref.uid.empty() && pod->uid != ref.uid) continue;  // another pod of that name
    const node::ComputeAnnotations compute = node::ComputeAnnotationsOf(*pod);
    if (!taken) {
      taken = compute;
      taken_from = pod_key;
      if (pod->isolation_annotation == core::IsolationName(core::Isolation::kMps) ||
          pod->isolation_annotation == core::IsolationName(core::Isolation::kNone)) {
        log.warn("pod {} asks tessera.io/isolation: {}, which is not offered under DRA: its claim is isolated "
                 "by the interception library",
                 pod_key, pod->isolation_annotation);
      }
    } else if (compute != *taken) {
      differing.push_back(pod_key);
    }
  }
  if (!differing.empty()) {
    std::string list;
    for (const std::string& d : differing) list += (list.empty() ? "" : ", ") + d;
    const nlohmann::json meta = claim.value("metadata", nlohmann::json::object());
    log.warn("the pods of claim {}/{} differ in tessera.io/priority, gpu-core-policy or gpu-core-limit: the "
             "claim takes those of {}, the first it is reserved for (not those of {})",
             meta.value("namespace", ""), meta.value("name", ""), taken_from, list);
  }
  return taken.value_or(node::ComputeAnnotations{});
}

// ---- SlicePublisher

SlicePublisher::SlicePublisher(kube::Api& api, KubeletPluginOptions options) : api_(api), options_(std::move(options)) {}

Result<bool> SlicePublisher::Publish(const std::vector<core::GpuInfo>& gpus,
                                     const std::map<int, core::GpuShare>& pod_held) {
  SliceOptions slice_options{options_.driver, 1, options_.node_uid, pod_held};
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json wanted, ResourceSliceFor(options_.node, gpus, slice_options));
  const std::string name = wanted["metadata"]["name"].get<std::string>();
  auto current = api_.Get(ResourceSlicePath(name));
  if (!current.ok()) {
    if (current.status().code() != StatusCode::kNotFound) return current.status();
    auto created = api_.Create(ResourceSlicesPath(), wanted);
    if (!created.ok()) return created.status();
    return true;
  }
  const nlohmann::json spec = current->value("spec", nlohmann::json::object());
  nlohmann::json old_pool = spec.value("pool", nlohmann::json::object());
  const int64_t generation = old_pool.value("generation", int64_t{0});
  // The same devices, driver and node: nothing to write.
  if (WithoutTimeAdded(spec.value("devices", nlohmann::json::array())) == wanted["spec"]["devices"] &&
      spec.value("driver", "") == options_.driver && spec.value("nodeName", "") == options_.node &&
      old_pool.value("name", "") == options_.node) {
    return false;
  }
  wanted["spec"]["pool"]["generation"] = generation + 1;
  nlohmann::json patch = {
      {"metadata", {{"resourceVersion", (*current)["metadata"].value("resourceVersion", "")}}},
      {"spec", wanted["spec"]},
  };
  auto patched = api_.Patch(ResourceSlicePath(name), kube::PatchType::kMerge, patch);
  if (!patched.ok()) return patched.status();
  return true;
}

// ---- DraService

DraService::DraService(kube::Api& api, KubeletPluginOptions options, std::shared_ptr<spdlog::logger> log,
                       node::GpuBook* book)
    : api_(api),
      options_(std::move(options)),
      log_(std::move(log)),
      own_book_(book == nullptr ? std::make_unique<node::GpuBook>() : nullptr),
      book_(book != nullptr ? *book : *own_book_) {}

Status DraService::RestorePrepared() {
  MutexLock lock(files_mu_);
  TESSERA_ASSIGN_OR_RETURN(node::ClaimRecords found, node::ReadClaimRecords(options_.paths.region_root_host));
  for (const std::string& why : found.unreadable) {
    log_->warn("prepared claim record {}; its shares are not booked", why);
  }
  for (const node::ClaimRecord& record : found.records) book_.Restore(record.holder);
  if (!found.records.empty()) log_->info("booked {} claim(s) prepared before this start", found.records.size());
  return Status::Ok();
}

Status DraService::SyncPods() {
  const uint64_t before = book_.Generation();
  auto pods = node::ListNodePods(api_, options_.node, options_.paths.resources);
  if (!pods.ok()) {
    return Status(pods.status().code(), "listing the node's pods (to count the GPUs' device-plugin shares): " +
                                            std::string(pods.status().message()));
  }
  book_.SyncPods(*pods, options_.node, before);
  return Status::Ok();
}

Status DraService::BookClaim(const node::GpuHolder& holder, const std::vector<core::GpuInfo>& gpus) {
  TESSERA_RETURN_IF_ERROR(SyncPods());
  return book_.Book(holder, gpus);
}

void DraService::SetGpus(std::vector<core::GpuInfo> gpus) {
  MutexLock lock(gpus_mu_);
  gpus_ = std::move(gpus);
}

std::vector<core::GpuInfo> DraService::Gpus() const {
  MutexLock lock(gpus_mu_);
  return gpus_;
}

Result<std::vector<drapb::Device>> DraService::Prepare(const ClaimRef& claim) {
  const std::string who = "claim " + claim.Key() + " (uid " + claim.uid + ")";
  auto object = api_.Get(ResourceClaimPath(claim.ns, claim.name));
  if (!object.ok()) {
    return Status(object.status().code(), who + ": reading it: " + std::string(object.status().message()));
  }
  const std::string uid = (*object)["metadata"].value("uid", "");
  if (uid != claim.uid) {
    return FailedPrecondition(who + ": the API server's claim of that name has uid " + uid +
                              " (the kubelet's claim was deleted and another created)");
  }
  const std::vector<core::GpuInfo> gpus = Gpus();
  auto shares = SharesFromClaim(*object, options_.driver, options_.node, gpus);
  if (!shares.ok()) return shares.status();
  auto compute = ClaimCompute(api_, *object, options_.paths.resources, *log_);
  if (!compute.ok()) {
    return Status(compute.status().code(), who + ": " + std::string(compute.status().message()));
  }
  auto spec = CdiSpecFor(claim, *shares, gpus, options_.paths, *compute);
  if (!spec.ok()) return spec.status();

  node::GpuHolder holder{node::GpuHolder::Kind::kClaim, claim.uid, claim.Key(), {}};
  for (const ClaimShare& share : *shares) holder.shares.push_back(share.gpu);
  if (Status booked = BookClaim(holder, gpus); !booked.ok()) {
    return Status(booked.code(), who + ": " + std::string(booked.message()));
  }
  {
    MutexLock lock(files_mu_);
    Status written = WriteFiles(claim, node::ClaimRecord{holder, ReservedPods(*object)}, *spec, *compute);
    if (!written.ok()) {
      book_.Release(claim.uid);
      return Status(written.code(), who + ": " + std::string(written.message()));
    }
  }

  std::vector<drapb::Device> devices;
  for (const ClaimShare& share : *shares) {
    drapb::Device d;
    for (const std::string& r : share.requests) d.add_request_names(r);
    d.set_pool_name(share.pool);
    d.set_device_name(share.device);
    d.add_cdi_device_ids(CdiDeviceId(claim.uid));
    if (!share.share_id.empty()) d.set_share_id(share.share_id);
    devices.push_back(std::move(d));
  }
  log_->info("prepared {}: {} GPU(s), CDI device {}", who, devices.size(), CdiDeviceId(claim.uid));
  return devices;
}

Status DraService::WriteFiles(const ClaimRef& claim, const node::ClaimRecord& record, const CdiSpec& spec,
                              const node::ComputeAnnotations& compute) {
  std::error_code ec;
  fs::create_directories(spec.region_host_dir, ec);
  if (ec) return Internal("creating region folder " + spec.region_host_dir + ": " + ec.message());
  // Without its GPUs' boards the claim's launches are charged as measured: the prepare goes on.
  std::vector<std::string> uuids;
  for (const core::GpuShare& g : record.holder.shares) uuids.push_back(g.uuid);
  if (Status boards = node::PrepareBoards(node::BoardHostDir(options_.paths), uuids); !boards.ok()) {
    log_->warn("claim {}: {} (its launches are charged as measured beside other contexts)", claim.Key(),
               boards.message());
  }
  TESSERA_RETURN_IF_ERROR(WriteAtomically(node::ClaimRecordPath(options_.paths.region_root_host, claim.uid),
                                          node::EncodeClaimRecord(record).dump() + "\n"));
  // The arbiter's record, beside the region folder (out of the containers' reach).
  node::ArbiterContainer arbiter;
  arbiter.key = claim.uid + "/" + node::kClaimRegionContainer;
  arbiter.region_dir = spec.region_host_dir;
  arbiter.policy = compute.core_hard ? node::CorePolicy::kHard : node::CorePolicy::kShare;
  arbiter.priority = compute.priority;
  for (const core::GpuShare& g : record.holder.shares) {
    node::ArbiterSlot slot;
    slot.gpu = g.index;
    slot.share_ppm = static_cast<uint32_t>(std::clamp<int64_t>(g.core_milli, 0, 1000) * 1000);
    slot.limit_ppm = static_cast<uint32_t>(std::clamp<int64_t>(compute.core_limit_milli, 0, 1000) * 1000);
    arbiter.slots.push_back(slot);
  }
  if (Status st = node::WriteArbiterRecord(spec.region_host_dir, arbiter); !st.ok()) {
    log_->warn("claim {}: {}; its compute share stays static", claim.Key(), st.message());
  }
  fs::create_directories(options_.cdi_dir, ec);
  if (ec) return Internal("creating CDI folder " + options_.cdi_dir + ": " + ec.message());
  return WriteAtomically(options_.cdi_dir + "/" + CdiSpecFileName(claim.uid), spec.json.dump(2) + "\n");
}

Status DraService::Unprepare(const ClaimRef& claim) {
  const std::string who = "claim " + claim.Key() + " (uid " + claim.uid + ")";
  // The uid names files and folders: refuse what could leave the folders.
  if (claim.uid.empty() || claim.uid.find('/') != std::string::npos || claim.uid == "." || claim.uid == "..")
    return InvalidArgument(who + ": not a claim uid");
  MutexLock lock(files_mu_);
  std::error_code ec;
  const std::string spec = options_.cdi_dir + "/" + CdiSpecFileName(claim.uid);
  fs::remove(spec, ec);
  if (ec) return Internal(who + ": removing " + spec + ": " + ec.message());
  const std::string region = ClaimRegionRoot(options_.paths) + "/" + claim.uid;
  fs::remove_all(region, ec);
  if (ec) return Internal(who + ": removing region folder " + region + ": " + ec.message());
  book_.Release(claim.uid);
  log_->info("unprepared {}", who);
  return Status::Ok();
}

grpc::Status DraService::NodePrepareResources(grpc::ServerContext*, const drapb::NodePrepareResourcesRequest* request,
                                              drapb::NodePrepareResourcesResponse* response) {
  for (const drapb::Claim& c : request->claims()) {
    drapb::NodePrepareResourceResponse& out = (*response->mutable_claims())[c.uid()];
    auto devices = Prepare({c.namespace_(), c.name(), c.uid()});
    if (!devices.ok()) {
      log_->warn("NodePrepareResources: {}", devices.status().message());
      out.set_error(std::string(devices.status().message()));
      continue;
    }
    for (drapb::Device& d : *devices) *out.add_devices() = std::move(d);
  }
  return Ok();
}

grpc::Status DraService::NodeUnprepareResources(grpc::ServerContext*,
                                                const drapb::NodeUnprepareResourcesRequest* request,
                                                drapb::NodeUnprepareResourcesResponse* response) {
  for (const drapb::Claim& c : request->claims()) {
    drapb::NodeUnprepareResourceResponse& out = (*response->mutable_claims())[c.uid()];
    if (Status st = Unprepare({c.namespace_(), c.name(), c.uid()}); !st.ok()) {
      log_->warn("NodeUnprepareResources: {}", st.message());
      out.set_error(std::string(st.message()));
    }
  }
  return Ok();
}

// ---- RegistrationService

RegistrationService::RegistrationService(KubeletPluginOptions options, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)), log_(std::move(log)) {}

grpc::Status RegistrationService::GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                                          ::pluginregistration::PluginInfo* response) {
  response->set_type(kDraPluginType);
  response->set_name(options_.driver);
  response->set_endpoint(DraSocket(options_));
  response->add_supported_versions(kDraServiceVersion);
  response->add_supported_versions(kDraHealthService);
  return Ok();
}

grpc::Status RegistrationService::NotifyRegistrationStatus(grpc::ServerContext*,
                                                           const ::pluginregistration::RegistrationStatus* request,
                                                           ::pluginregistration::RegistrationStatusResponse*) {
  if (request->plugin_registered()) {
    log_->info("the kubelet registered DRA driver {}", options_.driver);
  } else {
    log_->error("the kubelet refused DRA driver {}: {}", options_.driver, request->error());
  }
  MutexLock lock(mu_);
  registered_ = request->plugin_registered();
  return Ok();
}

std::optional<bool> RegistrationService::Registered() const {
  MutexLock lock(mu_);
  return registered_;
}

// ---- KubeletPlugin

KubeletPlugin::KubeletPlugin(kube::Api& api, KubeletPluginOptions options, std::shared_ptr<spdlog::logger> log,
                             node::GpuBook* book)
    : api_(api),
      options_(options),
      log_(log),
      publisher_(api, options),
      dra_(api, options, log, book),
      health_(options.node, log),
      registration_(options, log) {}

KubeletPlugin::~KubeletPlugin() { Stop(); }

namespace {
std::string HeldText(const std::map<int, core::GpuShare>& pod_held) {
  std::string out;
  for (const auto& [index, held] : pod_held) {
    const int64_t tenth = held.core_milli % 10;
    out += (out.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(index) + ": " +
           std::to_string(held.mem_mib) + " MiB and " + std::to_string(held.core_milli / 10) +
           (tenth != 0 ? "." + std::to_string(tenth) : "") + " percent";
  }
  return out.empty() ? "none" : out;
}
}  // namespace

Status KubeletPlugin::SetGpus(const std::vector<core::GpuInfo>& gpus) {
  dra_.SetGpus(gpus);
  health_.SetGpus(gpus);
  MutexLock lock(mu_);
  Published wanted{gpus, dra_.book().PodHeld(gpus)};
  if (published_ && *published_ == wanted) return Status::Ok();
  auto wrote = publisher_.Publish(wanted.gpus, wanted.pod_held);
  if (!wrote.ok()) {
    return Status(wrote.status().code(), "publishing ResourceSlice " + SliceName(options_.node, options_.driver) +
                                             ": " + std::string(wrote.status().message()));
  }
  if (*wrote) {
    log_->info("published ResourceSlice {}: {} GPU(s), less what device-plugin pods hold ({})",
               SliceName(options_.node, options_.driver), gpus.size(), HeldText(wanted.pod_held));
  }
  published_ = std::move(wanted);
  return Status::Ok();
}

void KubeletPlugin::Republish(const char* what) {
  MutexLock lock(mu_);
  if (!published_) return;  // never published: SetGpus does it
  const std::string name = SliceName(options_.node, options_.driver);
  auto wrote = publisher_.Publish(published_->gpus, published_->pod_held);
  if (!wrote.ok()) {
    published_.reset();  // the next SetGpus tries again
    log_->warn("ResourceSlice {} was {}; publishing it again: {} (retried every resync)", name, what,
               wrote.status().message());
    return;
  }
  if (*wrote) log_->info("ResourceSlice {} was {}; published it again", name, what);
}

void KubeletPlugin::PublishPodHeld() {
  MutexLock lock(mu_);
  if (!published_) return;  // never published: SetGpus does it, with the book as it is then
  Published wanted{published_->gpus, dra_.book().PodHeld(published_->gpus)};
  if (wanted == *published_) return;
  const std::string name = SliceName(options_.node, options_.driver);
  auto wrote = publisher_.Publish(wanted.gpus, wanted.pod_held);
  if (!wrote.ok()) {
    published_.reset();  // the next SetGpus tries again
    log_->warn("ResourceSlice {}: publishing what device-plugin pods leave ({} held): {} (retried every resync)",
               name, HeldText(wanted.pod_held), wrote.status().message());
    return;
  }
  log_->info("ResourceSlice {}: device-plugin pods changed; published what they leave ({} held)", name,
             HeldText(wanted.pod_held));
  published_ = std::move(wanted);
}

void KubeletPlugin::NotePodsChanged() {
  MutexLock lock(loop_mu_);
  pods_changed_ = true;
  loop_wake_.NotifyAll();
}

void KubeletPlugin::Loop() {
  using Clock = std::chrono::steady_clock;
  const bool listing = options_.pod_list_interval.count() > 0;
  Clock::time_point next_list = Clock::now();  // the first at once: the pods handed out before this start
  MutexLock lock(loop_mu_);
  while (!stopping_) {
    if (pods_changed_) {
      // Changes close together (a LIST dropping several pods) become one write.
      loop_wake_.WaitFor(loop_mu_, options_.republish_delay, [this] {
        loop_mu_.AssertHeld();
        return stopping_;
      });
      if (stopping_) break;
      pods_changed_ = false;
      lock.Unlock();
      PublishPodHeld();
      lock.Lock();
      continue;
    }
    if (listing && Clock::now() >= next_list) {
      lock.Unlock();
      // Pods deleted leave the book here (the observer then sets pods_changed_).
      if (Status st = dra_.SyncPods(); !st.ok()) log_->warn("DRA driver: {}", st.message());
      lock.Lock();
      next_list = Clock::now() + options_.pod_list_interval;
      continue;
    }
    auto woken = [this] {
      loop_mu_.AssertHeld();
      return stopping_ || pods_changed_;
    };
    if (listing) {
      loop_wake_.WaitUntil(loop_mu_, next_list, woken);
    } else {
      loop_wake_.Wait(loop_mu_, woken);
    }
  }
}

namespace {
Result<std::unique_ptr<grpc::Server>> ServeOn(const std::string& socket, const std::vector<grpc::Service*>& services) {
  std::error_code ec;
  fs::create_directories(fs::path(socket).parent_path(), ec);
  if (ec) return Internal("creating the folder of " + socket + ": " + ec.message());
  fs::remove(socket, ec);  // a stale socket from a previous run
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return Internal("cannot serve on " + socket);
  return server;
}
}  // namespace

Status KubeletPlugin::Start() {
  if (dra_server_ != nullptr || slice_watch_ != nullptr) return FailedPrecondition("DRA kubelet plugin already started");
  TESSERA_RETURN_IF_ERROR(dra_.RestorePrepared());
  kube::InformerOptions watch_options;
  watch_options.field_selector = "metadata.name=" + SliceName(options_.node, options_.driver);
  slice_watch_ = std::make_unique<kube::Informer>(api_, ResourceSlicesPath(), watch_options);
  TESSERA_RETURN_IF_ERROR(slice_watch_->AddHandlers({
      .on_update = [this](const nlohmann::json&, const nlohmann::json&) { Republish("changed"); },
      .on_delete = [this](const nlohmann::json&) { Republish("deleted"); },
  }));
  TESSERA_RETURN_IF_ERROR(slice_watch_->Start());
  {
    MutexLock lock(loop_mu_);
    stopping_ = false;
  }
  dra_.book().SetPodsObserver([this] { NotePodsChanged(); });
  loop_ = std::thread([this] { Loop(); });
  auto dra = ServeOn(DraSocket(options_), {&dra_, &health_});
  if (!dra.ok()) {
    Stop();
    return dra.status();
  }
  dra_server_ = std::move(dra).value();
  auto reg = ServeOn(RegistrationSocket(options_), {&registration_});
  if (!reg.ok()) {
    Stop();
    return reg.status();
  }
  registration_server_ = std::move(reg).value();
  log_->info("DRA driver {}: registration on {}, service on {}", options_.driver, RegistrationSocket(options_),
             DraSocket(options_));
  return Status::Ok();
}

void KubeletPlugin::Stop() {
  if (slice_watch_ != nullptr) slice_watch_->Stop();
  if (loop_.joinable()) {
    dra_.book().SetPodsObserver({});  // waits for a call in flight
    {
      MutexLock lock(loop_mu_);
      stopping_ = true;
      loop_wake_.NotifyAll();
    }
    loop_.join();
  }
  health_.Shutdown();  // open streams end, so the server's shutdown does not wait for them
  std::error_code ec;
  if (registration_server_ != nullptr) {
    registration_server_->Shutdown();
    registration_server_.reset();
    fs::remove(RegistrationSocket(options_), ec);
  }
  if (dra_server_ != nullptr) {
    dra_server_->Shutdown();
    dra_server_.reset();
    fs::remove(DraSocket(options_), ec);
  }
}

}  // namespace tessera::dra
