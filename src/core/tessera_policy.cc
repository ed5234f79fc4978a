#include "core/tessera_policy.h"

#include <algorithm>

#include "core/fgd_policy.h"

namespace tessera::core {

void TesseraPolicy::OnArrival(const PodRequest& pod) {
  TaskClass c = ClassOf(pod);
  auto& slot = seen_[Key{c.cpu_milli, c.gpu_milli, c.num_gpu, c.models.allowed}];
  if (slot.first++ == 0) slot.second = c;
  ++arrivals_;
  if (pod.UsesGpu()) gpu_cpu_seen_ += pod.cpu_milli;
  gpu_milli_seen_ += pod.TotalCoreMilli();
  if (arrivals_ >= next_refresh_) Refresh();
}

void TesseraPolicy::Refresh() {
  std::vector<std::pair<int64_t, const TaskClass*>> order;
  for (const auto& [key, entry] : seen_) order.push_back({entry.first, &entry.second});
  std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.first > b.first; });
  workload_.classes.clear();
  int64_t covered = 0;
  const double need = options_.coverage * static_cast<double>(arrivals_);
  for (const auto& [count, cls] : order) {
    if (static_cast<double>(covered) >= need) break;
    covered += count;
    TaskClass c = *cls;
    c.weight = static_cast<double>(count);
    workload_.classes.push_back(c);
  }
  for (auto& c : workload_.classes) c.weight /= static_cast<double>(covered);
  if (gpu_milli_seen_ > 0)
    cpu_per_gpu_ = 1000.0 * static_cast<double>(gpu_cpu_seen_) / static_cast<double>(gpu_milli_seen_);
  next_refresh_ = std::min(arrivals_ * 2, arrivals_ + options_.refresh_every);
  ++epoch_;
}

double TesseraPolicy::Strand(int64_t cpu_left, int64_t idle_milli) const {
  if (options_.strand_weight == 0 || cpu_per_gpu_ <= 0) return 0;
  const double feedable = static_cast<double>(cpu_left) * 1000.0 / cpu_per_gpu_;
  return options_.strand_weight * std::max(0.0, static_cast<double>(idle_milli) - feedable);
}

double TesseraPolicy::FragNow(const NodeState& node) {
  auto& [version, epoch, value] = now_cache_[&node];
  if (version != node.version || epoch != epoch_ || node.version == 0) {
    const GpuLeft left = FreeCore(node);
    int64_t idle = 0;
    for (int i = 0; i < left.n; ++i) idle += left.left[i];
    value = NodeFragAmount(workload_, node.model(), node.CpuFree(), left.span()) +
            Strand(node.CpuFree(), idle);
    version = node.version;
    epoch = epoch_;
  }
  return value;
}

void TesseraPolicy::ForEachPick(const PodRequest& pod, const NodeState& node,
                                const std::function<void(const GpuPick&, int64_t)>& fn) {
  const double before = FragNow(node);
  // The stranding term after placement does not depend on which GPUs.
  const GpuLeft left = FreeCore(node);
  int64_t idle_after = -pod.TotalCoreMilli();
  for (int i = 0; i < left.n; ++i) idle_after += left.left[i];
  const double strand_after = Strand(node.CpuFree() - pod.cpu_milli, idle_after);
  auto consider = [&](const GpuPick& pick) {
    fn(pick, FgdScore(FragAfter(workload_, pod, node, pick) + strand_after - before));
  };
  if (!IsSingleShare(pod)) {
    GpuPick pick;
    PickGpus(pod, node, GpuSelect::kBestFit, nullptr, &pick);
    consider(pick);
  } else {
    for (const GpuPick& pick : ShareCandidates(pod, node)) consider(pick);
  }
}

Candidate TesseraPolicy::Evaluate(const PodRequest& pod, const NodeState& node, Rng& /*rng*/) {
  Candidate best;
  bool first = true;
  ForEachPick(pod, node, [&](const GpuPick& pick, int64_t score) {
    if (first || score > best.score) {  // lowest GPU index wins ties
      best.score = score;
      best.pick = pick;
      first = false;
    }
  });
  return best;
}

}  // namespace tessera::core
