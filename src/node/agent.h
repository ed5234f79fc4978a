// tessera-node's node agent: owns and wires the node's modules, each a
// class of its own, and runs them until its stop flag, which any thread may
// set, becomes true:
//   - the plugin host (plugin_host.h): every device-plugin resource of the
//     node (tessera.io/gpu, plus the compatibility front ends' when main adds
//     them through host()), one kubelet watch that serves and registers them
//     again when the kubelet restarts, and one Allocator for all of them;
//   - the GPU inventory (gpu_inventory.h): read every resync, offered to the
//     host, published on the Node, each GPU's `mps` flag from its MPS daemon;
//   - the reconciliation against the kubelet's pod-resources record
//     (reconciler.h), the usage pass over the containers' regions
//     (usage_reporter.h: GPU and container series, OOM-refusal Events, the
//     tessera.io/usage annotation) and the region cleanup (region_gc.h),
//     each on a thread of its own (periodic.h);
//   - the per-GPU compute arbiter (arbiter_loop.h), the MPS daemons where MPS
//     is on (--mps; mps.h), Events (event_recorder.h) and /metrics.
//
//   NodeAgent agent(config, client, std::make_unique<FileGpuSource>(path), log, *PlanMps("auto", control));
//   // client: a kube::Client main() owns, outliving the agent
//   TESSERA_RETURN_IF_ERROR(AddCompatPlugins(compat, agent.host(), log));
//   return agent.Run(stop_flag).ok() ? 0 : 1;
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "kube/api.h"
#include "node/arbiter_loop.h"
#include "node/container_env.h"
#include "node/inventory.h"
#include "node/mps.h"
#include "node/plugin_host.h"

namespace tessera::node {

// tessera-node's configuration, filled from flags in main.cc.
struct NodeConfig {
  std::string node_name;                                            // required: this Node's name
  std::string kubeconfig;                                           // empty: $KUBECONFIG, in-cluster, ~/.kube/config
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";  // holds kubelet.sock
  std::string socket_name = "tessera-gpu.sock";                     // our socket, inside device_plugin_dir
  std::string resource_name = "tessera.io/gpu";
  int slots_per_gpu = 8;                                            // device IDs per GPU (1..1000)
  std::string simulated_gpus_file;                                  // simulated mode: GPUs from this file
  std::string gpu_source = "auto";                                  // auto|nvml|file; auto: file iff simulated_gpus_file
  MountPaths mounts;                                                // host paths Allocate mounts
  std::chrono::milliseconds resync{1000};                           // inventory re-read / socket check period
  std::string log_level = "info";
  // Reconciliation against the kubelet's pod-resources record, and metrics.
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";  // absent: skipped
  std::chrono::milliseconds reconcile_interval{10000};                                // time between passes
  std::string metrics_bind_address = ":9410";                                         // /metrics; "" disables
  // Usage: the containers' regions read every usage_interval (0: never) for
  // /metrics and OOM-refusal Events; a pod's tessera.io/usage annotation is
  // written when its usage moved, at most once per usage_annotation_interval
  // (0: never).
  std::chrono::milliseconds usage_interval{2000};
  std::chrono::milliseconds usage_annotation_interval{10000};
  // Region cleanup (node/region_gc.h): <region-root>/<pod uid> is removed
  // once its pod has been absent from the node this long (and no process
  // of it is alive); 0: never removed. Looked for every min(grace, 30 s).
  std::chrono::seconds region_gc_grace{300};
  std::chrono::milliseconds testing_allocate_reply_delay{0};        // fault injection for restart tests
  ArbiterConfig arbiter;                                            // the per-GPU compute arbiter
  // MPS (tessera.io/isolation: mps); main.cc turns these into an MpsPlan.
  std::string mps = "auto";                             // auto|on|off (PlanMps)
  std::string mps_control = "nvidia-cuda-mps-control";  // a name looked up on PATH, or a path
  std::string mps_root = "/var/run/tessera/mps";        // <root>/<gpu uuid>/{pipe,log}, absolute
  // Host folder the daemons and MPS containers share as /dev/shm (CheckMpsShm), absolute.
  std::string mps_shm = "/dev/shm";
};

// OK, or INVALID_ARGUMENT saying which setting to fix.
Status ValidateConfig(const NodeConfig& config);

// "file" or "nvml": config.gpu_source with auto resolved. Precondition:
// ValidateConfig(config) is OK.
std::string EffectiveGpuSource(const NodeConfig& config);

class NodeAgent {
 public:
  // `mps` (PlanMps of config.mps and config.mps_control) says whether this
  // node runs MPS; when it does, config.mounts.mps_root becomes config.mps_root.
  // The agent's own resource (config.resource_name on config.socket_name) is
  // added to its plugin host here. `api` (the Kubernetes client) must
  // outlive the agent.
  NodeAgent(NodeConfig config, kube::Api& api, std::unique_ptr<GpuSource> source,
            std::shared_ptr<spdlog::logger> log, MpsPlan mps = {});
  ~NodeAgent();

  // The node's plugin host: add further resources (AddCompatPlugins) before
  // Run.
  PluginHost& host();

  // Runs until *stop becomes true (checked every resync period), then stops
  // serving and quits the MPS daemons. Fails only when the agent's own
  // resource could not be added to the host, the first inventory cannot be
  // read or is refused by a served resource, a socket cannot be served or
  // the metrics address cannot be bound; later errors (API server, kubelet
  // away, an MPS daemon that will not start) are logged and retried.
  Status Run(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::node
