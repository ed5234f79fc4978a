// The ListAndWatch side of one device-plugin resource, shared by every
// service the plugin host serves (DevicePluginService, GpushareService): the
// device list offered now, sent to each open ListAndWatch stream at once and
// again whenever it changes, and the end of those streams (EndStreams before
// the host serves the resource anew after a kubelet restart; Shutdown before
// the host stops). A service owns one and hands it its ListAndWatch calls.
//
// Thread-safety: every method may be called from any thread at any time;
// Serve holds its caller (a gRPC thread) for the life of the stream, without
// holding the lock while it writes.
//
//   DeviceListStream devices("tessera.io/gpu", "slot", log);
//   devices.Publish(slots);                            // streams open now send the new list
//   return devices.Serve(context, writer);             // inside ListAndWatch
#pragma once

#include <grpcpp/grpcpp.h>
#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_annotations.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "node/slots.h"

namespace tessera::node {

// A device's health as the kubelet reads it.
inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

// What Serve writes for `devices`: one v1beta1 Device per slot, in order,
// with its health and, when known, its NUMA node.
v1beta1::ListAndWatchResponse DeviceList(const std::vector<Slot>& devices);

class DeviceListStream {
 public:
  // `resource` and `unit` (what one device stands for: "slot", "GiB unit")
  // name the list in the log. The list starts empty.
  DeviceListStream(std::string resource, std::string unit, std::shared_ptr<spdlog::logger> log);
  DeviceListStream(const DeviceListStream&) = delete;
  DeviceListStream& operator=(const DeviceListStream&) = delete;

  // Offers `devices` from now on. When they differ from the list offered,
  // every open stream sends them; when equal, nothing is sent. True when
  // they differed.
  bool Publish(std::vector<Slot> devices) TESSERA_EXCLUDES(mu_);

  // The list offered now.
  std::vector<Slot> Devices() const TESSERA_EXCLUDES(mu_);

  // Ends the streams open now, at once (each Serve returns OK); streams
  // opened later run as usual.
  void EndStreams() TESSERA_EXCLUDES(mu_);

  // Ends every stream for good: open ones at once, later ones before they
  // send anything (each Serve returns OK).
  void Shutdown() TESSERA_EXCLUDES(mu_);

  // Serves one ListAndWatch stream: writes the list offered now, then the
  // list after each change, until EndStreams or Shutdown ends it (OK) or the
  // kubelet goes away: `context` cancelled (checked at least every
  // `kCancelPoll`; a null context is never cancelled) or a write fails
  // (CANCELLED). `writer` must outlive the call.
  grpc::Status Serve(grpc::ServerContext* context,
                     grpc::ServerWriterInterface<v1beta1::ListAndWatchResponse>* writer) TESSERA_EXCLUDES(mu_);

  // How often Serve checks for a cancelled context while nothing changes.
  static constexpr std::chrono::milliseconds kCancelPoll{500};

 private:
  const std::string resource_;
  const std::string unit_;
  std::shared_ptr<spdlog::logger> log_;
  mutable Mutex mu_;
  CondVar changed_;  // the list changed, streams end or the stream shuts down
  std::vector<Slot> devices_ TESSERA_GUARDED_BY(mu_);
  uint64_t generation_ TESSERA_GUARDED_BY(mu_) = 0;    // +1 per change of devices_
  uint64_t stream_epoch_ TESSERA_GUARDED_BY(mu_) = 0;  // +1 per EndStreams
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::node
