// What the node agent's unit tests build on (tests only): a temporary
// folder, a logger that drops everything, a node's two GPUs, pods bound to
// node "n1" with the assignment the extender would write, pods decoded as the
// node agent's pod cache decodes them, and a wait for a condition that
// another thread makes true. Header-only.
//
//   kube::FakeApi api;
//   auto pod = api.Upsert(kube::PodsPath("ns"), AssignedPod("a", "2024-01-01T00:00:01Z", {{"main", 0, 4096, 30}}));
//   ASSERT_TRUE(WaitUntil([&] { return allocator.CachedPods().has_value(); }));
#pragma once

#include <spdlog/logger.h>
#include <spdlog/sinks/null_sink.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/codec.h"
#include "core/model.h"
#include "core/pod_view.h"
#include "node/pod_views.h"

namespace tessera::node::testing {

// A fresh folder under the system's temporary folder, removed with everything
// in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-node-test.XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Empty when the folder could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::shared_ptr<spdlog::logger> Quiet() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

// GPU-0 and GPU-1: T4s of 16 GiB with four sharers each.
inline std::vector<core::GpuInfo> TwoGpus() {
  std::vector<core::GpuInfo> gpus(2);
  for (int i = 0; i < 2; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = "GPU-" + std::to_string(i);
    gpus[i].model = "T4";
    gpus[i].memory_mib = 16384;
    gpus[i].max_sharers = 4;
  }
  return gpus;
}

// One container of an AssignedPod: a share of GPU-<gpu> (`mem_mib` MiB and
// `core_percent` % of it), asked for with Tessera's names, or with
// gpushare's (whole GiB of memory, no compute) when `gpushare`.
struct Ask {
  std::string container;
  int gpu = 0;
  int64_t mem_mib = 4096;
  int core_percent = 30;
  bool gpushare = false;
};

// A Pending pod bound to n1 whose tessera.io/assignment gives each of
// `asks` its share, assigned at `assigned_at` (the extender's
// tessera.io/assigned-at; older pods are allocated first). No namespace or
// uid: FakeApi::Upsert gives them.
inline nlohmann::json AssignedPod(const std::string& name, const std::string& assigned_at,
                                  const std::vector<Ask>& asks) {
  core::Assignment assignment{"n1", {}};
  nlohmann::json containers = nlohmann::json::array();
  for (const Ask& ask : asks) {
    assignment.containers.push_back(
        {ask.container, {{ask.gpu, "GPU-" + std::to_string(ask.gpu), ask.mem_mib, ask.core_percent * 10}}});
    nlohmann::json limits =
        ask.gpushare ? nlohmann::json{{"aliyun.com/gpu-mem", std::to_string(ask.mem_mib / 1024)}}
                     : nlohmann::json{{"tessera.io/gpu", "1"},
                                      {"tessera.io/gpu-mem", std::to_string(ask.mem_mib)},
                                      {"tessera.io/gpu-core", std::to_string(ask.core_percent)}};
    containers.push_back({{"name", ask.container}, {"resources", {{"limits", limits}}}});
  }
  return {{"metadata",
           {{"name", name},
            {"creationTimestamp", "2024-01-01T00:00:00Z"},
            {"annotations",
             {{"tessera.io/assignment", core::EncodeAssignment(assignment).value()},
              {"tessera.io/assigned-at", assigned_at}}}}},
          {"spec", {{"nodeName", "n1"}, {"containers", containers}}},
          {"status", {{"phase", "Pending"}}}};
}

// `pod` (a v1 Pod object) decoded with `names`, as the node agent's pod
// cache decodes what the API server sends; nullptr when it has no identity
// (no name), which the cache leaves out.
inline std::shared_ptr<const core::PodView> Decoded(const nlohmann::json& pod,
                                                    const core::ResourceNames& names = {}) {
  Result<core::PodView> view = core::DecodePod(pod, names);
  return view.ok() ? std::make_shared<const core::PodView>(std::move(view).value()) : nullptr;
}

// Each pod of `pods` (a JSON array of v1 Pod objects) decoded, in order, the
// ones without identity left out.
inline PodViews DecodedAll(const nlohmann::json& pods, const core::ResourceNames& names = {}) {
  PodViews out;
  for (const nlohmann::json& pod : pods) {
    if (auto view = Decoded(pod, names)) out.push_back(std::move(view));
  }
  return out;
}

// Polls `done` every millisecond until it is true (true) or `timeout`
// passes (false).
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace tessera::node::testing
