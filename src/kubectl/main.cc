// kubectl-tessera: the kubectl plugin (kubectl tessera ...) that shows who
// holds which GPU share (inspect), one pod's assignment (inspect pod) and
// live GPU use (top). Wiring only: flags, the API reads, the views.
// Exit codes: 0 ok, 1 runtime error, 2 usage error.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "kube/config.h"
#include "kubectl/cluster_reader.h"
#include "kubectl/inspect_view.h"
#include "kubectl/inventory.h"
#include "kubectl/pod_view.h"
#include "kubectl/structured.h"
#include "kubectl/terminal.h"
#include "kubectl/top_view.h"

namespace tessera::kubectl {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

enum class Command { kInspect, kInspectPod, kTop };

struct Flags {
  std::string kubeconfig, context, ns;
  bool all_namespaces = false;
  std::string output = "table";
  std::string color = "auto";
  std::string units = "GiB";
  Command command = Command::kInspect;
  bool details = false;
  std::string detail_node;  // "" with details: every node
  std::string pod;
};

// What main reads from the environment, once.
struct Environment {
  bool stdout_tty = false;
  bool no_color = false;
  const char* columns = nullptr;
};

void Write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void Warn(const std::vector<Problem>& problems) {
  for (const auto& p : problems) std::fprintf(stderr, "warning: %s: %s\n", p.object.c_str(), p.message.c_str());
}

bool Structured(const Flags& f) { return f.output == "json" || f.output == "yaml"; }

std::string Serialize(const Flags& f, const nlohmann::ordered_json& doc) {
  return f.output == "yaml" ? ToYaml(doc) : ToJsonText(doc);
}

// The ResourceClaims of `ns` ("" for all), or none with a warning when they
// cannot be read (a user allowed to list pods but not claims still sees the pods).
nlohmann::json ClaimsOrNone(ClusterReader& reader, const std::string& ns) {
  auto claims = reader.ResourceClaims(ns);
  if (claims.ok()) return std::move(claims).value();
  std::fprintf(stderr, "warning: DRA claims not shown: %s\n", claims.status().message().c_str());
  return nlohmann::json::array();
}

Status Inspect(ClusterReader& reader, const Flags& f, const ViewOptions& view) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json nodes, reader.Nodes());
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json pods, reader.Pods(""));
  const Inventory inv = BuildInventory(nodes, pods, ClaimsOrNone(reader, ""));
  const NodeView* only = nullptr;
  if (f.details && !f.detail_node.empty()) {
    only = inv.FindNode(f.detail_node);
    if (only == nullptr) {
      TESSERA_RETURN_IF_ERROR(reader.Node(f.detail_node).status());
      for (const auto& p : inv.problems) {
        if (p.object == "node " + f.detail_node) return FailedPrecondition(p.object + ": " + p.message);
      }
      return FailedPrecondition("node \"" + f.detail_node + "\" is not a GPU node (no tessera.io/gpu-inventory annotation)");
    }
  }
  if (Structured(f)) {
    Write(Serialize(f, InventoryToJson(inv, only)));
    return Status::Ok();
  }
  Warn(inv.problems);
  if (!f.details) {
    Write(RenderInventoryTable(inv, view));
    return Status::Ok();
  }
  std::string out;
  for (const auto& n : inv.nodes) {
    if (only != nullptr && &n != only) continue;
    if (!out.empty()) out += "\n";
    out += RenderNodeDetail(n, view);
  }
  if (out.empty()) out = "No GPU nodes (no node has a tessera.io/gpu-inventory annotation).\n";
  Write(out);
  return Status::Ok();
}

Status InspectPod(ClusterReader& reader, const Flags& f, const std::string& ns, const ViewOptions& view) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json pod, reader.Pod(ns, f.pod));
  std::optional<nlohmann::json> node;
  if (const auto* name = pod["spec"].is_object() && pod["spec"].contains("nodeName") ? &pod["spec"]["nodeName"] : nullptr;
      name != nullptr && name->is_string()) {
    if (auto n = reader.Node(name->get<std::string>()); n.ok()) node = std::move(n).value();
  }
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json events, reader.PodEvents(ns, f.pod));
  const PodDetail detail = BuildPodDetail(pod, node ? &*node : nullptr, events);
  if (Structured(f)) Write(Serialize(f, PodDetailToJson(detail)));
  else Write(RenderPodDetail(detail, view, std::chrono::system_clock::now()));
  return Status::Ok();
}

Status Top(ClusterReader& reader, const Flags& f, const std::string& ns, const ViewOptions& view) {
  const std::string scope = f.all_namespaces ? "" : ns;
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json pods, reader.Pods(scope));
  const TopView top = BuildTop(pods, ClaimsOrNone(reader, scope));
  if (Structured(f)) {
    Write(Serialize(f, TopToJson(top)));
    return Status::Ok();
  }
  Warn(top.problems);
  Write(RenderTop(top, view, std::chrono::system_clock::now(),
                  f.all_namespaces ? "all namespaces" : "namespace " + ns));
  return Status::Ok();
}

int Run(const Flags& f, const Environment& env) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "kubectl-tessera: %s\n", s.message().c_str());
    return kExitRuntime;
  };
  Result<ColorMode> color = ParseColorMode(f.color);
  if (!color.ok()) {
    std::fprintf(stderr, "kubectl-tessera: %s\n", color.status().message().c_str());
    return kExitUsage;
  }
  ViewOptions view;
  view.table.color = UseColor(*color, env.stdout_tty, env.no_color);
  view.table.width = TerminalWidth(STDOUT_FILENO, env.columns);
  view.unit = f.units == "MiB" ? MemUnit::kMiB : MemUnit::kGiB;
  view.wide = f.output == "wide";

  Result<kube::ClientConfig> config = kube::ResolveConfig(f.kubeconfig, f.context);
  if (!config.ok()) return fail(config.status());
  config->max_retries = 1;  // a person is waiting; say what is wrong rather than retry for long
  config->timeout = std::chrono::seconds(15);
  config->user_agent = "kubectl-tessera";
  const std::string ns = !f.ns.empty() ? f.ns : !config->default_namespace.empty() ? config->default_namespace : "default";
  ClusterReader reader{kube::Client(std::move(config).value())};
  Status s;
  switch (f.command) {
    case Command::kInspect: s = Inspect(reader, f, view); break;
    case Command::kInspectPod: s = InspectPod(reader, f, ns, view); break;
    case Command::kTop: s = Top(reader, f, ns, view); break;
  }
  return s.ok() ? 0 : fail(s);
}

}  // namespace
}  // namespace tessera::kubectl

int main(int argc, char** argv) {
  using namespace tessera::kubectl;
  Flags f;
  CLI::App app{"kubectl tessera: who holds which share of which GPU, per node, pod and container"};
  app.name("kubectl tessera");
  app.require_subcommand(1);
  app.add_option("--kubeconfig", f.kubeconfig, "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", f.context, "kubeconfig context to use (default: its current-context)");
  app.add_option("-n,--namespace", f.ns, "namespace of the pod (inspect pod) or pods (top); default: the context's");
  app.add_flag("-A,--all-namespaces", f.all_namespaces, "top: pods of every namespace");
  app.add_option("-o,--output", f.output, "table, wide, json or yaml")
      ->check(CLI::IsMember({"table", "wide", "json", "yaml"}));
  app.add_option("--color", f.color, "auto (on a terminal unless NO_COLOR is set), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--units", f.units, "memory in text output: GiB or MiB")->check(CLI::IsMember({"GiB", "MiB"}));

  auto* inspect = app.add_subcommand("inspect", "per node and GPU: model, memory and compute held, pods, totals");
  inspect->fallthrough();
  inspect->add_option("-d,--details", f.detail_node, "every container share on NODE's GPUs (every node without NODE)")
      ->expected(0, 1);
  auto* pod = inspect->add_subcommand("pod", "one pod: its GPU shares per container, allocation state, Events");
  pod->fallthrough();
  pod->add_option("name", f.pod, "pod name")->required();
  auto* top = app.add_subcommand("top", "live GPU use per container (tessera.io/usage, written by tessera-node)");
  top->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kubectl-tessera: %s\nRun 'kubectl tessera --help' for usage.\n", e.what());
    return 2;
  }
  f.details = inspect->count("-d") > 0;
  if (pod->parsed()) f.command = Command::kInspectPod;
  else if (top->parsed()) f.command = Command::kTop;
  if (f.details && f.command != Command::kInspect) {
    std::fprintf(stderr, "kubectl-tessera: -d belongs to inspect, not inspect pod\n");
    return 2;
  }
  Environment env;
  env.stdout_tty = ::isatty(STDOUT_FILENO) != 0;
  const char* no_color = std::getenv("NO_COLOR");
  env.no_color = no_color != nullptr && no_color[0] != '\0';
  env.columns = std::getenv("COLUMNS");
  return Run(f, env);
}
