#include "core/preemption.h"

#include <algorithm>
#include <climits>
#include <set>

#include "core/placer.h"
#include "core/policy.h"

namespace tessera::core {
namespace {

int64_t RunSeconds(const PreemptionPod& p, int64_t now) { return std::max<int64_t>(0, now - p.started_unix); }

// Less work lost first: the youngest pod, then by key.
bool LeastWorkFirst(const PreemptionPod* a, const PreemptionPod* b) {
  if (a->started_unix != b->started_unix) return a->started_unix > b->started_unix;
  return a->key < b->key;
}

// kube-scheduler's reprieve order: the most important pod first (highest
// priority, then the longest running).
bool MostImportantFirst(const PreemptionPod* a, const PreemptionPod* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->started_unix != b->started_unix) return a->started_unix < b->started_unix;
  return a->key < b->key;
}

// A node's room as the planner changes it: its use, and the slots taken of
// the preemptor's resource where the kubelet is short of them.
struct Room {
  NodeState node;
  int64_t slots_taken = 0;

  void Apply(const PreemptionPod& p, int sign) {
    ApplyHold(node, p.request, p.assignment, sign);
    slots_taken += sign * p.slots;
  }
};

bool Fits(const PodRequest& pod, const SlotRoom& limit, const Room& room) {
  if (limit.allocatable >= 0 && room.slots_taken + limit.asked > limit.allocatable) return false;
  return FitsNode(pod, room.node) == FitFailure::kNone;
}

// The exact search over subsets of `pool` of one size: depth-first, removing
// pods from `state` on the way down and giving them back on the way up.
class SubsetSearch {
 public:
  SubsetSearch(const PodRequest& pod, const SlotRoom& limit, const std::vector<const PreemptionPod*>& pool,
               int64_t now, int64_t budget)
      : pod_(pod), limit_(limit), pool_(pool), now_(now), budget_(budget) {}

  // The fitting subset of `size` pods with the least work lost, as pool
  // indexes; empty when none fits. Sets exhausted() when the budget ran out.
  std::vector<size_t> Best(Room& state, size_t size) {
    best_.clear();
    best_work_ = INT64_MAX;
    chosen_.clear();
    Visit(state, 0, size, 0);
    return best_;
  }
  bool exhausted() const { return checks_ > budget_; }

 private:
  void Visit(Room& state, size_t from, size_t left, int64_t work) {
    if (exhausted() || work >= best_work_) return;  // a subset found already loses less
    if (left == 0) {
      ++checks_;
      if (Fits(pod_, limit_, state)) {
        best_ = chosen_;
        best_work_ = work;
      }
      return;
    }
    for (size_t i = from; i + left <= pool_.size(); ++i) {
      const PreemptionPod& p = *pool_[i];
      state.Apply(p, -1);
      chosen_.push_back(i);
      Visit(state, i + 1, left - 1, work + RunSeconds(p, now_));
      chosen_.pop_back();
      state.Apply(p, +1);
      if (exhausted()) return;
    }
  }

  const PodRequest& pod_;
  const SlotRoom& limit_;
  const std::vector<const PreemptionPod*>& pool_;
  const int64_t now_;
  const int64_t budget_;
  int64_t checks_ = 0;
  std::vector<size_t> chosen_;
  std::vector<size_t> best_;
  int64_t best_work_ = INT64_MAX;
};

PreemptionPlan MakePlan(const PodRequest& pod, const PreemptionNode& node, const NodeState& freed,
                        std::vector<const PreemptionPod*> forced, std::vector<const PreemptionPod*> chosen,
                        bool exact, int64_t now) {
  PreemptionPlan plan;
  plan.node = node.node.info.name;
  plan.exact = exact;
  std::sort(chosen.begin(), chosen.end(), [](const PreemptionPod* a, const PreemptionPod* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    return LeastWorkFirst(a, b);
  });
  plan.highest_victim_priority = INT32_MIN;
  for (const auto* list : {&forced, &chosen}) {
    for (const PreemptionPod* p : *list) {
      plan.victims.push_back(*p);
      plan.highest_victim_priority = std::max(plan.highest_victim_priority, p->priority);
      plan.work_lost_seconds += RunSeconds(*p, now);
    }
  }
  GpuPick pick;
  if (pod.UsesGpu()) (void)PickGpus(pod, freed, GpuSelect::kBestFit, nullptr, &pick);
  plan.assignment = MakeAssignment(pod, freed, pick);
  return plan;
}

}  // namespace

void ApplyHold(NodeState& node, const PodRequest& pod, const Assignment& assignment, int sign) {
  node.cpu_used_milli += sign * pod.cpu_milli;
  node.mem_used_mib += sign * pod.memory_mib;
  node.pods += sign;
  for (const auto& ca : assignment.containers) {
    for (const auto& s : ca.gpus) {
      if (s.index < 0 || static_cast<size_t>(s.index) >= node.gpus.size()) continue;
      GpuUsage& g = node.gpus[static_cast<size_t>(s.index)];
      g.core_used_milli += sign * s.core_milli;
      g.mem_used_mib += sign * s.mem_mib;
      g.sharers += sign;
    }
  }
  const int kind = GpuPodKind(pod);
  if (kind >= 0) {
    int& n = node.gpu_pod_kinds[kind];
    n += sign;
    if (n == 0) node.gpu_pod_kinds.erase(kind);
  }
}

std::optional<PreemptionPlan> PlanOnNode(const PodRequest& pod, int32_t priority, const PreemptionNode& node,
                                         const PreemptionOptions& options) {
  const int64_t now = options.now_unix;
  const std::set<std::string> forced_uids(node.forced_uids.begin(), node.forced_uids.end());
  // What stays whatever happens: the node less terminating and forced pods.
  const SlotRoom& limit = node.slots;
  Room base{node.node, limit.taken};
  std::vector<const PreemptionPod*> forced, candidates;
  for (const PreemptionPod& p : node.pods) {
    if (!p.uid.empty() && forced_uids.contains(p.uid)) {
      forced.push_back(&p);
      base.Apply(p, -1);
    } else if (p.terminating) {
      base.Apply(p, -1);
    } else if (p.evictable && p.priority < priority) {
      candidates.push_back(&p);
    }
  }
  if (Fits(pod, limit, base)) return MakePlan(pod, node, base.node, forced, {}, true, now);

  std::set<int32_t> tiers;
  for (const PreemptionPod* p : candidates) tiers.insert(p->priority);
  for (const int32_t tier : tiers) {
    // Only pods up to this priority; the tiers below did not free enough.
    std::vector<const PreemptionPod*> pool;
    for (const PreemptionPod* p : candidates)
      if (p->priority <= tier) pool.push_back(p);
    std::sort(pool.begin(), pool.end(), LeastWorkFirst);
    Room all = base;
    for (const PreemptionPod* p : pool) all.Apply(*p, -1);
    if (!Fits(pod, limit, all)) continue;

    const size_t max = options.max_victims > 0 ? std::min(pool.size(), static_cast<size_t>(options.max_victims))
                                               : pool.size();
    SubsetSearch search(pod, limit, pool, now, std::max<int64_t>(options.search_budget, 1));
    Room work = base;
    for (size_t size = 1; size <= max && !search.exhausted(); ++size) {
      std::vector<size_t> best = search.Best(work, size);
      if (best.empty() || search.exhausted()) continue;
      std::vector<const PreemptionPod*> chosen;
      Room freed = base;
      for (size_t i : best) {
        chosen.push_back(pool[i]);
        freed.Apply(*pool[i], -1);
      }
      return MakePlan(pod, node, freed.node, forced, std::move(chosen), true, now);
    }
    if (!search.exhausted()) continue;  // no subset within max_victims at this tier
    // Too many subsets: reprieve the most important pods the preemptor can do without.
    std::vector<const PreemptionPod*> order = pool;
    std::sort(order.begin(), order.end(), MostImportantFirst);
    Room freed = all;
    std::vector<const PreemptionPod*> chosen;
    for (const PreemptionPod* p : order) {
      freed.Apply(*p, +1);
      if (Fits(pod, limit, freed)) continue;  // reprieved
      freed.Apply(*p, -1);
      chosen.push_back(p);
    }
    if (options.max_victims > 0 && chosen.size() > static_cast<size_t>(options.max_victims)) continue;
    return MakePlan(pod, node, freed.node, forced, std::move(chosen), false, now);
  }
  return std::nullopt;
}

bool BetterPlan(const PreemptionPlan& a, const PreemptionPlan& b) {
  if (a.highest_victim_priority != b.highest_victim_priority)
    return a.highest_victim_priority < b.highest_victim_priority;
  if (a.victims.size() != b.victims.size()) return a.victims.size() < b.victims.size();
  if (a.work_lost_seconds != b.work_lost_seconds) return a.work_lost_seconds < b.work_lost_seconds;
  return a.node < b.node;
}

std::vector<PreemptionPlan> PlanPreemption(const PodRequest& pod, int32_t priority,
                                           const std::vector<PreemptionNode>& nodes,
                                           const PreemptionOptions& options) {
  std::vector<PreemptionPlan> plans;
  for (const PreemptionNode& node : nodes) {
    if (auto plan = PlanOnNode(pod, priority, node, options)) plans.push_back(std::move(*plan));
  }
  std::sort(plans.begin(), plans.end(), BetterPlan);
  return plans;
}

}  // namespace tessera::core
