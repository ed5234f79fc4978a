// The kubelet-facing gRPC service of one slot resource of tessera-node
// (device plugin v1beta1): tessera.io/gpu, and HAMi's count resource when
// that front end is on. Slots with health for ListAndWatch, preferred
// allocation and Allocate through the plugin host's Allocator, for this
// resource's containers, translating the Allocator's Status into gRPC status
// at this edge only. Thread-safe: gRPC calls and SetGpus may run
// concurrently.
//
//   auto service = std::make_unique<DevicePluginService>(host.allocator(), "tessera.io/gpu", 8, log);
//   TESSERA_RETURN_IF_ERROR(service->SetGpus(gpus));   // streams see the new list
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <memory>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "node/allocator.h"
#include "node/device_list_stream.h"
#include "node/plugin_host.h"
#include "node/slots.h"

namespace tessera::node {

class DevicePluginService final : public v1beta1::DevicePlugin::Service, public HostedPlugin {
 public:
  // `resource` is the name this service is registered under: Allocate and
  // GetPreferredAllocation consider only containers asking for it.
  DevicePluginService(Allocator& allocator, std::string resource, int slots_per_gpu,
                      std::shared_ptr<spdlog::logger> log);

  // HostedPlugin
  grpc::Service* GrpcService() override { return this; }
  // Replaces the GPUs; every ListAndWatch stream sends the slots when they
  // changed. INVALID_ARGUMENT (nothing changed) when SlotsFor fails.
  Status SetGpus(std::vector<core::GpuInfo> gpus) override TESSERA_EXCLUDES(mu_);
  // Ends every ListAndWatch stream for good (before the server shuts down).
  void Shutdown() override { devices_.Shutdown(); }
  // Ends the ListAndWatch streams open now, at once; later streams run as usual
  // (before re-serving after a kubelet restart, so the old server stops fast).
  void EndStreams() override { devices_.EndStreams(); }
  // Fault injection for restart tests: Allocate waits this long after marking
  // the pod allocated and before answering, so a test can kill the agent there.
  void SetReplyDelayForTesting(std::chrono::milliseconds delay) { reply_delay_ = delay; }

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
  const int slots_per_gpu_;
  std::shared_ptr<spdlog::logger> log_;
  std::chrono::milliseconds reply_delay_{0};  // set before serving
  DeviceListStream devices_;  // the slots, and every ListAndWatch stream
  Mutex mu_;
  std::vector<core::GpuInfo> gpus_ TESSERA_GUARDED_BY(mu_);  // what Allocate builds the environment from
};

// Status -> grpc::Status, keeping the code and message.
grpc::Status ToGrpc(const Status& status);

}  // namespace tessera::node
