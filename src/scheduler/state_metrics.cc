#include "scheduler/state_metrics.h"

#include <vector>

namespace tessera::scheduler {
namespace {

using metrics::MetricType;
using metrics::Sample;

constexpr double kBytesPerMib = 1024.0 * 1024.0;
constexpr double kMilliPerGpu = 1000.0;

// One sample per model from `value(totals)`, with `extra` label values after the model.
template <typename Fn>
std::vector<Sample> PerModel(const std::map<std::string, ModelTotals>& totals, Fn value,
                             const std::vector<std::string>& extra = {}) {
  std::vector<Sample> out;
  for (const auto& [model, t] : totals) {
    Sample s{{model}, value(t)};
    s.label_values.insert(s.label_values.end(), extra.begin(), extra.end());
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> Concat(std::vector<Sample> a, const std::vector<Sample>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::map<std::string, ModelTotals> TotalsByModel(const ClusterState& state) {
  return state.Read([](const ClusterView& view) {
    std::map<std::string, ModelTotals> out;
    for (const core::NodeState& node : view.ledger().nodes()) {
      for (size_t i = 0; i < node.gpus.size() && i < node.info.gpus.size(); ++i) {
        ModelTotals& t = out[node.info.gpus[i].model];
        ++t.gpus;
        t.mem_total_mib += node.info.gpus[i].memory_mib;
        t.mem_allocated_mib += node.gpus[i].mem_used_mib;
        t.core_allocated_milli += node.gpus[i].core_used_milli;
        t.predicted_busy_milli += view.load().book().GpuBusy(node.info.name, static_cast<int>(i));
      }
    }
    return out;
  });
}

Status RegisterStateMetrics(metrics::Registry& registry, const ClusterState& state,
                            std::function<bool()> is_leader) {
  const ClusterState* s = &state;
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_gpus", "GPUs in the extender's ledger, by model.", {"model"}, [s] {
        return PerModel(TotalsByModel(*s), [](const ModelTotals& t) { return static_cast<double>(t.gpus); });
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_gpu_memory_bytes",
      "GPU memory in the ledger by model: the GPUs' total, and what pods' shares hold (allocated).",
      {"model", "state"}, [s] {
        const auto totals = TotalsByModel(*s);
        return Concat(
            PerModel(totals, [](const ModelTotals& t) { return static_cast<double>(t.mem_allocated_mib) * kBytesPerMib; },
                     {"allocated"}),
            PerModel(totals, [](const ModelTotals& t) { return static_cast<double>(t.mem_total_mib) * kBytesPerMib; },
                     {"total"}));
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_gpu_core_ratio",
      "GPU compute in the ledger by model, in whole GPUs (1 = one GPU's full time): the GPUs' total, and what "
      "pods' shares hold (allocated).",
      {"model", "state"}, [s] {
        const auto totals = TotalsByModel(*s);
        return Concat(PerModel(totals,
                               [](const ModelTotals& t) {
                                 return static_cast<double>(t.core_allocated_milli) / kMilliPerGpu;
                               },
                               {"allocated"}),
                      PerModel(totals, [](const ModelTotals& t) { return static_cast<double>(t.gpus); }, {"total"}));
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_gpu_predicted_busy_ratio",
      "Predicted busy time of the GPUs' shares by model, in whole GPUs: each share at its workload's measured "
      "utilization (tessera.io/usage history), else at its request times interference.defaultFactor.",
      {"model"}, [s] {
        return PerModel(TotalsByModel(*s),
                        [](const ModelTotals& t) { return static_cast<double>(t.predicted_busy_milli) / kMilliPerGpu; });
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_workloads_learned",
      "Workloads with a GPU utilization history learned from tessera.io/usage.", {}, [s] {
        return std::vector<Sample>{{{}, static_cast<double>(s->Summary().workloads_learned)}};
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kCounter, "tessera_scheduler_usage_reports_total",
      "tessera.io/usage annotations read from held pods: learned (taken into the history) or rejected (could "
      "not be read; logged).",
      {"result"}, [s] {
        const StateSummary sum = s->Summary();
        return std::vector<Sample>{{{"learned"}, static_cast<double>(sum.usage_samples_total)},
                                   {{"rejected"}, static_cast<double>(sum.usage_rejected_total)}};
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_pods_held",
      "Pods holding GPU shares in the ledger: assumed (bound by this replica, not yet seen by its pod watch) or "
      "confirmed.",
      {"state"}, [s] {
        const StateSummary sum = s->Summary();
        return std::vector<Sample>{{{"assumed"}, static_cast<double>(sum.pods_held_assumed)},
                                   {{"confirmed"}, static_cast<double>(sum.pods_held - sum.pods_held_assumed)}};
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_pods_unplaced",
      "Bound pods whose assignment the ledger cannot hold: waiting_for_node (the node is unknown or not a GPU "
      "node) or conflict (the share does not fit its node).",
      {"reason"}, [s] {
        const StateSummary sum = s->Summary();
        return std::vector<Sample>{{{"conflict"}, static_cast<double>(sum.pods_conflict)},
                                   {{"waiting_for_node"}, static_cast<double>(sum.pods_waiting)}};
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_host_pods",
      "Bound pods without GPUs on GPU nodes: booked (their CPU and memory are in the ledger) or unfit (they do "
      "not fit the ledger's book of their node; logged, retried as the node frees room).",
      {"state"}, [s] {
        const StateSummary sum = s->Summary();
        return std::vector<Sample>{{{"booked"}, static_cast<double>(sum.host_pods)},
                                   {{"unfit"}, static_cast<double>(sum.host_pods_unfit)}};
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kGauge, "tessera_scheduler_nodes",
      "Nodes seen by the node watch: gpu (in the ledger) or other (no valid GPU inventory).", {"kind"}, [s] {
        const StateSummary sum = s->Summary();
        return std::vector<Sample>{{{"gpu"}, static_cast<double>(sum.gpu_nodes)},
                                   {{"other"}, static_cast<double>(sum.nodes - sum.gpu_nodes)}};
      }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kCounter, "tessera_scheduler_assumptions_expired_total",
      "Shares this replica assumed at bind and released because the pod watch never confirmed them in time.", {},
      [s] { return std::vector<Sample>{{{}, static_cast<double>(s->Summary().expired_total)}}; }));
  TESSERA_RETURN_IF_ERROR(registry.AddCallback(
      MetricType::kCounter, "tessera_scheduler_assignment_conflicts_total",
      "Pods whose assignment was found not to fit its node (two schedulers, a node that shrank).", {},
      [s] { return std::vector<Sample>{{{}, static_cast<double>(s->Summary().conflicts_total)}}; }));
  return registry.AddCallback(MetricType::kGauge, "tessera_scheduler_leader",
                              "1 while this replica holds the leader Lease (and so binds), else 0.", {},
                              [leader = std::move(is_leader)] {
                                return std::vector<Sample>{{{}, !leader || leader() ? 1.0 : 0.0}};
                              });
}

}  // namespace tessera::scheduler
