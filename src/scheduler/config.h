// tessera-scheduler's configuration: a YAML file (deploy/ has a commented
// example) overridden by command-line flags, validated before anything starts.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "core/load.h"
#include "core/podspec.h"
#include "core/status.h"

namespace tessera::scheduler {

struct LeaderElectionConfig {
  bool enabled = true;
  std::string namespace_ = "kube-system";
  std::string name = "tessera-scheduler";
  std::string identity;  // empty: hostname + pid
};

// Preemption for GPU shares (docs/scheduler-extender.md, "Preemption").
struct PreemptionSettings {
  bool enabled = true;                       // preempt lower-priority pods for GPU shares
  std::chrono::seconds nomination_ttl{60};   // how long a freed share is held for its preemptor
  int max_victims = 16;                      // most pods evicted on one node for one pod; 0: no limit
};

// The tessera-interference policy (docs/scheduler-extender.md,
// "Interference-aware placement"); read whatever the policy, used by it only.
struct InterferenceSettings {
  core::InterferenceOptions policy;     // ceiling, weight, defaultFactor, fadeBelowFree
  bool learn_from_usage = true;         // learn per-workload utilization from tessera.io/usage
  core::WorkloadHistoryOptions history; // historyAlpha, historySpread, historyMaxAgeSeconds, historyMaxWorkloads
};

struct SchedulerConfig {
  std::string listen_address = "127.0.0.1";
  int port = 12345;
  std::string tls_cert_file;   // both set: serve HTTPS
  std::string tls_key_file;
  std::string kubeconfig;      // empty: $KUBECONFIG, in-cluster, ~/.kube/config
  // Client-side rate limit towards the API server. Every GPU pod's bind is
  // one request, so keep it at least at kube-scheduler's clientConnection.qps.
  double api_qps = 200;
  int api_burst = 400;
  std::string policy = "tessera";
  // Filter answers only the node Tessera chooses among those that fit, so
  // kube-scheduler binds the pod there without scoring or a prioritize call
  // (ExtenderOptions::filter_returns_best; docs/scheduler-extender.md).
  bool filter_returns_best = true;
  // The second extenders entry's prioritize also scores pods that ask for no
  // GPU, so they land where they strand the least GPU capacity
  // (ExtenderOptions::place_pods_without_gpus; docs/scheduler-extender.md,
  // "Pods without GPUs"). Needs that entry in kube-scheduler's configuration.
  bool place_pods_without_gpus = true;
  // Namespaces whose pods may ask tessera.io/isolation: none (their shares
  // placed and booked, nothing enforcing them); "*": every namespace. Empty
  // (the default): no pod may (ExtenderOptions::isolation_none_namespaces).
  std::vector<std::string> isolation_none_namespaces;
  // Tessera's resource names, and the compatibility front ends (gpushare,
  // HAMi; both off by default) under `frontEnds` in the file.
  core::ResourceNames resources;
  std::chrono::seconds assume_ttl{60};
  // How long a bind waits for its node (one with a node agent) to admit the
  // pod bound there before; below kube-scheduler's extender httpTimeout.
  std::chrono::milliseconds admission_wait{4000};
  LeaderElectionConfig leader_election;
  PreemptionSettings preemption;
  InterferenceSettings interference;
  // DRA (`dra.deviceClasses`): the DeviceClasses whose requests are
  // Tessera's GPUs, so claim pods asking for them are steered
  // (docs/scheduler-extender.md, "DRA claim pods"). The chart passes its
  // dra.deviceClassName.
  std::vector<std::string> dra_device_classes = {"gpu.tessera.io"};
  std::string log_level = "info";
  uint64_t seed = 1;

  bool tls() const { return !tls_cert_file.empty(); }
};

// Parses the YAML text of a configuration file (unknown keys are an error, so
// a typo does not silently fall back to a default). `source` names the file in
// messages: "config.yaml: policy: unknown policy \"bin-pack\" (known: ...)".
Result<SchedulerConfig> ParseConfig(const std::string& yaml_text, const std::string& source);
Result<SchedulerConfig> LoadConfigFile(const std::string& path);

// Checks values a file or a flag may get wrong: port range, policy name,
// resource names (the enabled front ends' too, all distinct), TLS files given in pairs, positive TTL, log level.
Status ValidateConfig(const SchedulerConfig& config);

}  // namespace tessera::scheduler
