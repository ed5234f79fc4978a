// tessera-nodesim: plays the nodes of a nodes file (examples/cluster/nodes.yaml)
// on the real node path for the demo and for trying Tessera by hand: per node
// a Node object, a real tessera-node in simulated mode and a kubelet stand-in
// (a NodeFarm), until SIGINT or SIGTERM.
//
//   tessera-nodesim examples/cluster/nodes.yaml --kubeconfig DIR/kubeconfig
//                   --log-dir DIR/logs --pid-dir DIR/pids --ready-file DIR/nodesim.ready
//                   [--agent-flag=--log-level=debug ...]
//   With a compatibility front end on (docs/migration.md), the agents serve its
//   resource too and each node needs a stand-in for it:
//                   --agent-flag=--gpushare=true --extra-resource aliyun.com/gpu-mem
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "kube/config.h"
#include "tests/kubelet_sim/node_farm.h"

namespace tessera::testing {
namespace {

struct NodesimFlags {
  std::string nodes_file;
  std::string kubeconfig;
  std::string log_dir = (std::filesystem::temp_directory_path() / "tessera-nodesim-logs").string();
  std::string pid_dir;
  std::string ready_file;
  int ready_timeout_s = 60;
  std::vector<std::string> agent_flags;  // appended to every tessera-node's flags
  std::string agent_kubeconfig;          // the agents' own credentials; "": --kubeconfig
  std::vector<std::string> extra_resources;  // NodeFarmOptions::extra_resources
};

// One line per node: name, GPUs, slots, where /metrics and the agent's log are.
std::string DescribeNodes(NodeFarm& farm) {
  size_t width = 4;
  for (size_t i = 0; i < farm.size(); ++i) width = std::max(width, farm.node(i).info.name.size());
  std::string out;
  for (size_t i = 0; i < farm.size(); ++i) {
    const SimNode& n = farm.node(i);
    const auto& gpus = n.info.gpus;
    const std::string model = gpus.empty() ? "-" : gpus.front().model;
    const long long mem = gpus.empty() ? 0 : static_cast<long long>(gpus.front().memory_mib);
    char line[512];
    std::snprintf(line, sizeof line, "%-*s  %zu x %-5s %6lld MiB  %3zu slots  metrics 127.0.0.1:%-5d  log %s\n",
                  static_cast<int>(width), n.info.name.c_str(), gpus.size(), model.c_str(), mem,
                  gpus.size() * static_cast<size_t>(n.slots_per_gpu), farm.MetricsPort(i), farm.AgentLog(i).c_str());
    out += line;
  }
  return out;
}

Status WriteReadyFile(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp");
    out << text;
    if (!out) return Internal("cannot write " + path + ".tmp");
  }
  std::error_code ec;
  std::filesystem::rename(path + ".tmp", path, ec);  // whoever waits on it never reads half a file
  if (ec) return Internal("cannot rename to " + path + ": " + ec.message());
  return Status::Ok();
}

// Waits for SIGINT/SIGTERM (blocked in every thread by the caller); meanwhile
// says once per agent when a tessera-node exits. It is not restarted: when
// cluster-down.sh reaps the agents' pid files before ours, that is no crash.
void RunUntilSignalled(NodeFarm& farm, const sigset_t& signals) {
  const timespec tick{1, 0};
  std::vector<bool> reported(farm.size(), false);
  while (sigtimedwait(&signals, nullptr, &tick) < 0) {
    for (size_t i = 0; i < farm.size(); ++i) {
      if (reported[i] || farm.AgentRunning(i)) continue;
      reported[i] = true;
      std::cerr << "tessera-nodesim: tessera-node of " << farm.node(i).info.name << " exited; see "
                << farm.AgentLog(i) << "\n";
    }
  }
}

int Run(const NodesimFlags& flags, const sigset_t& signals) {
  auto nodes = LoadSimNodesFile(flags.nodes_file);
  if (!nodes.ok()) {
    std::cerr << "tessera-nodesim: " << nodes.status().message() << "\n";
    return 2;
  }
  auto config = kube::ResolveConfig(flags.kubeconfig);
  if (!config.ok()) {
    std::cerr << "tessera-nodesim: cannot find the API server: " << config.status().message() << "\n";
    return 2;
  }
  config->user_agent = "tessera-nodesim";
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string bin_dir = ec ? "." : self.parent_path().string();
  if (::access((bin_dir + "/tessera-node").c_str(), X_OK) != 0) {
    std::cerr << "tessera-nodesim: " << bin_dir << "/tessera-node not found; build the tessera-node target\n";
    return 1;
  }
  if (!flags.ready_file.empty()) std::filesystem::remove(flags.ready_file, ec);
  if (!flags.pid_dir.empty()) std::filesystem::create_directories(flags.pid_dir, ec);

  NodeFarmOptions options;
  options.bin_dir = bin_dir;
  // "": each tessera-node resolves it as we did
  options.kubeconfig = flags.agent_kubeconfig.empty() ? flags.kubeconfig : flags.agent_kubeconfig;
  options.log_dir = flags.log_dir;
  options.pid_dir = flags.pid_dir;
  options.ready_timeout = std::chrono::seconds(flags.ready_timeout_s);
  options.agent_flags = flags.agent_flags;
  options.extra_resources = flags.extra_resources;
  kube::Client client(std::move(config).value());
  auto farm = NodeFarm::Start(client, std::move(nodes).value(), options);
  if (!farm.ok()) {
    std::cerr << "tessera-nodesim: " << farm.status().message() << "\n";
    return 1;
  }
  const std::string described = DescribeNodes(**farm);
  std::cout << described << std::flush;
  if (!flags.ready_file.empty()) {
    if (auto st = WriteReadyFile(flags.ready_file, described); !st.ok()) {
      std::cerr << "tessera-nodesim: " << st.message() << "\n";
      return 1;
    }
  }
  RunUntilSignalled(**farm, signals);
  std::cout << "tessera-nodesim: stopping " << (*farm)->size() << " simulated nodes" << std::endl;
  if (!flags.ready_file.empty()) std::filesystem::remove(flags.ready_file, ec);
  farm->reset();  // stops every tessera-node (SIGTERM) and stand-in; the Node objects stay
  return 0;
}

}  // namespace
}  // namespace tessera::testing

int main(int argc, char** argv) {
  tessera::testing::NodesimFlags flags;
  CLI::App app{"tessera-nodesim: simulated GPU nodes on the real node path (tessera-node + kubelet stand-in each)"};
  app.add_option("nodes-file", flags.nodes_file, "nodes YAML (see examples/cluster/nodes.yaml)")->required();
  app.add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--log-dir", flags.log_dir, "where tessera-node-<node>.log files go")->capture_default_str();
  app.add_option("--pid-dir", flags.pid_dir, "write tessera-node-<node>.pid files here (cluster-down.sh reaps them)");
  app.add_option("--ready-file", flags.ready_file, "written (the per-node lines) once every node is ready");
  app.add_option("--ready-timeout", flags.ready_timeout_s, "seconds each node may take to list its slots")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--agent-kubeconfig", flags.agent_kubeconfig,
                 "kubeconfig of the tessera-node processes when not --kubeconfig's (e.g. a ServiceAccount's "
                 "token, to run them with exactly a chart's RBAC; the Node objects are still made with --kubeconfig)");
  app.add_option("--agent-flag", flags.agent_flags,
                 "a flag appended to every tessera-node's command line, as --agent-flag=--log-level=debug "
                 "(repeatable; the helm chart test passes the chart's flags this way)");
  app.add_option("--extra-resource", flags.extra_resources,
                 "a further device-plugin resource the agents serve (a compatibility front end's: "
                 "aliyun.com/gpu-mem with --agent-flag=--gpushare=true, nvidia.com/gpu with "
                 "--agent-flag=--hami=true); each node gets a kubelet stand-in for it (repeatable)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tessera-nodesim: " << e.what() << " (see --help)\n";
    return 2;
  }
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessera-nodesim"));

  // Taken by sigtimedwait in Run; blocked before any thread starts so none
  // takes them. A background job of a non-interactive shell starts with
  // SIGINT ignored, which would discard it: restore the default first.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return tessera::testing::Run(flags, signals);
}
