// libFuzzer target for the scheduler extender: any bytes, as a request body
// for filter, prioritize and bind and (when they are a JSON object) as a pod
// or node event, over a small fixed cluster. Every reply must be 200 with a
// well-formed body or 400, and no GPU may ever be over-committed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "scheduler/cluster_state.h"
#include "scheduler/extender.h"
#include "scheduler/test_cluster.h"

namespace {

using nlohmann::json;
using namespace tessera::scheduler;

std::shared_ptr<spdlog::logger> Quiet() {
  static auto logger = std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  return logger;
}

// a100-0 (2 x A100, one shared), t4-0 (1 x T4), cpu-0 (no inventory).
void Populate(ClusterState& state) {
  state.UpsertNode(testing::NodeJson("a100-0", 2, "A100", 40960));
  state.UpsertNode(testing::NodeJson("t4-0", 1, "T4", 15360));
  json cpu = testing::NodeJson("cpu-0", 0, "", 0);
  cpu["metadata"]["annotations"] = json::object();
  state.UpsertNode(cpu);
  state.UpsertPod(testing::BoundPodJson(
      testing::PodJson("default", "busy", {{"main", 1, 8192, 40}}),
      {"a100-0", {{"main", {{0, testing::GpuUuid("a100-0", 0), 8192, 400}}}}}));
}

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckReply(const HttpReply& r, bool is_array) {
  Check(r.status == 200 || r.status == 400);
  if (r.status != 200) return;
  const json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  Check(!body.is_discarded());
  if (is_array) {
    Check(body.is_array());
    for (const auto& hp : body) {
      Check(hp.is_object() && hp["Host"].is_string() && hp["Score"].is_number_integer());
      const int64_t score = hp["Score"].get<int64_t>();
      Check(score >= 0 && score <= 10);
    }
  } else {
    Check(body.is_object() && body.contains("Error"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  ClusterStateOptions so;
  so.logger = Quiet();
  ClusterState state(so);
  Populate(state);
  testing::FakeBinder binder;
  if (size % 3 == 0) binder.FailWith(tessera::Status(tessera::StatusCode::kUnavailable, "fuzzed failure"));
  ExtenderOptions eo;
  eo.logger = Quiet();
  eo.detailed_reasons_max_nodes = size % 2 == 0 ? 64 : 0;
  auto extender = Extender::Create(state, binder, eo);
  Check(extender.ok());

  // As informer events, when the bytes are a JSON object.
  const json event = json::parse(input.begin(), input.end(), nullptr, /*allow_exceptions=*/false);
  if (event.is_object() && input.size() < 4096) {
    state.UpsertNode(event);
    state.UpsertPod(event);
    if (auto pod = event.find("Pod"); pod != event.end()) state.UpsertPod(*pod);
  }

  CheckReply((*extender)->Filter(input), /*is_array=*/false);
  CheckReply((*extender)->Prioritize(input), /*is_array=*/true);
  CheckReply((*extender)->Bind(input), /*is_array=*/false);

  if (event.is_object() && input.size() < 4096) {
    state.DeletePod(event);
    if (auto meta = event.find("metadata"); meta != event.end() && meta->is_object()) {
      if (auto name = meta->find("name"); name != meta->end() && name->is_string()) state.DeleteNode(name->get<std::string>());
    }
  }
  for (const auto& g : state.Snapshot().gpu_use) {
    Check(g.core_used_milli >= 0 && g.core_used_milli <= 1000);
    Check(g.mem_used_mib >= 0 && g.mem_used_mib <= g.mem_total_mib);
  }
  return 0;
}
