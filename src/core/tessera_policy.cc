#include "core/tessera_policy.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/fgd_policy.h"

namespace tessera::core {

double WorkloadDistance(const TargetWorkload& a, const TargetWorkload& b) {
  auto same = [](const TaskClass& x, const TaskClass& y) {
    return x.cpu_milli == y.cpu_milli && x.gpu_milli == y.gpu_milli && x.num_gpu == y.num_gpu && x.models == y.models;
  };
  double d = 0;
  for (const TaskClass& x : a.classes) {
    double w = 0;
    for (const TaskClass& y : b.classes)
      if (same(x, y)) { w = y.weight; break; }
    d += std::abs(x.weight - w);
  }
  for (const TaskClass& y : b.classes) {
    bool found = false;
    for (const TaskClass& x : a.classes)
      if (same(x, y)) { found = true; break; }
    if (!found) d += y.weight;
  }
  return d;
}

void TesseraPolicy::OnArrival(const PodRequest& pod) {
  TaskClass c = ClassOf(pod);
  auto& slot = seen_[Key{c.cpu_milli, c.gpu_milli, c.num_gpu, c.models.allowed}];
  if (slot.first++ == 0) slot.second = c;
  ++arrivals_;
  if (pod.UsesGpu()) gpu_cpu_seen_ += pod.cpu_milli;
  cpu_seen_ += pod.cpu_milli;
  gpu_milli_seen_ += pod.TotalCoreMilli();
  if (arrivals_ >= next_refresh_) Refresh();
}

void TesseraPolicy::Refresh() {
  std::vector<std::pair<int64_t, const TaskClass*>> order;
  for (const auto& [key, entry] : seen_) order.push_back({entry.first, &entry.second});
  std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.first > b.first; });
  TargetWorkload fresh;
  int64_t covered = 0;
  const double need = options_.coverage * static_cast<double>(arrivals_);
  for (const auto& [count, cls] : order) {
    if (static_cast<double>(covered) >= need) break;
    covered += count;
    TaskClass c = *cls;
    c.weight = static_cast<double>(count);
    fresh.classes.push_back(c);
  }
  for (auto& c : fresh.classes) c.weight /= static_cast<double>(covered);
  double ratio = gpu_milli_seen_ > 0 ? 1000.0 * static_cast<double>(gpu_cpu_seen_) /
                                           static_cast<double>(gpu_milli_seen_)
                                     : cpu_per_gpu_;
  // CPU pressure: CPU-only pods will compete with the GPU pods for the CPU.
  if (options_.cpu_pressure_gain > 0 && gpu_milli_seen_ > 0 && gpu_cpu_seen_ > 0) {
    const double c = static_cast<double>(cpu_seen_) / static_cast<double>(gpu_cpu_seen_);
    ratio *= std::clamp(1 + options_.cpu_pressure_gain * (c - options_.cpu_pressure_knee), 1.0,
                        std::max(1.0, options_.cpu_pressure_max));
  }
  next_refresh_ = std::min(arrivals_ * 2, arrivals_ + options_.refresh_every);
  // Keep the current workload (and every cached score) when the new one is
  // within the tolerance: late refreshes barely move the weights, and each
  // adopted refresh makes every node be scored afresh.
  if (options_.refresh_tolerance > 0 && epoch_ > 0 &&
      WorkloadDistance(workload_, fresh) < options_.refresh_tolerance &&
      std::abs(ratio - cpu_per_gpu_) <= options_.refresh_tolerance * cpu_per_gpu_)
    return;
  workload_ = std::move(fresh);
  cpu_per_gpu_ = ratio;
  BuildWasteTable();
  memo_.clear();
  allows_.clear();
  model_ids_.clear();
  ++epoch_;
}

void TesseraPolicy::BuildWasteTable() {
  // p(s) per share size, over the GPU classes; a k-GPU class is k GPUs' demand.
  std::map<int64_t, double> demand;
  double total = 0;
  for (const TaskClass& c : workload_.classes) {
    if (c.num_gpu <= 0 || c.gpu_milli <= 0) continue;
    const double w = c.weight * c.num_gpu;
    demand[std::min<int64_t>(c.gpu_milli, kCoreMilliPerGpu)] += w;
    total += w;
  }
  waste_.assign(kCoreMilliPerGpu + 1, 0.0);
  for (int64_t f = 0; f <= kCoreMilliPerGpu; ++f) {
    double fit = 0, after = 0, best = 0;  // P(f), P(f) A(f), B(f)
    for (const auto& [share, w] : demand) {
      if (share > f) break;
      const double left = waste_[static_cast<size_t>(f - share)];
      best = fit == 0 ? left : std::min(best, left);
      fit += w / total;
      after += w / total * left;
    }
    const double free = static_cast<double>(f);
    if (fit <= 0) {
      waste_[static_cast<size_t>(f)] = free;
      continue;
    }
    const double r = options_.fill_threshold > 0 ? std::min(1.0, fit / options_.fill_threshold) : 1.0;
    const double filled = (1 - options_.fill_greedy) * after / fit + options_.fill_greedy * best;
    waste_[static_cast<size_t>(f)] = (1 - r) * free + r * filled;
  }
}

double TesseraPolicy::ExpectedWaste(int64_t free_milli) const {
  if (waste_.empty()) return 0;
  return waste_[static_cast<size_t>(std::clamp<int64_t>(free_milli, 0, kCoreMilliPerGpu))];
}

double TesseraPolicy::Strand(int64_t cpu_left, int64_t idle_milli) const {
  if (options_.strand_weight == 0 || cpu_per_gpu_ <= 0) return 0;
  const double feedable = static_cast<double>(cpu_left) * 1000.0 / cpu_per_gpu_;
  return options_.strand_weight * std::max(0.0, static_cast<double>(idle_milli) - feedable);
}

size_t TesseraPolicy::StateHash::operator()(const StateKey& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (uint64_t w : k.w) {
    h ^= w + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return static_cast<size_t>(h ^ (h >> 33));
}

int TesseraPolicy::ModelId(const std::string& model) {
  auto [it, inserted] = model_ids_.emplace(model, static_cast<int>(allows_.size()));
  if (inserted) {
    std::vector<char> row(workload_.classes.size());
    for (size_t i = 0; i < row.size(); ++i) row[i] = workload_.classes[i].models.Allows(model) ? 1 : 0;
    allows_.push_back(std::move(row));
  }
  return it->second;
}

TesseraPolicy::NodeTerms TesseraPolicy::ComputeTerms(int model_id, int64_t cpu_left,
                                                     std::span<const int64_t> gpu_left) const {
  NodeTerms t;
  int64_t idle = 0;
  for (int64_t l : gpu_left) idle += l;
  t.strand = Strand(cpu_left, idle);
  if (idle == 0) return t;
  if (options_.waste_weight != 0)
    for (int64_t l : gpu_left) t.waste += ExpectedWaste(l);
  // FGD's fragmentation (NodeFragAmount) and the dead milli in one pass over
  // the classes. usable[g]: some GPU class could take a share of GPU g.
  std::array<bool, 64> usable{};
  const std::vector<char>& allows = allows_[static_cast<size_t>(model_id)];
  double frag = 0;
  bool fed = false;  // some GPU class has the node's CPU and model
  for (size_t ci = 0; ci < workload_.classes.size(); ++ci) {
    const TaskClass& c = workload_.classes[ci];
    if (c.num_gpu > 0 && c.gpu_milli > 0 && cpu_left >= c.cpu_milli && allows[ci]) fed = true;
    const ClassFit f = FitClass(c, allows[ci] != 0, cpu_left, gpu_left);
    if (f.fits) {
      frag += c.weight * static_cast<double>(f.small);
      for (size_t g = 0; g < gpu_left.size() && g < usable.size(); ++g)
        if (gpu_left[g] >= c.gpu_milli) usable[g] = true;
    } else {
      frag += c.weight * static_cast<double>(idle);
    }
  }
  t.frag = frag;
  for (size_t g = 0; g < gpu_left.size(); ++g)
    if (gpu_left[g] > 0 && !(g < usable.size() && usable[g])) t.dead += gpu_left[g];
  if (!fed) t.starved = idle;  // then every GPU is dead: t.dead == idle
  return t;
}

double TesseraPolicy::NodeValue(const std::string& model, int64_t cpu_left, std::span<const int64_t> gpu_left) {
  return ValueOf(ModelId(model), cpu_left, gpu_left);
}

double TesseraPolicy::ValueOf(int model_id, int64_t cpu_left, std::span<const int64_t> gpu_left) {
  // Sorted shares, 10 bits each, 6 to a word: up to 18 GPUs memoised.
  constexpr size_t kMemoGpus = 18;
  auto value = [&](std::span<const int64_t> left) {
    const NodeTerms t = ComputeTerms(model_id, cpu_left, left);
    return options_.waste_weight * t.waste + t.strand +
           options_.dead_weight * static_cast<double>(t.dead - t.starved) +
           options_.starved_weight * static_cast<double>(t.starved) + options_.frag_weight * t.frag;
  };
  if (gpu_left.size() > kMemoGpus) return value(gpu_left);
  std::array<int64_t, kMemoGpus> sorted{};
  for (size_t i = 0; i < gpu_left.size(); ++i) sorted[i] = std::clamp<int64_t>(gpu_left[i], 0, kCoreMilliPerGpu);
  std::sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(gpu_left.size()));
  StateKey key;
  key.w[0] = (static_cast<uint64_t>(model_id) << 32) | gpu_left.size();
  key.w[1] = static_cast<uint64_t>(cpu_left);
  for (size_t i = 0; i < gpu_left.size(); ++i)
    key.w[2 + i / 6] |= static_cast<uint64_t>(sorted[i]) << (10 * (i % 6));
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  // Bound memory in long-running schedulers (about 10 MB); a cleared memo only
  // costs recomputation, never a different value.
  if (memo_.size() >= (1u << 17)) memo_.clear();
  // The value does not depend on the GPUs' order: compute it on the sorted copy.
  const double v = value({sorted.data(), gpu_left.size()});
  memo_.emplace(key, v);
  return v;
}

int64_t TesseraPolicy::DeadMilli(const std::string& model, int64_t cpu_left, std::span<const int64_t> gpu_left) {
  return ComputeTerms(ModelId(model), cpu_left, gpu_left).dead;
}

double TesseraPolicy::FragNow(const NodeState& node, int* model_id) {
  auto& [version, epoch, value, id] = now_cache_[&node];
  if (version != node.version || epoch != epoch_ || node.version == 0) {
    const GpuLeft left = FreeCore(node);
    id = ModelId(node.model());
    value = ValueOf(id, node.CpuFree(), left.span());
    version = node.version;
    epoch = epoch_;
  }
  *model_id = id;
  return value;
}

int64_t TesseraPolicy::PickScore(const PodRequest& pod, const NodeState& node, const GpuPick& pick, int model_id,
                                 double before, const GpuLeft& left) {
  GpuLeft after = left;
  int k = 0;
  for (const auto& c : pod.containers)
    for (int g = 0; g < c.gpu_count; ++g) after.left[pick.index[k++]] -= c.core_milli_per_gpu;
  return FgdScore(ValueOf(model_id, node.CpuFree() - pod.cpu_milli, after.span()) - before);
}

int64_t TesseraPolicy::ScorePick(const PodRequest& pod, const NodeState& node, const GpuPick& pick, Rng& /*rng*/) {
  int model_id = 0;
  const double before = FragNow(node, &model_id);
  return PickScore(pod, node, pick, model_id, before, FreeCore(node));
}

template <typename Fn>
void TesseraPolicy::Picks(const PodRequest& pod, const NodeState& node, bool distinct_only, Fn&& fn) {
  int model_id = 0;
  const double before = FragNow(node, &model_id);
  const GpuLeft left = FreeCore(node);
  auto consider = [&](const GpuPick& pick) { fn(pick, PickScore(pod, node, pick, model_id, before, left)); };
  if (!IsSingleShare(pod)) {
    GpuPick pick;
    PickGpus(pod, node, GpuSelect::kBestFit, nullptr, &pick);
    consider(pick);
  } else {
    // GPUs with equal free shares give equal values, and the lowest index
    // wins ties: with distinct_only, only the first GPU of each free share
    // is weighed (an empty 8-GPU node costs one evaluation, not eight).
    std::array<int64_t, 64> seen{};
    int nseen = 0;
    for (const GpuPick& pick : ShareCandidates(pod, node)) {
      if (distinct_only) {
        const int64_t free = left.left[pick.index[0]];
        if (std::find(seen.begin(), seen.begin() + nseen, free) != seen.begin() + nseen) continue;
        if (nseen < static_cast<int>(seen.size())) seen[static_cast<size_t>(nseen++)] = free;
      }
      consider(pick);
    }
  }
}

void TesseraPolicy::ForEachPick(const PodRequest& pod, const NodeState& node,
                                const std::function<void(const GpuPick&, int64_t)>& fn) {
  Picks(pod, node, /*distinct_only=*/false, fn);
}

Candidate TesseraPolicy::Evaluate(const PodRequest& pod, const NodeState& node, Rng& /*rng*/) {
  Candidate best;
  bool first = true;
  Picks(pod, node, /*distinct_only=*/true, [&](const GpuPick& pick, int64_t score) {
    if (first || score > best.score) {  // lowest GPU index wins ties
      best.score = score;
      best.pick = pick;
      first = false;
    }
  });
  return best;
}

}  // namespace tessera::core
