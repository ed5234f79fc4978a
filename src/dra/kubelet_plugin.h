// tessera-node's DRA kubelet plugin (driver gpu.tessera.io): the kubelet's
// plugin registration service on <registry_dir>/<driver>-reg.sock, the
// DRAPlugin v1 service on <plugins_dir>/<driver>/dra.sock, and the
// publisher of the node's ResourceSlice.
//
// NodePrepareResources, per claim: GET the ResourceClaim through kube::Api,
// check its uid is the kubelet's (a claim deleted and created again under
// the same name is another claim), read its shares (SharesFromClaim),
// create the claim's region folder, write its CDI spec (CdiSpecFor) into
// cdi_dir atomically (a temporary file renamed over the old one), and
// answer one Device per GPU, each naming the claim's one CDI device. A
// repeat recomputes and rewrites the same file, so it is idempotent.
// Before any file is written the claim is booked in the node's GpuBook
// (node/gpu_book.h), the one the device plugin's Allocate books its pods
// in: the node's pods are LISTed first (pods handed out before this agent
// started are booked, finished and gone ones dropped), then the claim is
// checked against them and every other prepared claim in one step. A claim
// that would over-commit a GPU gets RESOURCE_EXHAUSTED naming both holders,
// and nothing is written. The claim's shares are kept in a record beside
// its region folder (<region root>/dra/<uid>/holder.json, node/claim_record.h,
// with the pods the claim is reserved for), from which Start books the
// prepared claims again after a restart and the usage pass reads the claims'
// shares for /metrics and the usage annotation.
// The pod the claim is reserved for gives its compute annotations
// (ClaimCompute): TESSERA_GPU_CORE_POLICY=hard in the CDI env when asked,
// and an arbiter record <region root>/dra/<uid>/claim.arbiter.json beside the
// region folder (node::WriteArbiterRecord, with the priority, the policy and
// the burst ceiling), which the node's compute arbiter reads
// (node::RegionSource) as it reads a device-plugin container's.
// NodeUnprepareResources removes the spec file and the claim's region
// folder (the records with it) and releases the claim in the book; a claim
// never prepared is OK. A failure of one claim is that
// claim's `error` (it names the claim and the reason); the others go on.
//
// SlicePublisher: creates the node's ResourceSlice, or updates it (a merge
// patch guarded by resourceVersion, the pool's generation raised) when the
// devices changed; unchanged GPUs write nothing. Each GPU offers what the
// book's device-plugin pods leave of it (GpuBook::PodHeld; a GPU they fill
// is tainted, resource_slice.h): KubeletPlugin publishes again, one patch
// for changes that come together (republish_delay), when the pods' side of
// the book changes, and LISTs the node's pods every pod_list_interval so
// that pods deleted leave the book (a watch cache cannot drop them,
// gpu_book.h). Claims are not subtracted: kube-scheduler counts them
// against the published values itself. KubeletPlugin watches the
// slice from Start on and publishes it again at once when it is deleted or
// changed by someone else: a kubelet deletes every ResourceSlice of its node
// when it starts (and a driver's when its plugin has been gone 30 s), and
// would otherwise leave the node with nothing to allocate until the GPUs
// change (seen with kubelet 1.36: the slice never came back).
//
// Beside DRAPlugin the same endpoint serves the device-health stream
// (DraHealthService, health_service.h), which kubelets 1.36 and later open.
//
// The kubelet's plugin watcher finds the registration socket (also the one
// left from before a kubelet restart), so no folder watch is needed here.
//
// Thread-safety: SetGpus, the gRPC handlers, the slice watch and
// Prepare/Unprepare may run at once; claims are prepared and unprepared one
// at a time. Start and Stop from one thread, Start once. `api` must outlive
// the plugin.
//
//   dra::KubeletPlugin plugin(client, {.node = "node-1"}, log);
//   TESSERA_RETURN_IF_ERROR(plugin.SetGpus(gpus));   // publishes the slice
//   TESSERA_RETURN_IF_ERROR(plugin.Start());
#pragma once

#include <grpcpp/grpcpp.h>
#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/dra_names.h"
#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "dra/cdi.h"
#include "dra/claim.h"
#include "dra/health_service.h"
#include "dra/resource_slice.h"
#include "dra/v1/api.grpc.pb.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "node/claim_record.h"
#include "node/container_env.h"
#include "node/identify.h"
#include "node/gpu_book.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace tessera::dra {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

// The gRPC service names this plugin offers the kubelet (1.34 and later take "v1.DRAPlugin").
inline constexpr const char* kDraServiceVersion = "v1.DRAPlugin";
inline constexpr const char* kDraPluginType = "DRAPlugin";

struct KubeletPluginOptions {
  std::string node;  // this Node: the pool and the slice
  std::string driver = core::kDraDriver;
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";  // the kubelet's plugin watcher
  std::string plugins_dir = "/var/lib/kubelet/plugins";            // + /<driver>/dra.sock
  std::string cdi_dir = "/var/run/cdi";                            // where the runtime reads CDI specs
  std::string node_uid;      // non-empty: the slice is owned by the Node
  node::MountPaths paths;    // the library, preload and region root, as the device plugin's
  // How long a change to the book's device-plugin pods waits before the
  // slice is published again, so that changes close together are one write.
  std::chrono::milliseconds republish_delay{200};
  // Period of the LIST of the node's pods that drops deleted pods from the
  // book (and so gives their room back to claims); 0: none.
  std::chrono::milliseconds pod_list_interval{5000};
};

std::string RegistrationSocket(const KubeletPluginOptions& options);  // <registry_dir>/<driver>-reg.sock
std::string DraSocket(const KubeletPluginOptions& options);           // <plugins_dir>/<driver>/dra.sock

// How the claim `claim` (a ResourceClaim object) is to be arbitrated: the
// compute annotations (node::ComputeAnnotationsOf: tessera.io/priority,
// tessera.io/gpu-core-policy, tessera.io/gpu-core-limit) of the first pod
// in its status.reservedFor that the API server still has under that uid
// (GET; a pod gone or replaced is skipped). A claim shared by pods whose
// annotations differ takes the first pod's, and a warning names the pods
// that differ; a pod asking tessera.io/isolation: mps is warned about (MPS
// is not offered under DRA; the claim gets the hook). Defaults when the
// claim is reserved for no pod. Errors: the API's (other than NOT_FOUND)
// and DecodePod's, naming the pod; the caller fails the prepare, which the
// kubelet retries.
Result<node::ComputeAnnotations> ClaimCompute(kube::Api& api, const nlohmann::json& claim,
                                              const core::ResourceNames& names, spdlog::logger& log);

// Creates or updates the node's ResourceSlice.
class SlicePublisher {
 public:
  SlicePublisher(kube::Api& api, KubeletPluginOptions options);
  // true when it wrote (created or changed the slice), false when the slice
  // already said this (the taints' timeAdded, which the API server sets, not
  // compared). `pod_held`: what device-plugin pods hold, per GPU index
  // (SliceOptions::pod_held). Errors: ResourceSliceFor's, and the API's (a
  // lost race is kFailedPrecondition; the next call reads the slice again).
  Result<bool> Publish(const std::vector<core::GpuInfo>& gpus, const std::map<int, core::GpuShare>& pod_held = {});

 private:
  kube::Api& api_;
  const KubeletPluginOptions options_;
};

// The DRAPlugin v1 service.
class DraService final : public drapb::DRAPlugin::Service {
 public:
  // `book`: the node's book of GPU shares, shared with the device plugin's
  // Allocator (Allocator::book()); it must outlive the service. nullptr: a
  // book of the service's own (claims checked against claims and the pods
  // of each LIST only; for a node without the device plugin, and tests).
  DraService(kube::Api& api, KubeletPluginOptions options, std::shared_ptr<spdlog::logger> log,
             node::GpuBook* book = nullptr);

  // The book claims are booked in (the one given, or the service's own).
  node::GpuBook& book() { return book_; }

  // LISTs the node's pods and brings the book's pods up to them
  // (GpuBook::SyncPods): pods handed out before this agent started are
  // booked, finished and deleted ones dropped. The LIST's errors.
  Status SyncPods();

  // Books every claim whose record a previous agent left (prepared, not yet
  // unprepared), without a check: what the node already handed out. A
  // record that cannot be read is logged and skipped. INTERNAL when the
  // claims' folder exists but cannot be listed.
  Status RestorePrepared() TESSERA_EXCLUDES(files_mu_);

  void SetGpus(std::vector<core::GpuInfo> gpus) TESSERA_EXCLUDES(gpus_mu_);
  // One claim, as the handlers do it: the devices to answer, or the error
  // (whose message names the claim).
  Result<std::vector<drapb::Device>> Prepare(const ClaimRef& claim) TESSERA_EXCLUDES(files_mu_, gpus_mu_);
  Status Unprepare(const ClaimRef& claim) TESSERA_EXCLUDES(files_mu_);

  grpc::Status NodePrepareResources(grpc::ServerContext* context, const drapb::NodePrepareResourcesRequest* request,
                                    drapb::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(grpc::ServerContext* context,
                                      const drapb::NodeUnprepareResourcesRequest* request,
                                      drapb::NodeUnprepareResourcesResponse* response) override;

 private:
  std::vector<core::GpuInfo> Gpus() const TESSERA_EXCLUDES(gpus_mu_);
  // The claim's region folder, its record, its arbiter record and its CDI spec, in that order
  // (a record without a spec is booked after a restart until the kubelet
  // prepares or unprepares the claim again).
  // A failure to write the arbiter record is logged, not returned: the
  // claim's compute share then stays static, as a device-plugin container's.
  Status WriteFiles(const ClaimRef& claim, const node::ClaimRecord& record, const CdiSpec& spec,
                    const node::ComputeAnnotations& compute) TESSERA_REQUIRES(files_mu_);
  // Lists the node's pods and books `holder` (the claim) against them and every other claim.
  Status BookClaim(const node::GpuHolder& holder, const std::vector<core::GpuInfo>& gpus);

  kube::Api& api_;
  const KubeletPluginOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<node::GpuBook> own_book_;  // when none was given
  node::GpuBook& book_;
  mutable Mutex gpus_mu_;
  std::vector<core::GpuInfo> gpus_ TESSERA_GUARDED_BY(gpus_mu_);
  // Orders the file-system steps of prepare and unprepare (guards no field:
  // it is the CDI folder and the region folders it orders).
  Mutex files_mu_;
};

// The plugin registration service: tells the kubelet who we are.
class RegistrationService final : public ::pluginregistration::Registration::Service {
 public:
  RegistrationService(KubeletPluginOptions options, std::shared_ptr<spdlog::logger> log);
  grpc::Status GetInfo(grpc::ServerContext* context, const ::pluginregistration::InfoRequest* request,
                       ::pluginregistration::PluginInfo* response) override;
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* context,
                                        const ::pluginregistration::RegistrationStatus* request,
                                        ::pluginregistration::RegistrationStatusResponse* response) override;
  // The kubelet's last verdict: nullopt before any.
  std::optional<bool> Registered() const TESSERA_EXCLUDES(mu_);

 private:
  const KubeletPluginOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  mutable Mutex mu_;
  std::optional<bool> registered_ TESSERA_GUARDED_BY(mu_);
};

class KubeletPlugin {
 public:
  // `book`: as DraService's.
  KubeletPlugin(kube::Api& api, KubeletPluginOptions options, std::shared_ptr<spdlog::logger> log,
                node::GpuBook* book = nullptr);
  ~KubeletPlugin();  // Stop()

  // Hands the GPUs to the DRA and health services and publishes the slice
  // when they, or what the book's device-plugin pods hold of them, changed
  // since the last successful publish (a failed publish is tried again on
  // the next call). Publish's errors.
  Status SetGpus(const std::vector<core::GpuInfo>& gpus) TESSERA_EXCLUDES(mu_);
  // Books the claims prepared before a restart (DraService::RestorePrepared),
  // starts the watch of the node's slice and the thread that publishes the
  // slice again when the book's device-plugin pods change (and LISTs the
  // node's pods every pod_list_interval), serves DRAPlugin and the health
  // service, then the registration socket (so the kubelet never reaches a
  // plugin that is not serving yet); stale sockets are replaced. INTERNAL
  // naming the socket when one cannot be served; the informer's errors.
  Status Start();
  // Stops the watch, the thread and both servers (open health streams end)
  // and removes the sockets (the kubelet then deregisters the driver). The slice stays,
  // for the agent that comes next. Idempotent.
  void Stop();

  DraService& dra() { return dra_; }
  RegistrationService& registration() { return registration_; }
  DraHealthService& health() { return health_; }

 private:
  // The watch saw the slice deleted or changed: publish what was published
  // last again (Publish writes only when the slice differs).
  void Republish(const char* what) TESSERA_EXCLUDES(mu_);
  // The book's device-plugin pods changed (its observer): wakes the loop.
  void NotePodsChanged() TESSERA_EXCLUDES(loop_mu_);
  // Publishes what the book's pods leave now, when it differs from what was published.
  void PublishPodHeld() TESSERA_EXCLUDES(mu_);
  // The thread of NotePodsChanged's republish (after republish_delay) and the periodic pod LIST.
  void Loop() TESSERA_EXCLUDES(loop_mu_);

  // What the slice says, as last published.
  struct Published {
    std::vector<core::GpuInfo> gpus;
    std::map<int, core::GpuShare> pod_held;
    bool operator==(const Published&) const = default;
  };

  kube::Api& api_;
  const KubeletPluginOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  SlicePublisher publisher_;
  DraService dra_;
  DraHealthService health_;
  RegistrationService registration_;
  std::unique_ptr<kube::Informer> slice_watch_;
  std::unique_ptr<grpc::Server> dra_server_, registration_server_;
  Mutex mu_;
  std::optional<Published> published_ TESSERA_GUARDED_BY(mu_);
  Mutex loop_mu_;
  CondVar loop_wake_;
  bool pods_changed_ TESSERA_GUARDED_BY(loop_mu_) = false;
  bool stopping_ TESSERA_GUARDED_BY(loop_mu_) = false;
  std::thread loop_;
};

}  // namespace tessera::dra
