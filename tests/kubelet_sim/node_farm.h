// Simulated GPU nodes on the real node path, for e2e tests, benchmarks and the
// demo: per node its Node object, a GPU file, a tessera-node process in
// simulated mode and an in-process kubelet stand-in in its own socket folder.
//
//   auto farm = NodeFarm::Start(client, UniformSimNodes("n", 5, 4, "A100", 81920), options);
//   farm.value()->Kubelet(0).SetPaused(true);
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/client.h"
#include "tests/kubelet_sim/kubelet_sim.h"
#include "tests/support/process.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {

struct NodeFarmOptions {
  std::string bin_dir;                        // holds tessera-node
  std::string kubeconfig;                     // passed to each tessera-node
  std::string log_dir;                        // tessera-node-<node>.log files go here
  std::string pid_dir;                        // when set, <node>.pid files (cluster-down.sh reaps them)
  std::vector<std::string> agent_flags;       // appended to every tessera-node's flags
  std::chrono::milliseconds resync{200};      // tessera-node --resync-ms
  std::chrono::milliseconds reconcile{500};   // tessera-node --reconcile-interval-ms
  std::chrono::milliseconds kubelet_poll{100};
  std::chrono::seconds ready_timeout{60};     // registration and the full slot list
  // Further device-plugin resources the agents serve (the compatibility front
  // ends', e.g. aliyun.com/gpu-mem with agent_flags --gpushare=true): each
  // node gets one more kubelet stand-in per resource behind the same
  // kubelet.sock, and Start waits until each lists some devices.
  std::vector<std::string> extra_resources;
};

class NodeFarm {
 public:
  // Creates the Node objects (replacing same-named ones), then per node a
  // kubelet stand-in and a tessera-node, and waits until every plugin has
  // registered and listed all its slots. Errors name the node and its log.
  static Result<std::unique_ptr<NodeFarm>> Start(const kube::Client& client, std::vector<SimNode> nodes,
                                                 NodeFarmOptions options);
  NodeFarm(const NodeFarm&) = delete;
  NodeFarm& operator=(const NodeFarm&) = delete;
  // Stops the agents and stand-ins and removes the work folder; the Node objects stay.
  ~NodeFarm();

  size_t size() const;
  const SimNode& node(size_t i) const;
  KubeletSim& Kubelet(size_t i);
  // Node i's stand-in for options.extra_resources[k].
  KubeletSim& ExtraKubelet(size_t i, size_t k);
  std::string AgentLog(size_t i) const;
  // Where node i's region folders are created (<pod uid>/<container>).
  std::string RegionRoot(size_t i) const;
  // Node i's tessera-node serves /metrics on 127.0.0.1 at this port.
  int MetricsPort(size_t i) const;
  // The sum of counter `name` over every running agent's /metrics.
  Result<uint64_t> SumCounter(const std::string& name);

  // Stops node i's tessera-node with `signal` (SIGKILL: as if it crashed).
  void StopAgent(size_t i, int signal);
  // Starts it again (no-op when running), with `extra_flags` after the usual ones.
  Status StartAgent(size_t i, const std::vector<std::string>& extra_flags = {});
  bool AgentRunning(size_t i);
  // Rewrites node i's GPU file atomically; the agent re-reads it every resync.
  Status WriteGpus(size_t i, const std::vector<core::GpuInfo>& gpus);
  // Waits until node i's stand-in lists `slots` healthy devices.
  bool WaitForSlots(size_t i, size_t slots, std::chrono::milliseconds timeout);

 private:
  struct Member;
  NodeFarm(kube::Client client, NodeFarmOptions options, std::string work_dir);

  kube::Client client_;
  NodeFarmOptions options_;
  std::string work_dir_;
  std::vector<std::unique_ptr<Member>> members_;
};

// Stops `farm` (when set) and deletes its Node objects: a test's teardown.
void StopFarm(kube::Client& client, std::unique_ptr<NodeFarm>& farm);

}  // namespace tessera::testing
