// tessera-node's one device-plugin host: every device-plugin resource the
// node agent serves (its own tessera.io/gpu and the compatibility front
// ends', compat_plugins.h) is served here, each on its own socket with its
// own ListAndWatch, GetPreferredAllocation and Allocate, over one watch of
// the kubelet (PluginServer: inotify on the device-plugin folder, serving and
// registering every resource again when the kubelet restarts) and through
// ONE Allocator (one watch of the node's pods, one handshake at a time), so
// Allocates for different resources on one node are serialised and never
// read the same pending pods at once. The node's GPUs reach every resource
// through SetGpus.
//
// Thread-safety: Add, SetGpus, Start and Stop from the agent's thread (Add
// before Start; SetGpus at any time); the resources' gRPC calls run on
// gRPC's threads.
//
//   PluginHost host(options, api, mounts, log);
//   TESSERA_RETURN_IF_ERROR(host.Add("tessera.io/gpu", "tessera-gpu.sock",
//                                    std::make_unique<DevicePluginService>(host.allocator(), "tessera.io/gpu", 8, log)));
//   TESSERA_RETURN_IF_ERROR(host.SetGpus(gpus));  // before Start: what the first ListAndWatch sends
//   TESSERA_RETURN_IF_ERROR(host.Start());
//   ...
//   host.Stop();
#pragma once

#include <grpcpp/grpcpp.h>
#include <spdlog/logger.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/api.h"
#include "node/allocator.h"
#include "node/container_env.h"
#include "node/node_pods.h"
#include "node/plugin_server.h"

namespace tessera::node {

// One resource the host serves: a device-plugin gRPC service whose Allocate
// goes through the host's Allocator. Implementations are thread-safe (gRPC
// calls, SetGpus and the stream controls may run at once).
class HostedPlugin {
 public:
  virtual ~HostedPlugin() = default;
  // The service served on the resource's socket.
  virtual grpc::Service* GrpcService() = 0;
  // Takes the node's GPUs; open ListAndWatch streams send the new device
  // list when it changed. INVALID_ARGUMENT, with nothing changed, when it
  // cannot offer them.
  virtual Status SetGpus(std::vector<core::GpuInfo> gpus) = 0;
  // Ends the ListAndWatch streams open now; later ones run as usual.
  virtual void EndStreams() = 0;
  // Ends every ListAndWatch stream for good (before the host stops).
  virtual void Shutdown() = 0;
};

struct PluginHostOptions {
  std::string node;  // this Node's name: the Allocator's pod watch
  // The kubelet's device-plugin folder, the socket check and registration
  // retry period, the Register deadline (PluginServerOptions).
  PluginServerOptions server;
  NodePodsOptions pods;  // the Allocator's pod cache (its resource names come from the mounts)
};

class PluginHost {
 public:
  // `api` (the Allocator's) must outlive the host.
  PluginHost(PluginHostOptions options, kube::Api& api, MountPaths mounts, std::shared_ptr<spdlog::logger> log);
  ~PluginHost();  // Stop()
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // The one Allocator every resource's Allocate and GetPreferredAllocation
  // go through. Set its probe and observer before Start.
  Allocator& allocator() { return allocator_; }

  // Serves `plugin` as `resource` on `socket_name` in the device-plugin
  // folder. Before Start. PluginServer::Add's errors (a taken resource or
  // socket, a malformed name); INVALID_ARGUMENT when `plugin` is null.
  Status Add(const std::string& resource, const std::string& socket_name, std::unique_ptr<HostedPlugin> plugin);

  // Hands `gpus` to every resource. A resource that cannot offer them keeps
  // its last list; the others take the new one. INVALID_ARGUMENT naming the
  // first resource that refused, and why.
  Status SetGpus(const std::vector<core::GpuInfo>& gpus);

  // Starts the Allocator's pod watch, serves every resource and starts
  // registering them (PluginServer::Start). Fails when already started,
  // when nothing was added, or when a socket cannot be served.
  Status Start();

  // Ends every resource's streams, stops serving and the kubelet watch.
  // Idempotent. The Allocator's pod watch ends with the host.
  void Stop();

  // The resources added, in order.
  std::vector<std::string> Resources() const;

 private:
  struct Hosted {
    std::string resource;
    std::unique_ptr<HostedPlugin> plugin;
  };

  std::shared_ptr<spdlog::logger> log_;
  Allocator allocator_;
  std::vector<Hosted> plugins_;  // before server_: destroyed after it stops serving them
  PluginServer server_;
};

}  // namespace tessera::node
