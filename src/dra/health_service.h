// The DRA device-health service (v1alpha1.DRAResourceHealth) of tessera-node's
// DRA kubelet plugin: the health of each GPU of the node, streamed to the
// kubelet, which shows it on the pods that were allocated the GPU
// (status.containerStatuses[].allocatedResourcesStatus). Kubelets 1.36 and
// later open this stream on every DRA plugin and, where it is missing, retry
// every 5 s with an error in their log each time.
//
// A stream sends every GPU at once, again whenever the GPUs change (SetGpus
// with another list), and at least every `heartbeat` (the kubelet takes a
// device as Unknown when no report came within its timeout, which each report
// sets to kHealthTimeoutSeconds).
//
// Thread-safety: every method may be called from any thread at any time;
// NodeWatchResources holds its caller (a gRPC thread) for the life of the
// stream, without holding the lock while it writes.
//
//   DraHealthService health("node-1", log);
//   health.SetGpus(gpus);           // open streams send the change
//   health.Shutdown();              // before the gRPC server stops
#pragma once

#include <grpcpp/grpcpp.h>
#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/thread_annotations.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"

namespace tessera::dra {

namespace healthpb = ::v1alpha1;

// The gRPC service name a registration may list beside kDraServiceVersion.
inline constexpr const char* kDraHealthService = "v1alpha1.DRAResourceHealth";
// How long one report holds at the kubelet (a heartbeat comes well before).
inline constexpr int64_t kHealthTimeoutSeconds = 30;

// What a stream sends for `gpus` of pool `pool` (the node): one DeviceHealth
// per GPU, in order, named as the ResourceSlice names it (DeviceName),
// HEALTHY or UNHEALTHY (with a message saying the GPU left the slice),
// stamped `now_seconds` (Unix time) and kHealthTimeoutSeconds. Pure.
healthpb::NodeWatchResourcesResponse HealthReport(const std::string& pool, const std::vector<core::GpuInfo>& gpus,
                                                  int64_t now_seconds);

class DraHealthService final : public healthpb::DRAResourceHealth::Service {
 public:
  // `pool` is the node's name (the slice's pool).
  DraHealthService(std::string pool, std::shared_ptr<spdlog::logger> log,
                   std::chrono::milliseconds heartbeat = std::chrono::seconds(10));

  // The GPUs from now on; open streams send them when they differ.
  void SetGpus(std::vector<core::GpuInfo> gpus) TESSERA_EXCLUDES(mu_);
  // Ends every stream for good: open ones at once, later ones before they
  // send anything (each returns OK).
  void Shutdown() TESSERA_EXCLUDES(mu_);

  // Until Shutdown (OK), the kubelet cancels (checked at least every
  // kCancelPoll) or a write fails (CANCELLED). A null context is never
  // cancelled (tests).
  grpc::Status NodeWatchResources(grpc::ServerContext* context, const healthpb::NodeWatchResourcesRequest* request,
                                  grpc::ServerWriter<healthpb::NodeWatchResourcesResponse>* writer) override;
  // The same over any writer (tests hand a fake one).
  grpc::Status Serve(grpc::ServerContext* context,
                     grpc::ServerWriterInterface<healthpb::NodeWatchResourcesResponse>* writer) TESSERA_EXCLUDES(mu_);

  static constexpr std::chrono::milliseconds kCancelPoll{500};

 private:
  const std::string pool_;
  std::shared_ptr<spdlog::logger> log_;
  const std::chrono::milliseconds heartbeat_;
  mutable Mutex mu_;
  CondVar changed_;  // the GPUs changed or the service shuts down
  std::vector<core::GpuInfo> gpus_ TESSERA_GUARDED_BY(mu_);
  uint64_t generation_ TESSERA_GUARDED_BY(mu_) = 0;  // +1 per change of gpus_
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::dra
