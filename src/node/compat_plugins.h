// The device-plugin resources of the compatibility front ends, served by
// tessera-node's plugin host (plugin_host.h) beside its own tessera.io/gpu so
// that other projects' manifests pass the kubelet unchanged
// (docs/migration.md):
//   gpushare: aliyun.com/gpu-mem, one device ID per GiB of each GPU
//     ("<uuid>-<k>", k = 0 .. GiB-1), so the Node's capacity counts GiB as
//     gpushare's does and the kubelet calls Allocate for such containers;
//   HAMi: its GPU count resource (nvidia.com/gpu by default), slots as for
//     tessera.io/gpu (a DevicePluginService under HAMi's name).
// Allocate identifies the container through the host's one Allocator
// (node/allocator.h), among the containers asking for the front end's
// resource: a gpushare container's GiB units stand for the one GPU they lie
// on. The environment is BuildContainerEnv's, with the front end's own
// variables. Serving, registration and re-registration after a kubelet
// restart are the host's; the device list and its ListAndWatch streams are a
// DeviceListStream's (device_list_stream.h), as for tessera.io/gpu.
//
//   TESSERA_RETURN_IF_ERROR(AddCompatPlugins(options, host, log));  // before host.Start()
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/podspec.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "node/allocator.h"
#include "node/container_env.h"
#include "node/device_list_stream.h"
#include "node/plugin_host.h"
#include "node/slots.h"

namespace tessera::node {

struct CompatOptions {
  core::ResourceNames resources;                          // which front ends are on, and their names
  int slots_per_gpu = 8;                                  // HAMi count resource: device IDs per GPU
  std::string gpushare_socket = "tessera-gpushare.sock";  // in the kubelet's device-plugin folder
  std::string hami_socket = "tessera-hami.sock";
};

// OK, or INVALID_ARGUMENT naming the flag: names must be extended resource
// names distinct from `own_resource` (the agent's) and from each other.
Status ValidateCompatOptions(const CompatOptions& options, const std::string& own_resource);

// gpushare's devices: per GPU one ID per whole GiB of its memory, in
// inventory order. INVALID_ARGUMENT when an ID would pass 63 characters.
Result<std::vector<Slot>> GibUnits(const std::vector<core::GpuInfo>& gpus);

// The GPUs of unit IDs, each once, in order of first appearance, as one slot
// ID per GPU ("<uuid>-0"): what the Allocator identifies a container by.
// INVALID_ARGUMENT for an ID without a "-<k>" suffix.
Result<std::vector<std::string>> GpuSlotsOfUnits(const std::vector<std::string>& unit_ids);

// `size` IDs among `available` that lie on GPU `uuid`, the `must_include`
// ones first; empty when that GPU has fewer than `size` available.
std::vector<std::string> UnitsOn(const std::string& uuid, const std::vector<std::string>& available,
                                 const std::vector<std::string>& must_include, size_t size);

// The gpushare resource's gRPC service: GiB units in ListAndWatch, steering
// to the units of the GPU assigned to the next pending gpushare container,
// Allocate through the Allocator. `resource` is gpushare's memory resource
// name, which it is registered under.
class GpushareService final : public v1beta1::DevicePlugin::Service, public HostedPlugin {
 public:
  GpushareService(Allocator& allocator, std::string resource, std::shared_ptr<spdlog::logger> log);

  // HostedPlugin
  grpc::Service* GrpcService() override { return this; }
  // INVALID_ARGUMENT (nothing changed) when GibUnits fails.
  Status SetGpus(std::vector<core::GpuInfo> gpus) override TESSERA_EXCLUDES(mu_);
  void EndStreams() override { units_.EndStreams(); }
  void Shutdown() override { units_.Shutdown(); }

  // v1beta1::DevicePlugin::Service
  grpc::Status GetDevicePluginOptions(grpc::ServerContext* context, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* context, const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override TESSERA_EXCLUDES(mu_);
  grpc::Status PreStartContainer(grpc::ServerContext* context, const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

 private:
  Allocator& allocator_;
  const std::string resource_;
  std::shared_ptr<spdlog::logger> log_;
  DeviceListStream units_;  // the GiB units, and every ListAndWatch stream
  Mutex mu_;
  std::vector<core::GpuInfo> gpus_ TESSERA_GUARDED_BY(mu_);  // what Allocate builds the environment from
};

// Adds to `host` the resource of each enabled front end of
// `options.resources` (none when both are off), each served on its socket
// and registered with the kubelet by the host. Before host.Start().
// PluginHost::Add's errors.
Status AddCompatPlugins(const CompatOptions& options, PluginHost& host, std::shared_ptr<spdlog::logger> log);

}  // namespace tessera::node
