// tessera-dev: developer commands for the local cluster (tests, benchmarks and
// the demo): create or delete simulated GPU nodes, wait for the scheduler, and
// print who holds which GPU share and what each container was handed.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/codec.h"
#include "kube/client.h"
#include "tests/kubelet_sim/kubelet_sim.h"  // kSimAllocationsAnnotation only: no link dependency
#include "tests/support/cluster_env.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {


std::string Key(const nlohmann::json& pod) {
  return pod["metadata"]["namespace"].get<std::string>() + "/" + pod["metadata"]["name"].get<std::string>();
}


// Every pod in `ns` is bound or has a FailedScheduling event; with `admitted`,
// every bound pod has also been admitted or refused by its node (Running or Failed).
Status WaitScheduled(kube::Client& client, const std::string& ns, int timeout_s, bool admitted) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(auto pods, client.List("/api/v1/namespaces/" + ns + "/pods"));
    int waiting = 0;
    for (const auto& p : pods["items"]) {
      if (IsBound(p)) {
        waiting += admitted && Phase(p) != "Running" && Phase(p) != "Failed" && Phase(p) != "Succeeded";
        continue;
      }
      if (PodEvents(client, ns, p["metadata"]["name"].get<std::string>(), "FailedScheduling").empty()) ++waiting;
    }
    if (waiting == 0) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) {
      return FailedPrecondition(std::to_string(waiting) + " pods neither " + (admitted ? "running" : "scheduled") +
                                " nor rejected after " + std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status Report(kube::Client& client, const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(auto nodes, client.List("/api/v1/nodes"));
  TESSERA_ASSIGN_OR_RETURN(auto pods, client.List(ns.empty() ? "/api/v1/pods" : "/api/v1/namespaces/" + ns + "/pods"));
  struct Holder { std::string who; int64_t mem; int64_t core; };
  std::map<std::pair<std::string, int>, std::vector<Holder>> holders;
  std::vector<nlohmann::json> pending;
  for (const auto& p : pods["items"]) {
    if (!IsBound(p)) {
      pending.push_back(p);
      continue;
    }
    auto assignment = core::DecodeAssignment(Annotation(p, core::kAssignmentAnnotation));
    if (!assignment.ok()) continue;
    for (const auto& c : assignment->containers) {
      for (const auto& g : c.gpus) {
        holders[{assignment->node, g.index}].push_back({Key(p) + "[" + c.name + "]", g.mem_mib, g.core_milli});
      }
    }
  }
  std::printf("%-12s %-4s %-6s %-19s %-10s %s\n", "NODE", "GPU", "MODEL", "MEMORY MiB", "CORE", "HELD BY");
  for (const auto& n : nodes["items"]) {
    const std::string name = n["metadata"]["name"];
    auto gpus = core::DecodeInventory(Annotation(n, core::kInventoryAnnotation));
    if (!gpus.ok()) continue;
    for (const auto& gpu : *gpus) {
      const auto& list = holders[{name, gpu.index}];
      int64_t mem = 0, core = 0;
      for (const auto& h : list) {
        mem += h.mem;
        core += h.core;
      }
      char used[40];
      std::snprintf(used, sizeof used, "%6lld / %-6lld", static_cast<long long>(mem),
                    static_cast<long long>(gpu.memory_mib));
      std::string who;
      for (const auto& h : list) {
        who += (who.empty() ? "" : ", ") + h.who + " " + std::to_string(h.mem) + "MiB/" +
               std::to_string(h.core / 10) + "%";
      }
      std::printf("%-12s %-4d %-6s %-19s %3lld%%       %s\n", name.c_str(), gpu.index, gpu.model.c_str(), used,
                  static_cast<long long>(core / 10), who.empty() ? "-" : who.c_str());
    }
  }
  if (!pending.empty()) {
    std::printf("\nNot scheduled:\n");
    for (const auto& p : pending) {
      auto events = PodEvents(client, p["metadata"]["namespace"], p["metadata"]["name"], "FailedScheduling");
      std::printf("  %s: %s\n", Key(p).c_str(), events.empty() ? "(waiting)" : events.back().c_str());
    }
  }
  return Status::Ok();
}

// Per container of each bound pod, what its node handed it: the env the
// kubelet stand-in recorded (kubelet-sim.tessera.io/allocations) for Running
// pods, the node's refusal for Failed ones. GPU i's limits are the
// TESSERA_GPU_{MEM_LIMIT_MIB,CORE_PERCENT}_<i> values; GPUs are also shown as
// the node's indices (the report's GPU column).
Status Allocations(kube::Client& client, const std::string& ns) {
  TESSERA_ASSIGN_OR_RETURN(auto nodes, client.List("/api/v1/nodes"));
  TESSERA_ASSIGN_OR_RETURN(auto pods, client.List(ns.empty() ? "/api/v1/pods" : "/api/v1/namespaces/" + ns + "/pods"));
  std::map<std::string, int> gpu_index;  // uuid -> index on its node
  for (const auto& n : nodes["items"]) {
    auto gpus = core::DecodeInventory(Annotation(n, core::kInventoryAnnotation));
    if (gpus.ok()) {
      for (const auto& g : *gpus) gpu_index[g.uuid] = g.index;
    }
  }
  struct Row { std::string who, node, phase, gpus, visible, mem, core; };
  std::vector<Row> rows;
  std::vector<std::pair<std::string, std::string>> refused;
  for (const auto& p : pods["items"]) {
    if (!IsBound(p)) continue;
    const std::string node = p["spec"].value("nodeName", "");
    if (Phase(p) == "Failed") {
      refused.push_back({Key(p), p["status"].value("reason", "") + ": " + p["status"].value("message", "")});
      continue;
    }
    const std::string recorded = Annotation(p, kSimAllocationsAnnotation);
    const auto allocations = nlohmann::json::parse(recorded.empty() ? "{}" : recorded, nullptr, false);
    if (recorded.empty() || !allocations.is_object()) {
      rows.push_back({Key(p), node, Phase(p), "-", "(nothing recorded)", "-", "-"});
      continue;
    }
    for (const auto& [container, a] : allocations.items()) {
      const auto envs = a.is_object() ? a.value("envs", nlohmann::json::object()) : nlohmann::json::object();
      auto env = [&](const std::string& name) { return envs.value(name, std::string()); };
      Row row{Key(p) + "[" + container + "]", node, Phase(p), "", "", "", ""};
      int count = 0;
      try {
        count = std::stoi(env("TESSERA_GPU_COUNT"));
      } catch (const std::exception&) {
      }
      for (int i = 0; i < count; ++i) {
        const std::string uuid = env("TESSERA_GPU_UUID_" + std::to_string(i));
        const std::string sep = i ? "," : "";
        row.gpus += sep + (gpu_index.count(uuid) ? std::to_string(gpu_index[uuid]) : "?");
        row.mem += sep + env("TESSERA_GPU_MEM_LIMIT_MIB_" + std::to_string(i));
        row.core += sep + env("TESSERA_GPU_CORE_PERCENT_" + std::to_string(i));
      }
      row.visible = env("NVIDIA_VISIBLE_DEVICES");
      rows.push_back(std::move(row));
    }
  }
  size_t who_width = 14;
  for (const auto& r : rows) who_width = std::max(who_width, r.who.size());
  // NVIDIA_VISIBLE_DEVICES (full uuids) goes last: the only wide column.
  constexpr const char* kRow = "%-*s %-8s %-7s %-4s %-15s %-14s %s\n";
  std::printf(kRow, static_cast<int>(who_width), "POD[CONTAINER]", "NODE", "PHASE", "GPU", "MEM_LIMIT_MIB_i",
              "CORE_PERCENT_i", "NVIDIA_VISIBLE_DEVICES");
  for (const auto& r : rows) {
    std::printf(kRow, static_cast<int>(who_width), r.who.c_str(), r.node.c_str(), r.phase.c_str(), r.gpus.c_str(),
                r.mem.c_str(), r.core.c_str(), r.visible.c_str());
  }
  if (!refused.empty()) {
    std::printf("\nRefused by their node:\n");
    for (const auto& [who, why] : refused) std::printf("  %s: %s\n", who.c_str(), why.c_str());
  }
  return Status::Ok();
}

int Fail(const Status& s) {
  std::cerr << "tessera-dev: " << s.message() << "\n";
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
}

}  // namespace
}  // namespace tessera::testing

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"tessera-dev: simulated GPU nodes and placement reports for the local cluster"};
  std::string kubeconfig;
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.require_subcommand(1);
  std::string nodes_file;
  auto* create = app.add_subcommand("create-nodes", "create the simulated GPU nodes a nodes file describes");
  create->add_option("file", nodes_file, "nodes YAML (see examples/cluster/nodes.yaml)")->required();
  auto* remove = app.add_subcommand("delete-nodes", "delete the nodes a nodes file describes");
  remove->add_option("file", nodes_file)->required();
  std::string ns = "default";
  int timeout_s = 60;
  auto* wait = app.add_subcommand("wait-scheduled", "wait until every pod is bound or rejected by the scheduler");
  wait->add_option("--namespace,-n", ns);
  wait->add_option("--timeout", timeout_s, "seconds");
  bool admitted = false;
  wait->add_flag("--admitted", admitted, "also wait until each bound pod is Running or Failed on its node");
  auto* report = app.add_subcommand("report", "who holds which GPU share, and why pods are pending");
  report->add_option("--namespace,-n", ns, "namespace of the pods (\"\" for all)");
  auto* allocations = app.add_subcommand(
      "allocations", "per container of each bound pod, the GPUs and limits its node (the kubelet stand-in) gave it");
  allocations->add_option("--namespace,-n", ns, "namespace of the pods (\"\" for all)");
  CLI11_PARSE(app, argc, argv);

  auto config = kube::ResolveConfig(kubeconfig);
  if (!config.ok()) return testing::Fail(config.status());
  kube::Client client(config.value());
  Status s;
  if (create->parsed() || remove->parsed()) {
    auto nodes = testing::LoadSimNodesFile(nodes_file);
    if (!nodes.ok()) return testing::Fail(nodes.status());
    s = create->parsed() ? testing::CreateSimNodes(client, *nodes) : testing::DeleteSimNodes(client, *nodes);
    if (s.ok()) {
      std::printf("%s %zu simulated GPU nodes from %s\n", create->parsed() ? "created" : "deleted", nodes->size(),
                  nodes_file.c_str());
    }
  } else if (wait->parsed()) {
    s = testing::WaitScheduled(client, ns, timeout_s, admitted);
  } else if (allocations->parsed()) {
    s = testing::Allocations(client, ns);
  } else {
    s = testing::Report(client, ns);
  }
  return s.ok() ? 0 : testing::Fail(s);
}
