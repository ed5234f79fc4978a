#include "node/usage_metrics.h"

#include <functional>
#include <vector>

namespace tessera::node {
namespace {

using metrics::MetricType;
using metrics::Sample;

const std::vector<std::string> kGpuLabels = {"node", "gpu", "uuid", "model"};
const std::vector<std::string> kContainerLabels = {"node", "gpu", "uuid", "model", "namespace", "pod", "container"};
const std::vector<std::string> kClaimLabels = {"node", "gpu", "uuid", "model", "namespace", "claim", "pod"};

constexpr double kMicrosPerSecond = 1e6;

std::vector<std::string> GpuLabels(const std::string& node, const core::GpuInfo& g) {
  return {node, std::to_string(g.index), g.uuid, g.model};
}

std::vector<std::string> ContainerLabels(const std::string& node, const ContainerGpu& c) {
  std::vector<std::string> out = GpuLabels(node, c.gpu);
  out.insert(out.end(), {c.pod.ns, c.pod.name, c.container});
  return out;
}

std::vector<std::string> ClaimLabels(const std::string& node, const ContainerGpu& c) {
  std::vector<std::string> out = GpuLabels(node, c.gpu);
  out.insert(out.end(), {c.pod.ns, c.claim, c.pod.name});
  return out;
}

double D(uint64_t v) { return static_cast<double>(v); }

struct Spec {
  MetricType type;
  const char* name;
  const char* help;
};

}  // namespace

void SnapshotStore::Set(UsageSnapshot snapshot) {
  auto next = std::make_shared<const UsageSnapshot>(std::move(snapshot));
  MutexLock lock(mu_);
  latest_ = std::move(next);
}

std::shared_ptr<const UsageSnapshot> SnapshotStore::Get() const {
  MutexLock lock(mu_);
  return latest_ != nullptr ? latest_ : std::make_shared<const UsageSnapshot>();
}

Status RegisterUsageMetrics(metrics::Registry& registry, const std::string& node, const SnapshotStore& store) {
  const SnapshotStore* s = &store;
  auto per_gpu = [&](Spec spec, std::function<double(const GpuTotals&)> value) {
    return registry.AddCallback(spec.type, spec.name, spec.help, kGpuLabels, [s, node, value] {
      std::vector<Sample> out;
      // Held for the loop: a member of a temporary shared_ptr would be freed first.
      const std::shared_ptr<const UsageSnapshot> snapshot = s->Get();
      for (const GpuTotals& g : snapshot->gpus) out.push_back({GpuLabels(node, g.gpu), value(g)});
      return out;
    });
  };
  // The same series for device-plugin containers (tessera_container_gpu_*)
  // and DRA claims (tessera_claim_gpu_*).
  auto per_share = [&](Spec spec, std::function<double(const ContainerGpu&)> value) -> Status {
    TESSERA_RETURN_IF_ERROR(registry.AddCallback(
        spec.type, std::string("tessera_container_gpu_") + spec.name, spec.help, kContainerLabels, [s, node, value] {
          std::vector<Sample> out;
          const std::shared_ptr<const UsageSnapshot> snapshot = s->Get();
          for (const ContainerGpu& c : snapshot->containers) out.push_back({ContainerLabels(node, c), value(c)});
          return out;
        }));
    // One region serves every container of a claim, so a claim's series are theirs together.
    const std::string help = std::string(spec.help) + " Per DRA ResourceClaim: its containers together.";
    return registry.AddCallback(spec.type, std::string("tessera_claim_gpu_") + spec.name, help, kClaimLabels,
                                [s, node, value] {
                                  std::vector<Sample> out;
                                  const std::shared_ptr<const UsageSnapshot> snapshot = s->Get();
                                  for (const ContainerGpu& c : snapshot->claims) {
                                    out.push_back({ClaimLabels(node, c), value(c)});
                                  }
                                  return out;
                                });
  };
  constexpr double kBytesPerMiB = 1024.0 * 1024.0;
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_memory_total_bytes", "Device memory of the GPU."},
                                  [](const GpuTotals& g) { return static_cast<double>(g.gpu.memory_mib) * kBytesPerMiB; }));
  TESSERA_RETURN_IF_ERROR(per_gpu(
      {MetricType::kGauge, "tessera_gpu_memory_used_bytes",
       "Device memory the containers sharing the GPU hold, as their regions count it."},
      [](const GpuTotals& g) { return D(g.used_bytes); }));
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_memory_allocated_bytes",
                                   "Device memory the shares on the GPU hold (their limits)."},
                                  [](const GpuTotals& g) { return D(g.allocated_bytes); }));
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_core_allocated_ratio",
                                   "Compute the shares on the GPU hold, as a fraction of its time."},
                                  [](const GpuTotals& g) { return g.core_allocated; }));
  TESSERA_RETURN_IF_ERROR(per_gpu(
      {MetricType::kGauge, "tessera_gpu_utilization_ratio",
       "Fraction of the GPU's time the containers' kernels ran over the last usage interval, capped at 1."},
      [](const GpuTotals& g) { return g.utilization; }));
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_containers",
                                   "Device-plugin containers holding a share of the GPU (claims: tessera_gpu_claims)."},
                                  [](const GpuTotals& g) { return static_cast<double>(g.containers); }));
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_claims",
                                   "DRA ResourceClaims holding a share of the GPU."},
                                  [](const GpuTotals& g) { return static_cast<double>(g.claims); }));
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_healthy", "1 when the GPU is healthy, else 0."},
                                  [](const GpuTotals& g) { return g.gpu.healthy ? 1.0 : 0.0; }));
  TESSERA_RETURN_IF_ERROR(per_gpu({MetricType::kGauge, "tessera_gpu_mps_running",
                                   "1 while the GPU's MPS control daemon runs (tessera-node --mps), else 0: MPS pods "
                                   "are placed only on GPUs where it does."},
                                  [](const GpuTotals& g) { return g.gpu.mps ? 1.0 : 0.0; }));

  TESSERA_RETURN_IF_ERROR(per_share({MetricType::kGauge, "memory_used_bytes",
                                         "Device memory the container's processes hold on the GPU."},
                                        [](const ContainerGpu& c) { return D(c.counters.used_bytes); }));
  TESSERA_RETURN_IF_ERROR(per_share({MetricType::kGauge, "memory_peak_bytes",
                                         "Most device memory the container has held at once on the GPU."},
                                        [](const ContainerGpu& c) { return D(c.counters.peak_bytes); }));
  TESSERA_RETURN_IF_ERROR(per_share(
      {MetricType::kGauge, "memory_limit_bytes",
       "The container's memory share of the GPU: allocations past it fail with CUDA_ERROR_OUT_OF_MEMORY."},
      [](const ContainerGpu& c) { return D(c.limit_bytes); }));
  TESSERA_RETURN_IF_ERROR(per_share({MetricType::kGauge, "core_share_ratio",
                                         "The container's compute share, as a fraction of the GPU's time."},
                                        [](const ContainerGpu& c) { return c.core_share; }));
  TESSERA_RETURN_IF_ERROR(per_share(
      {MetricType::kGauge, "core_granted_ratio",
       "Compute the launch gate lets the container use now, as a fraction of the GPU's time: the arbiter's grant "
       "while it runs (work-conserving: more than the share when others idle, 0 while held), else the static share."},
      [](const ContainerGpu& c) { return static_cast<double>(c.counters.granted_ppm) / 1e6; }));
  TESSERA_RETURN_IF_ERROR(per_share(
      {MetricType::kGauge, "held",
       "1 while the arbiter holds the container back for a higher-priority one on the same GPU, else 0."},
      [](const ContainerGpu& c) { return c.counters.held ? 1.0 : 0.0; }));
  TESSERA_RETURN_IF_ERROR(per_share(
      {MetricType::kGauge, "utilization_ratio",
       "Fraction of the GPU's time the container's kernels ran over the last usage interval."},
      [](const ContainerGpu& c) { return c.utilization; }));
  TESSERA_RETURN_IF_ERROR(per_share(
      {MetricType::kCounter, "seconds_total",
       "GPU time the container's kernels ran, measured by the launch gate."},
      [](const ContainerGpu& c) { return D(c.counters.gpu_us) / kMicrosPerSecond; }));
  TESSERA_RETURN_IF_ERROR(per_share({MetricType::kCounter, "throttled_seconds_total",
                                         "Time the container's kernel launches waited at the launch gate."},
                                        [](const ContainerGpu& c) { return D(c.counters.throttled_us) / kMicrosPerSecond; }));
  TESSERA_RETURN_IF_ERROR(per_share(
      {MetricType::kCounter, "oom_refusals_total",
       "GPU memory allocations refused because they would pass the container's share."},
      [](const ContainerGpu& c) { return D(c.counters.oom_refusals); }));
  return Status::Ok();
}

}  // namespace tessera::node
