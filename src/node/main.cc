// tessera-node: the node agent. Parses flags, wires the GPU source and the
// compatibility front ends into the agent (node/agent.h), and runs it until
// SIGINT or SIGTERM.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <thread>

#include "dra/kubelet_plugin.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/paths.h"
#include "node/agent.h"
#include "node/compat_plugins.h"
#include "node/nvml_gpu_source.h"

int main(int argc, char** argv) {
  tessera::node::NodeConfig config;
  int resync_ms = static_cast<int>(config.resync.count());
  int reconcile_interval_ms = static_cast<int>(config.reconcile_interval.count());
  CLI::App app{"tessera-node: GPU-sharing device plugin and node agent"};
  app.add_option("--node-name", config.node_name, "this Node's name")->envname("NODE_NAME");
  app.add_option("--kubeconfig", config.kubeconfig, "kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--device-plugin-dir", config.device_plugin_dir, "the kubelet's device-plugin directory")
      ->capture_default_str();
  app.add_option("--socket-name", config.socket_name, "plugin socket file name")->capture_default_str();
  app.add_option("--resource-name", config.resource_name, "extended resource")->capture_default_str();
  app.add_option("--slots-per-gpu", config.slots_per_gpu, "device IDs per GPU")->capture_default_str();
  app.add_option("--simulated-gpus", config.simulated_gpus_file, "simulated mode: YAML/JSON file of GPUs");
  app.add_option("--gpu-source", config.gpu_source, "auto|nvml|file (auto: file with --simulated-gpus, else nvml)")
      ->capture_default_str();
  app.add_option("--library-host-path", config.mounts.library_host, "host path of libtessera-cuda.so")
      ->capture_default_str();
  app.add_option("--preload-host-path", config.mounts.preload_host, "host file mounted as /etc/ld.so.preload")
      ->capture_default_str();
  app.add_option("--region-root", config.mounts.region_root_host, "host folder of per-container regions")
      ->capture_default_str();
  app.add_option("--resync-ms", resync_ms, "inventory re-read and socket check period")->capture_default_str();
  app.add_option("--log-level", config.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--pod-resources-socket", config.pod_resources_socket,
                 "the kubelet's pod-resources socket, read to check allocations")
      ->capture_default_str();
  app.add_option("--reconcile-interval-ms", reconcile_interval_ms,
                 "period of the check of the kubelet's record against the assignments")
      ->capture_default_str();
  app.add_option("--metrics-bind-address", config.metrics_bind_address, "host:port of /metrics; empty disables it")
      ->capture_default_str();
  int usage_interval_ms = static_cast<int>(config.usage_interval.count());
  int usage_annotation_ms = static_cast<int>(config.usage_annotation_interval.count());
  app.add_option("--usage-interval-ms", usage_interval_ms,
                 "period of the read of the containers' regions (GPU and container metrics, OOM Events); 0 "
                 "disables it")
      ->capture_default_str();
  app.add_option("--usage-annotation-interval-ms", usage_annotation_ms,
                 "least time between two writes of a pod's tessera.io/usage annotation (written only when the "
                 "usage moved); 0 disables the annotation")
      ->capture_default_str();
  // Compatibility front ends (docs/migration.md): extra device-plugin resources.
  std::string gpushare = "false", hami = "false";
  tessera::node::CompatOptions compat;
  app.add_option("--gpushare", gpushare, "true|false: serve gpushare's aliyun.com/gpu-mem (one device per GiB)")
      ->check(CLI::IsMember({"true", "false"}))
      ->capture_default_str();
  app.add_option("--gpushare-resource", config.mounts.resources.gpushare.mem, "gpushare's memory resource (GiB)")
      ->capture_default_str();
  app.add_option("--hami", hami, "true|false: serve HAMi's GPU count resource (slots, as --resource-name)")
      ->check(CLI::IsMember({"true", "false"}))
      ->capture_default_str();
  app.add_option("--hami-gpu-resource", config.mounts.resources.hami.gpu,
                 "HAMi's GPU count resource; rename it where NVIDIA's device plugin serves nvidia.com/gpu")
      ->capture_default_str();
  app.add_option("--gpushare-socket-name", compat.gpushare_socket, "socket file of the gpushare resource")
      ->capture_default_str();
  app.add_option("--hami-socket-name", compat.hami_socket, "socket file of the HAMi count resource")
      ->capture_default_str();
  // MPS for tessera.io/isolation: mps (docs/node-agent.md).
  app.add_option("--mps", config.mps,
                 "auto|on|off: run an MPS control daemon per GPU (auto: where --mps-control is found; on: refuse to "
                 "start without it)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--mps-control", config.mps_control, "the MPS control program: a name on PATH, or a path")
      ->capture_default_str();
  app.add_option("--mps-root", config.mps_root, "host folder of the MPS daemons' <gpu uuid>/{pipe,log} folders")
      ->capture_default_str();
  app.add_option("--mps-shm", config.mps_shm,
                 "host folder the MPS daemons use as /dev/shm (tessera-node's own /dev/shm), mounted at /dev/shm "
                 "into MPS containers")
      ->capture_default_str();
  int region_gc_grace_s = static_cast<int>(config.region_gc_grace.count());
  app.add_option("--region-gc-grace-seconds", region_gc_grace_s,
                 "remove <region-root>/<pod uid> once its pod has been gone from the node this long and no process "
                 "of it is alive; 0: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  int reply_delay_ms = 0;
  int arbiter_interval_ms = static_cast<int>(config.arbiter.interval.count());
  int arbiter_idle_after_ms = static_cast<int>(config.arbiter.idle_after.count());
  app.add_option("--arbiter-interval-ms", arbiter_interval_ms,
                 "compute arbiter pass period; 0: no arbiter, compute shares stay static")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_option("--arbiter-min-share-percent", config.arbiter.min_share_percent,
                 "what a container held for a higher-priority one keeps, in % of its own share")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--arbiter-idle-after-ms", arbiter_idle_after_ms,
                 "a container with no launch for this long is idle (its share goes to others)")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  // The DRA driver gpu.tessera.io beside the device plugin (issue 22; docs/notes/dra.md).
  std::string dra = "false";
  tessera::dra::KubeletPluginOptions dra_options;
  app.add_option("--dra", dra, "true|false: also serve the DRA kubelet plugin and publish the node's ResourceSlice")
      ->check(CLI::IsMember({"true", "false"}))
      ->capture_default_str();
  app.add_option("--dra-registry-dir", dra_options.registry_dir, "the kubelet's plugin registration folder")
      ->capture_default_str();
  app.add_option("--dra-plugins-dir", dra_options.plugins_dir, "folder of the DRA service socket (<dir>/gpu.tessera.io/dra.sock)")
      ->capture_default_str();
  app.add_option("--cdi-dir", dra_options.cdi_dir, "where prepared claims' CDI specs are written for the runtime")
      ->capture_default_str();
  int dra_pod_list_ms = static_cast<int>(dra_options.pod_list_interval.count());
  app.add_option("--dra-pod-list-interval-ms", dra_pod_list_ms,
                 "period of the LIST of the node's pods that gives deleted device-plugin pods' room back to claims "
                 "in the ResourceSlice; 0: none")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--testing-allocate-reply-delay-ms", reply_delay_ms,
                 "tests only: hold each Allocate answer this long after marking the pod")
      ->group("Testing");
  CLI11_PARSE(app, argc, argv);
  config.resync = std::chrono::milliseconds(resync_ms);
  dra_options.pod_list_interval = std::chrono::milliseconds(dra_pod_list_ms);
  config.reconcile_interval = std::chrono::milliseconds(reconcile_interval_ms);
  config.testing_allocate_reply_delay = std::chrono::milliseconds(reply_delay_ms);
  config.usage_interval = std::chrono::milliseconds(usage_interval_ms);
  config.region_gc_grace = std::chrono::seconds(region_gc_grace_s);
  config.usage_annotation_interval = std::chrono::milliseconds(usage_annotation_ms);
  config.mounts.resources.gpushare.enabled = gpushare == "true";
  config.mounts.resources.hami.enabled = hami == "true";
  compat.resources = config.mounts.resources;
  compat.slots_per_gpu = config.slots_per_gpu;
  config.arbiter.interval = std::chrono::milliseconds(arbiter_interval_ms);
  config.arbiter.idle_after = std::chrono::milliseconds(arbiter_idle_after_ms);

  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  auto log = spdlog::stderr_color_mt("tessera-node");
  if (auto st = tessera::node::ValidateConfig(config); !st.ok()) {
    log->critical("{}", st.message());
    return 2;
  }
  if (auto st = tessera::node::ValidateCompatOptions(compat, config.resource_name); !st.ok()) {
    log->critical("{}", st.message());
    return 2;
  }
  auto mps = tessera::node::PlanMps(config.mps, config.mps_control, config.mps_shm);
  if (!mps.ok()) {
    log->critical("{}", mps.status().message());
    return 2;
  }
  if (mps->enabled) {
    log->info("MPS on ({}): one control daemon per healthy GPU, folders under {}", mps->reason, config.mps_root);
    if (!mps->warning.empty()) log->warn("{}", mps->warning);
  } else {
    log->info("MPS off ({}): pods with tessera.io/isolation: mps are not placed on this node", mps->reason);
  }
  auto kube_config = tessera::kube::ResolveConfig(config.kubeconfig);
  if (!kube_config.ok()) {
    log->critical("cannot find the API server: {}", kube_config.status().message());
    return 1;
  }
  kube_config->user_agent = "tessera-node";

  // Signals are taken by a waiting thread, so the flag is the only shared state.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    stop.store(true);
  });
  waiter.detach();

  auto open_source = [&]() -> tessera::Result<std::unique_ptr<tessera::node::GpuSource>> {
    if (tessera::node::EffectiveGpuSource(config) == "file")
      return std::unique_ptr<tessera::node::GpuSource>(
          std::make_unique<tessera::node::FileGpuSource>(config.simulated_gpus_file));
    auto nvml = tessera::node::NvmlGpuSource::Open(log);
    if (!nvml.ok()) return nvml.status();
    return std::unique_ptr<tessera::node::GpuSource>(std::move(nvml).value());
  };
  auto opened = open_source();
  if (!opened.ok()) {
    log->critical("{}", opened.status().message());
    return 1;
  }
  std::unique_ptr<tessera::node::GpuSource> source = std::move(opened).value();
  log->info("tessera-node for node {}: {} slot(s) per GPU, GPUs from {}, device-plugin dir {}",
            config.node_name, config.slots_per_gpu, source->Describe(), config.device_plugin_dir);
  tessera::kube::Client client(std::move(kube_config).value());
  tessera::node::NodeAgent agent(config, client, std::move(source), log, std::move(mps).value());
  // The front ends' resources are served by the agent's plugin host beside its own.
  if (auto st = tessera::node::AddCompatPlugins(compat, agent.host(), log); !st.ok()) {
    log->critical("compatibility plugins: {}", st.message());
    return 1;
  }
  // The DRA driver reads the GPUs from a source of its own every resync
  // (the agent's inventory is not shared yet; no MPS flags under DRA).
  std::unique_ptr<tessera::dra::KubeletPlugin> dra_plugin;
  std::thread dra_loop;
  if (dra == "true") {
    auto dra_source = open_source();
    if (!dra_source.ok()) {
      log->critical("DRA driver: {}", dra_source.status().message());
      return 1;
    }
    dra_options.node = config.node_name;
    dra_options.paths = config.mounts;
    if (auto node = client.Get(tessera::kube::NodePath(config.node_name)); node.ok()) {
      dra_options.node_uid = (*node)["metadata"].value("uid", "");
    } else {
      log->warn("DRA driver: reading Node {} for its uid: {} (the slice gets no owner)", config.node_name,
                node.status().message());
    }
    // Claims are booked in the Allocator's book, beside the device-plugin
    // pods, so neither path hands out a share the other holds; the slice
    // offers each GPU less what the book's pods hold.
    dra_plugin = std::make_unique<tessera::dra::KubeletPlugin>(client, dra_options, log,
                                                               &agent.host().allocator().book());
    if (auto gpus = (*dra_source)->Read(); gpus.ok()) {
      if (auto st = dra_plugin->SetGpus(*gpus); !st.ok()) log->warn("DRA driver: {} (retried every resync)", st.message());
    }
    if (auto st = dra_plugin->Start(); !st.ok()) {
      log->critical("DRA driver: {}", st.message());
      return 1;
    }
    dra_loop = std::thread([&, gpu_source = std::move(dra_source).value()] {
      while (!stop.load()) {
        std::this_thread::sleep_for(config.resync);
        auto gpus = gpu_source->Read();
        if (!gpus.ok()) {
          log->warn("DRA driver: reading GPUs: {}", gpus.status().message());
          continue;
        }
        if (auto st = dra_plugin->SetGpus(*gpus); !st.ok()) log->warn("DRA driver: {}", st.message());
      }
    });
  }
  tessera::Status run = agent.Run(stop);
  stop.store(true);
  if (dra_loop.joinable()) dra_loop.join();
  if (dra_plugin != nullptr) dra_plugin->Stop();
  if (!run.ok()) {
    log->critical("{}", run.message());
    return 1;
  }
  return 0;
}
