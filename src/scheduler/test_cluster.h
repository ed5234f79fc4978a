// Test support for the extender (unit tests, fuzz target, benchmark): builders
// of the Kubernetes objects and extender bodies the scheduler sees, and a
// fake Binder. Not linked into tessera-scheduler.
//
//   ClusterState state;
//   state.UpsertNode(testing::NodeJson("n1", 4, "A100", 40960));
//   std::string body = testing::FilterBody(testing::PodJson("default", "p", {{"main", 1, 8192, 30}}), {"n1"});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/thread_annotations.h"
#include "scheduler/cluster_state.h"
#include "scheduler/extender.h"

namespace tessera::scheduler::testing {

// A logger that drops everything (the tests drive error paths on purpose).
std::shared_ptr<spdlog::logger> QuietLogger();
// ClusterStateOptions at their defaults with a QuietLogger.
ClusterStateOptions QuietStateOptions();

// A Node object with `gpus` GPUs of one model (uuids "GPU-<node>-<i>"), the
// inventory annotation and allocatable CPU / memory.
nlohmann::json NodeJson(const std::string& name, int gpus, const std::string& model, int64_t gpu_mem_mib,
                        const std::string& cpu = "64", const std::string& memory = "512Gi");
// A Node object with the given GPUs.
nlohmann::json NodeJson(const std::string& name, const std::vector<core::GpuInfo>& gpus,
                        const std::string& cpu = "64", const std::string& memory = "512Gi");
std::string GpuUuid(const std::string& node, int index);

// One container's GPU limits; 0 leaves a resource out.
struct Container {
  std::string name;
  int gpus = 0;
  int64_t mem_mib = 0;
  int core_percent = 0;
};

// A pending Pod object (no nodeName) with CPU "1" and memory "1Gi" requested
// per container; uid "uid-<ns>-<name>" unless given.
nlohmann::json PodJson(const std::string& ns, const std::string& name, const std::vector<Container>& containers,
                       const std::map<std::string, std::string>& annotations = {}, const std::string& uid = "");
// `pod` bound to `assignment.node` with the assignment annotation and `phase`.
nlohmann::json BoundPodJson(nlohmann::json pod, const core::Assignment& assignment,
                            const std::string& phase = "Running");

// DRA: a ResourceSlice of tessera-node's kind for `node` (driver
// gpu.tessera.io, pool = node) listing devices "gpu-<i>" with attribute
// index i, in the order of `indexes`, each of `mem_mib`.
nlohmann::json SliceJson(const std::string& node, const std::vector<int>& indexes, int64_t mem_mib = 40960);
// A ResourceClaim request of class gpu.tessera.io; 0 leaves memory / compute out.
struct ClaimAsk {
  std::string name = "gpu";
  int count = 1;
  int64_t mem_mib = 0;
  int percent = 0;
};
// An allocation result on `pool`'s device "gpu-<index>"; a result with
// `consumed` false has no consumedCapacity (an exclusive allocation).
struct ClaimGot {
  int index = 0;
  int64_t mem_mib = 0;
  int percent = 0;
  bool consumed = true;
};
// A ResourceClaim (uid "uid-claim-<ns>-<name>") with `asks`; allocated on
// `pool` with `got` when `got` is not empty.
nlohmann::json ClaimJson(const std::string& ns, const std::string& name, const std::vector<ClaimAsk>& asks,
                         const std::string& pool = "", const std::vector<ClaimGot>& got = {});
// `pod` using the claims `claim_names` (spec.resourceClaims, by name).
nlohmann::json WithClaims(nlohmann::json pod, const std::vector<std::string>& claim_names);

// ExtenderArgs bodies: NodeNames form (nodeCacheCapable) and Nodes form.
std::string FilterBody(const nlohmann::json& pod, const std::vector<std::string>& node_names);
std::string NodesFilterBody(const nlohmann::json& pod, const std::vector<nlohmann::json>& nodes);
// ExtenderBindingArgs.
std::string BindBody(const std::string& ns, const std::string& name, const std::string& uid,
                     const std::string& node);

// Bind's two steps with a pick of the caller's, for tests and the benchmark
// that book shares directly: reads `node` (ClusterView::BindTarget), calls
// `pick` on a copy of it outside the state's lock, and books the result with
// ClusterState::Assume against the version read, with the slots of a pod
// asking for tessera.io/gpu. Returns what Assume returns, BindTarget's
// error, or `pick`'s.
using PickFn = std::function<Result<core::Assignment>(const core::NodeState& node)>;
Result<core::Assignment> PickAndAssume(ClusterState& state, const core::PodRequest& pod, std::string_view uid,
                                       std::string_view node, const PickFn& pick, Clock::time_point now);

// Records binds; fails them while `fail_with` is non-OK. Thread-safe.
class FakeBinder : public Binder {
 public:
  struct Call {
    std::string pod_namespace, pod_name, pod_uid, node;
    std::map<std::string, std::string> annotations;
  };
  Status Bind(const std::string& pod_namespace, const std::string& pod_name, const std::string& pod_uid,
              const std::string& node, const std::map<std::string, std::string>& annotations) override;

  void FailWith(Status status);
  std::vector<Call> calls() const;
  // Called (without the binder's lock) on every bind before it answers.
  std::function<void(const Call&)> on_bind;

 private:
  mutable Mutex mu_;
  Status fail_with_ TESSERA_GUARDED_BY(mu_);
  std::vector<Call> calls_ TESSERA_GUARDED_BY(mu_);
};

}  // namespace tessera::scheduler::testing
