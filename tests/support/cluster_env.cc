#include "tests/support/cluster_env.h"

#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "core/codec.h"

namespace tessera::testing {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

const nlohmann::json& Annotations(const nlohmann::json& obj) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto meta = obj.find("metadata");
  if (meta == obj.end()) return kEmpty;
  auto a = meta->find("annotations");
  return a == meta->end() ? kEmpty : *a;
}

}  // namespace

Result<ClusterEnv> ClusterEnv::FromEnvironment() {
  ClusterEnv env;
  env.kubeconfig = Env("TESSERA_TEST_KUBECONFIG");
  env.dir = Env("TESSERA_TEST_CLUSTER_DIR");
  env.bin_dir = Env("TESSERA_BIN_DIR");
  // By hand: `source DIR/cluster.env` sets TESSERA_CLUSTER_DIR.
  if (env.dir.empty()) env.dir = Env("TESSERA_CLUSTER_DIR");
  if (env.kubeconfig.empty() && !env.dir.empty()) env.kubeconfig = env.dir + "/kubeconfig";
  if (env.bin_dir.empty()) env.bin_dir = "build/bin";
  if (env.kubeconfig.empty() || env.dir.empty()) {
    return FailedPrecondition(
        "TESSERA_TEST_CLUSTER_DIR (or TESSERA_CLUSTER_DIR) not set: run through ctest (the cluster fixture) "
        "or source DIR/cluster.env from tools/controlplane/cluster-up.sh, and set TESSERA_BIN_DIR");
  }
  std::ifstream in(env.dir + "/cluster.env");
  std::string line;
  while (std::getline(in, line)) {
    const std::string key = "export TESSERA_EXTENDER_PORT=";
    if (line.rfind(key, 0) == 0) env.extender_port = std::atoi(line.c_str() + key.size());
  }
  if (env.extender_port <= 0) return FailedPrecondition("no TESSERA_EXTENDER_PORT in " + env.dir + "/cluster.env");
  return env;
}

Result<kube::Client> ClusterEnv::MakeClient() const {
  TESSERA_ASSIGN_OR_RETURN(kube::ClientConfig config, kube::LoadKubeconfig(kubeconfig));
  config.qps = 200;
  config.burst = 400;
  return kube::Client(std::move(config));
}

Result<ChildProcess> ClusterEnv::StartExtender(const std::vector<std::string>& extra_flags,
                                               std::chrono::seconds ready_timeout) const {
  std::vector<std::string> argv = {bin_dir + "/tessera-scheduler",
                                   "--kubeconfig", kubeconfig,
                                   "--listen-address", "127.0.0.1",
                                   "--port", std::to_string(extender_port)};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  if (std::find(extra_flags.begin(), extra_flags.end(), "--log-level") == extra_flags.end()) {
    argv.insert(argv.end(), {"--log-level", "debug"});
  }
  TESSERA_ASSIGN_OR_RETURN(ChildProcess child,
                           ChildProcess::Start(argv, dir + "/logs/tessera-scheduler.log",
                                               dir + "/pids/tessera-scheduler-" + std::to_string(extender_port) +
                                                   ".pid"));
  httplib::Client http("127.0.0.1", extender_port);
  http.set_connection_timeout(std::chrono::milliseconds(200));
  const auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!child.running()) return Internal("tessera-scheduler exited at start; see " + dir + "/logs/tessera-scheduler.log");
    if (auto res = http.Get("/readyz"); res && res->status == 200) return child;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Internal("tessera-scheduler not ready after " + std::to_string(ready_timeout.count()) + " s; see " + dir +
                  "/logs/tessera-scheduler.log");
}

nlohmann::json GpuPod(const std::string& ns, const std::string& name, const std::vector<ContainerShape>& containers,
                      const std::map<std::string, std::string>& selector,
                      const std::map<std::string, std::string>& annotations) {
  nlohmann::json spec_containers = nlohmann::json::array();
  for (const auto& c : containers) {
    nlohmann::json limits = nlohmann::json::object();
    if (c.gpus > 0) limits["tessera.io/gpu"] = std::to_string(c.gpus);
    if (c.mem_mib > 0) limits["tessera.io/gpu-mem"] = std::to_string(c.mem_mib);
    if (c.core_percent > 0) limits["tessera.io/gpu-core"] = std::to_string(c.core_percent);
    spec_containers.push_back({{"name", c.name},
                               {"image", "registry.example/test:1"},
                               {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}}, {"limits", limits}}}});
  }
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}, {"namespace", ns}}},
                        {"spec", {{"containers", spec_containers}, {"terminationGracePeriodSeconds", 0}}}};
  if (!selector.empty()) pod["spec"]["nodeSelector"] = selector;
  if (!annotations.empty()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

std::string Annotation(const nlohmann::json& object, std::string_view key) {
  const auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  const auto annotations = meta->find("annotations");
  if (annotations == meta->end() || !annotations->is_object()) return "";
  const auto value = annotations->find(std::string(key));
  return value != annotations->end() && value->is_string() ? value->get<std::string>() : "";
}

std::string Phase(const nlohmann::json& pod) {
  const auto status = pod.find("status");
  return status != pod.end() && status->is_object() ? status->value("phase", "") : "";
}

bool IsBound(const nlohmann::json& pod) {
  return pod.contains("spec") && !pod["spec"].value("nodeName", std::string()).empty();
}

Result<nlohmann::json> WaitForPod(kube::Client& client, const std::string& ns, const std::string& name,
                                  const std::function<bool(const nlohmann::json&)>& done,
                                  std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  nlohmann::json last;
  while (true) {
    auto pod = client.Get(path);
    if (pod.ok()) {
      last = pod.value();
      if (done(last)) return last;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return FailedPrecondition("timed out after " + std::to_string(timeout.count()) + " s waiting for pod " + ns +
                                "/" + name + (pod.ok() ? "" : ": " + pod.status().message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<std::string> PodEvents(kube::Client& client, const std::string& ns, const std::string& name,
                                   const std::string& reason) {
  std::vector<std::string> out;
  auto events = client.List("/api/v1/namespaces/" + ns + "/events", "",
                            "involvedObject.name=" + name + ",reason=" + reason);
  if (!events.ok()) return out;
  for (const auto& e : events.value()["items"]) out.push_back(e.value("message", std::string()));
  return out;
}

std::vector<std::string> FindOvercommit(kube::Client& client, const std::string& node_selector) {
  std::vector<std::string> problems;
  auto nodes = client.List("/api/v1/nodes", node_selector);
  auto pods = client.List("/api/v1/pods");
  if (!nodes.ok() || !pods.ok()) return {"cannot list nodes or pods"};
  std::map<std::string, std::vector<core::GpuInfo>> inventory;
  std::set<std::string> judged;  // the selected nodes
  for (const auto& n : nodes.value()["items"]) {
    judged.insert(n["metadata"]["name"].get<std::string>());
    const auto& a = Annotations(n);
    auto it = a.find(std::string(core::kInventoryAnnotation));
    if (it == a.end()) continue;
    auto gpus = core::DecodeInventory(it->get<std::string>());
    if (gpus.ok()) inventory[n["metadata"]["name"].get<std::string>()] = gpus.value();
  }
  std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>> used;  // mem, core
  for (const auto& p : pods.value()["items"]) {
    const std::string key = p["metadata"]["namespace"].get<std::string>() + "/" + p["metadata"]["name"].get<std::string>();
    const std::string phase = p.contains("status") ? p["status"].value("phase", std::string()) : "";
    if (phase == "Succeeded" || phase == "Failed" || !IsBound(p)) continue;
    const std::string node = p["spec"]["nodeName"].get<std::string>();
    if (!node_selector.empty() && !judged.contains(node)) continue;
    const auto& a = Annotations(p);
    auto it = a.find(std::string(core::kAssignmentAnnotation));
    if (it == a.end()) {
      problems.push_back(key + " is bound without an assignment annotation");
      continue;
    }
    auto assignment = core::DecodeAssignment(it->get<std::string>());
    if (!assignment.ok()) {
      problems.push_back(key + ": " + assignment.status().message());
      continue;
    }
    if (assignment->node != node) problems.push_back(key + " is bound to " + node + " but assigned to " + assignment->node);
    for (const auto& c : assignment->containers) {
      for (const auto& g : c.gpus) {
        auto& u = used[{node, g.index}];
        u.first += g.mem_mib;
        u.second += g.core_milli;
      }
    }
  }
  for (const auto& [where, u] : used) {
    auto inv = inventory.find(where.first);
    if (inv == inventory.end() || where.second >= static_cast<int>(inv->second.size())) {
      problems.push_back(where.first + " GPU " + std::to_string(where.second) + " is not in the node's inventory");
      continue;
    }
    const auto& gpu = inv->second[where.second];
    if (u.first > gpu.memory_mib || u.second > core::kCoreMilliPerGpu) {
      problems.push_back(where.first + " GPU " + std::to_string(where.second) + " over-committed: " +
                         std::to_string(u.first) + "/" + std::to_string(gpu.memory_mib) + " MiB, " +
                         std::to_string(u.second) + "/1000 core milli");
    }
  }
  return problems;
}

Status CreateNamespace(kube::Client& client, const std::string& ns) {
  Status s = client.Create("/api/v1/namespaces", {{"apiVersion", "v1"}, {"kind", "Namespace"},
                                                  {"metadata", {{"name", ns}}}}).status();
  if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
  // The ServiceAccount admission plugin refuses pods until the fixture's
  // kube-controller-manager has made the namespace's `default` account
  // (usually within milliseconds; the plugin itself retries about 1 s).
  const std::string sa = "/api/v1/namespaces/" + ns + "/serviceaccounts/default";
  for (int i = 0; i < 200; ++i) {
    if (client.Get(sa).ok()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return FailedPrecondition("namespace " + ns + " has no default ServiceAccount after 10 s");
}

Status DeleteNamespace(kube::Client& client, const std::string& ns) {
  // Pods first, with grace 0: their shares are released at once, and a pod
  // on a simulated node has no kubelet to finish a graceful deletion, which
  // would keep the namespace terminating. Then the namespace, which the
  // fixture's namespace controller empties and removes.
  auto pods = client.List("/api/v1/namespaces/" + ns + "/pods");
  if (pods.ok()) {
    for (const auto& p : pods.value()["items"]) {
      (void)client.Delete("/api/v1/namespaces/" + ns + "/pods/" + p["metadata"]["name"].get<std::string>(), 0);
    }
  }
  Status s = client.Delete("/api/v1/namespaces/" + ns);
  return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
}

}  // namespace tessera::testing
