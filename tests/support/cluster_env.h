// What a test needs to reach the loopback cluster started by the ctest
// fixture (tools/controlplane/cluster-up.sh), and helpers to run
// tessera-scheduler against it and to wait on pods.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/client.h"
#include "tests/support/process.h"

namespace tessera::testing {

struct ClusterEnv {
  std::string kubeconfig;   // TESSERA_TEST_KUBECONFIG
  std::string dir;          // TESSERA_TEST_CLUSTER_DIR
  std::string bin_dir;      // TESSERA_BIN_DIR (tessera-scheduler, tessera-dev)
  int extender_port = 0;    // from DIR/cluster.env: where kube-scheduler calls the extender

  // Reads the environment; FAILED_PRECONDITION saying what is missing.
  static Result<ClusterEnv> FromEnvironment();
  Result<kube::Client> MakeClient() const;

  // Starts tessera-scheduler on the extender port (leader election on, in
  // namespace kube-system) and waits until /readyz answers 200. Its log goes
  // to DIR/logs/tessera-scheduler.log; extra flags are appended.
  Result<ChildProcess> StartExtender(const std::vector<std::string>& extra_flags = {},
                                     std::chrono::seconds ready_timeout = std::chrono::seconds(30)) const;
};

// A pod asking, per container, for {gpus, memMiB, corePercent}; 0 leaves a
// resource out. `selector` becomes the pod's nodeSelector.
struct ContainerShape {
  std::string name;
  int gpus = 1;
  int64_t mem_mib = 0;
  int core_percent = 0;
};
nlohmann::json GpuPod(const std::string& ns, const std::string& name, const std::vector<ContainerShape>& containers,
                      const std::map<std::string, std::string>& selector = {},
                      const std::map<std::string, std::string>& annotations = {});

// Polls GET pod until `done(pod)` or the timeout; the last pod seen (or the
// error) comes back. DEADLINE as FAILED_PRECONDITION "timed out after ...".
Result<nlohmann::json> WaitForPod(kube::Client& client, const std::string& ns, const std::string& name,
                                  const std::function<bool(const nlohmann::json&)>& done,
                                  std::chrono::seconds timeout = std::chrono::seconds(60));
bool IsBound(const nlohmann::json& pod);
// metadata.annotations[key] of `object` ("" when absent or not a string).
std::string Annotation(const nlohmann::json& object, std::string_view key);
// status.phase of `pod` ("" when absent).
std::string Phase(const nlohmann::json& pod);
// Messages of the pod's events with `reason` (e.g. "FailedScheduling").
std::vector<std::string> PodEvents(kube::Client& client, const std::string& ns, const std::string& name,
                                   const std::string& reason);

// Per node and GPU index, the memory and core the live pods' assignment
// annotations hold, checked against the nodes' inventories: one message per
// over-committed GPU (empty = none), plus any pod bound without an
// assignment or whose assignment names another node. With `node_selector`
// (a label selector, e.g. "tessera.io/e2e-group=g1"), only the nodes it
// selects and the pods bound to them are judged: tests share one cluster,
// and a real node being torn down by another test beside this one may for
// a moment hold pods after its agent has withdrawn its inventory.
std::vector<std::string> FindOvercommit(kube::Client& client, const std::string& node_selector = "");

Status CreateNamespace(kube::Client& client, const std::string& ns);
Status DeleteNamespace(kube::Client& client, const std::string& ns);

}  // namespace tessera::testing
