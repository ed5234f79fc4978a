#include "scheduler/preemptor.h"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "core/preemption.h"
#include "scheduler/rejection.h"

namespace tessera::scheduler {
namespace {


// kube-scheduler's preempt verb is taken as driving a pod's preemption for this long.
constexpr auto kSchedulerDrivenFor = std::chrono::seconds(30);

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos) return {"default", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// "8192 MiB and 30% of 1 GPU", "2 whole GPUs", per GPU container, joined by "; ".
std::string DescribeRequest(const core::PodRequest& pod) {
  std::string out;
  for (const auto& c : pod.containers) {
    if (c.gpu_count == 0) continue;
    if (!out.empty()) out += "; ";
    if (c.core_milli_per_gpu >= core::kCoreMilliPerGpu) {
      out += c.gpu_count == 1 ? "a whole GPU" : std::to_string(c.gpu_count) + " whole GPUs";
    } else {
      out += DescribeShare(c) + (c.gpu_count == 1 ? " of 1 GPU" : " of each of " + std::to_string(c.gpu_count) + " GPUs");
    }
  }
  return out.empty() ? "no GPU" : out;
}

std::string VictimList(const core::PreemptionPlan& plan) {
  std::string out;
  for (const auto& v : plan.victims) {
    if (!out.empty()) out += ", ";
    out += v.key + " (priority " + std::to_string(v.priority) + ")";
  }
  return out;
}

// "1 tessera.io/gpu slot", "2 nvidia.com/gpu slots".
std::string SlotText(int64_t count, const std::string& resource) {
  return std::to_string(count) + " " + resource + (count == 1 ? " slot" : " slots");
}

}  // namespace

void ReserveNominated(const ClusterView& view, const Nomination& nomination, core::NodeState* node) {
  // What the victims still hold on this node, per GPU (memory, core, sharers).
  std::vector<core::GpuUsage> held(node->gpus.size());
  int64_t cpu = 0, mem = 0;
  for (const std::string& key : nomination.victims) {
    const core::Assignment* a = view.ledger().FindAssignment(key);
    const core::PodRequest* r = view.HeldRequest(key);
    if (a == nullptr || r == nullptr || a->node != node->info.name) continue;
    cpu += r->cpu_milli;
    mem += r->memory_mib;
    for (const auto& ca : a->containers) {
      for (const auto& s : ca.gpus) {
        if (s.index < 0 || static_cast<size_t>(s.index) >= held.size()) continue;
        auto& h = held[static_cast<size_t>(s.index)];
        h.core_used_milli += s.core_milli;
        h.mem_used_mib += s.mem_mib;
        h.sharers += 1;
      }
    }
  }
  std::vector<core::GpuUsage> want(node->gpus.size());
  for (const auto& ca : nomination.assignment.containers) {
    for (const auto& s : ca.gpus) {
      if (s.index < 0 || static_cast<size_t>(s.index) >= want.size()) continue;
      auto& w = want[static_cast<size_t>(s.index)];
      w.core_used_milli += s.core_milli;
      w.mem_used_mib += s.mem_mib;
      w.sharers += 1;
    }
  }
  node->cpu_used_milli += std::max<int64_t>(0, nomination.request.cpu_milli - cpu);
  node->mem_used_mib += std::max<int64_t>(0, nomination.request.memory_mib - mem);
  for (size_t i = 0; i < node->gpus.size(); ++i) {
    node->gpus[i].core_used_milli += std::max<int64_t>(0, want[i].core_used_milli - held[i].core_used_milli);
    node->gpus[i].mem_used_mib += std::max<int64_t>(0, want[i].mem_used_mib - held[i].mem_used_mib);
    node->gpus[i].sharers += std::max(0, want[i].sharers - held[i].sharers);
  }
}

int64_t NominatedSlots(const ClusterView& view, const std::vector<Nomination>& nominations, std::string_view node,
                       const SlotAsk& ask) {
  if (ask.count == 0) return 0;
  int64_t reserved = 0;
  for (const Nomination& nom : nominations) {
    if (nom.node != node || nom.slots.count == 0 || nom.slots.which != ask.which) continue;
    int64_t held = 0;  // by its victims still there
    for (const std::string& key : nom.victims) {
      const SlotAsk* slots = view.HeldSlots(key);
      const core::Assignment* a = view.ledger().FindAssignment(key);
      if (slots != nullptr && a != nullptr && a->node == node && slots->which == ask.which) held += slots->count;
    }
    reserved += std::max<int64_t>(0, nom.slots.count - held);
  }
  return reserved;
}

GpuPreemptor::GpuPreemptor(ClusterState& state, PreemptionApi& api, PreemptorOptions options)
    : state_(state),
      api_(api),
      options_(std::move(options)),
      log_(options_.logger ? options_.logger : spdlog::default_logger()) {}

GpuPreemptor::~GpuPreemptor() { Stop(); }

void GpuPreemptor::Start() {
  MutexLock lock(mu_);
  if (thread_.joinable() || !options_.enabled) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void GpuPreemptor::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void GpuPreemptor::Request(PreemptionRequest request) {
  if (!options_.enabled || request.nodes.empty()) return;
  const Clock::time_point now = Now();
  {
    MutexLock lock(mu_);
    if (busy_.contains(request.key)) return;
    if (auto n = nominations_.find(request.key); n != nominations_.end() && n->second.uid == request.uid) return;
    if (auto c = cooldown_.find(request.uid); c != cooldown_.end() && now < c->second) return;
    if (auto s = scheduler_driven_.find(request.uid); s != scheduler_driven_.end() && now < s->second) return;
    busy_.insert(request.key);
    log_->debug("preemption: {} (priority {}) queued: no room on {} nodes", request.key, request.priority,
                request.nodes.size());
    queue_.push_back({std::move(request), now + options_.delay});
  }
  wake_.NotifyAll();
}

void GpuPreemptor::NoteSchedulerPreemption(const std::string& uid) {
  if (uid.empty()) return;
  MutexLock lock(mu_);
  scheduler_driven_[uid] = Now() + kSchedulerDrivenFor;
}

void GpuPreemptor::Forget(const std::string& key) {
  MutexLock lock(mu_);
  if (auto it = nominations_.find(key); it != nominations_.end()) {
    log_->info("preemption: {} is placed; its nomination on node {} ends", key, it->second.node);
    nominations_.erase(it);
  }
}

std::vector<Nomination> GpuPreemptor::NominationsAgainst(const std::string& pod_key) const {
  std::vector<Nomination> out;
  MutexLock lock(mu_);
  for (const auto& [key, n] : nominations_)
    if (key != pod_key) out.push_back(n);
  return out;
}

void GpuPreemptor::Loop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    const Clock::time_point now = Now();
    Clock::time_point next = now + std::chrono::seconds(1);  // expiry checks at least this often
    if (!queue_.empty()) next = std::min(next, queue_.front().due);
    if (queue_.empty() || queue_.front().due > now) {
      wake_.WaitUntil(mu_, next);
      if (stopping_) break;
      lock.Unlock();
      Expire(Now());
      lock.Lock();
      continue;
    }
    Queued item = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    Process(item.request);
    lock.Lock();
    busy_.erase(item.request.key);
  }
}

int GpuPreemptor::RunPending() {
  Expire(Now());
  int done = 0;
  while (true) {
    Queued item;
    {
      MutexLock lock(mu_);
      if (queue_.empty() || queue_.front().due > Now()) break;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    Process(item.request);
    {
      MutexLock lock(mu_);
      busy_.erase(item.request.key);
    }
    ++done;
  }
  return done;
}

void GpuPreemptor::Expire(Clock::time_point now) {
  std::vector<Nomination> live;
  {
    MutexLock lock(mu_);
    for (auto it = scheduler_driven_.begin(); it != scheduler_driven_.end();)
      it = now >= it->second ? scheduler_driven_.erase(it) : std::next(it);
    for (auto it = cooldown_.begin(); it != cooldown_.end();)
      it = now >= it->second ? cooldown_.erase(it) : std::next(it);
    for (auto it = nominations_.begin(); it != nominations_.end();) {
      if (now >= it->second.expires) {
        log_->warn("preemption: the nomination of {} on node {} expired after {} s without the pod binding there",
                   it->first, it->second.node, options_.nomination_ttl.count());
        it = nominations_.erase(it);
        continue;
      }
      live.push_back(it->second);
      ++it;
    }
  }
  // Without the lock: ClusterState's mutex comes first.
  for (const Nomination& n : live) {
    if (state_.IsPending(n.key, n.uid)) continue;
    MutexLock lock(mu_);
    if (auto it = nominations_.find(n.key); it != nominations_.end() && it->second.uid == n.uid) {
      log_->info("preemption: {} is no longer pending; its nomination on node {} ends", n.key, n.node);
      nominations_.erase(it);
    }
  }
}

void GpuPreemptor::GiveUp(const PreemptionRequest& request, const std::string& why) {
  bool report = false;
  {
    MutexLock lock(mu_);
    cooldown_[request.uid] = Now() + options_.retry_after;
    std::string& last = last_failure_[request.uid];
    report = last != why;
    last = why;
    if (last_failure_.size() > 4096) last_failure_.clear();  // bounded; a repeat costs one Event
  }
  log_->info("preemption: {} (priority {}): {}", request.key, request.priority, why);
  if (!report) return;
  const auto [ns, name] = SplitKey(request.key);
  api_.RecordEvent(ns, name, request.uid, "Warning", "TesseraPreemptionFailed",
                   "tessera-scheduler cannot make room for this pod's GPU share (" +
                       DescribeRequest(request.request) + ") by preemption: " + why);
}

void GpuPreemptor::Process(const PreemptionRequest& request) {
  if (options_.may_act) {
    if (Status gate = options_.may_act(); !gate.ok()) {
      log_->debug("preemption: {}: not planning: {}", request.key, gate.message());
      return;
    }
  }
  {
    MutexLock lock(mu_);
    if (auto s = scheduler_driven_.find(request.uid); s != scheduler_driven_.end()) {
      log_->info("preemption: {}: kube-scheduler's preemption handles it; not planning", request.key);
      return;
    }
    if (auto n = nominations_.find(request.key); n != nominations_.end() && n->second.uid == request.uid) return;
  }
  std::string nominated;
  if (!state_.IsPending(request.key, request.uid, &nominated)) {
    log_->debug("preemption: {} is no longer pending; not planning", request.key);
    return;
  }
  if (!nominated.empty()) {
    log_->info("preemption: {} is nominated to node {} by kube-scheduler; not planning", request.key, nominated);
    return;
  }
  const auto [ns, name] = SplitKey(request.key);
  core::PreemptionOptions plan_options;
  plan_options.now_unix = options_.unix_now ? options_.unix_now()
                                            : std::chrono::duration_cast<std::chrono::seconds>(
                                                  std::chrono::system_clock::now().time_since_epoch())
                                                  .count();
  plan_options.max_victims = options_.max_victims;
  std::set<std::string> refused;  // victims a PodDisruptionBudget protects
  std::string refusals;
  for (int attempt = 0; attempt < std::max(1, options_.max_attempts); ++attempt) {
    // Nodes reserved for another pod are left alone.
    std::set<std::string> reserved;
    for (const Nomination& n : NominationsAgainst(request.key)) reserved.insert(n.node);
    std::vector<core::PreemptionNode> nodes;
    state_.Read([&](const ClusterView& view) {
      for (const std::string& node_name : request.nodes) {
        if (reserved.contains(node_name)) continue;
        const core::NodeState* node = view.ledger().FindNode(node_name);
        if (node == nullptr) continue;
        // (No nomination of another pod is on it: its slot count needs none.)
        core::PreemptionNode pn =
            view.PreemptionNodeOf(static_cast<size_t>(node - view.ledger().nodes().data()), request.slots);
        for (auto& p : pn.pods) {
          if (refused.contains(p.key) || p.key == request.key) p.evictable = false;
        }
        nodes.push_back(std::move(pn));
      }
    });
    if (attempt == 0) {
      bool any_lower = false;
      for (const auto& pn : nodes)
        for (const auto& p : pn.pods) any_lower = any_lower || (!p.terminating && p.priority < request.priority);
      if (!any_lower) {  // the common case without priorities: nothing to consider, nothing to report
        log_->debug("preemption: {}: no pod of lower priority holds a share on its {} candidate nodes", request.key,
                    nodes.size());
        MutexLock lock(mu_);
        cooldown_[request.uid] = Now() + options_.retry_after;
        return;
      }
    }
    const std::vector<core::PreemptionPlan> plans =
        core::PlanPreemption(request.request, request.priority, nodes, plan_options);
    if (plans.empty()) {
      std::string why = "no node has enough GPU share held by pods of lower priority than " +
                        std::to_string(request.priority);
      if (options_.max_victims > 0) why += " (at most " + std::to_string(options_.max_victims) + " victims per node)";
      if (!reserved.empty()) why += "; " + std::to_string(reserved.size()) + " node(s) are reserved for other preempting pods";
      if (!refusals.empty()) why += "; PodDisruptionBudgets forbid evicting " + refusals;
      GiveUp(request, why);
      return;
    }
    const core::PreemptionPlan& plan = plans.front();
    // Ask first: a PodDisruptionBudget refusing one victim rules out the plan
    // before anything is evicted.
    bool blocked = false;
    for (const auto& v : plan.victims) {
      const auto [vns, vname] = SplitKey(v.key);
      Status st = api_.Evict(vns, vname, v.uid, /*dry_run=*/true);
      if (st.ok() || st.code() == StatusCode::kNotFound) continue;
      if (st.code() == StatusCode::kResourceExhausted) {
        log_->info("preemption: {}: a PodDisruptionBudget forbids evicting {} now; trying another plan", request.key,
                   v.key);
        refused.insert(v.key);
        refusals += (refusals.empty() ? "" : ", ") + v.key;
        blocked = true;
        continue;
      }
      GiveUp(request, "asking to evict " + v.key + " failed: " + st.message());
      return;
    }
    if (blocked) continue;

    Nomination nomination;
    nomination.key = request.key;
    nomination.uid = request.uid;
    nomination.node = plan.node;
    nomination.priority = request.priority;
    nomination.request = request.request;
    nomination.assignment = plan.assignment;
    nomination.slots = request.slots;
    for (const auto& v : plan.victims) nomination.victims.push_back(v.key);
    nomination.expires = Now() + options_.nomination_ttl;
    {
      MutexLock lock(mu_);
      nominations_[request.key] = nomination;
      last_failure_.erase(request.uid);
    }
    // Where the node's kubelet is short of slots, they are part of the need.
    std::string share = DescribeRequest(request.request);
    bool slots_short = false;
    for (const auto& pn : nodes) {
      if (pn.node.info.name != plan.node || pn.slots.allocatable < 0) continue;
      slots_short = true;
      share += ", with " + SlotText(request.slots.count, request.slots.resource) + " (its kubelet has " +
               std::to_string(pn.slots.allocatable) + " allocatable)";
    }
    if (plan.victims.empty()) {
      log_->info("preemption: {} nominated to node {}: it fits once the pods terminating there are gone", request.key,
                 plan.node);
      api_.RecordEvent(ns, name, request.uid, "Normal", "TesseraPreempting",
                       "Reserved node " + plan.node + " for this pod's GPU share (" + share +
                           "): it fits once the pods terminating there are gone");
      return;
    }
    log_->info("preemption: {} (priority {}) nominated to node {}: evicting {} ({} victim(s), {} s of work lost{})",
               request.key, request.priority, plan.node, VictimList(plan), plan.victims.size(),
               plan.work_lost_seconds, plan.exact ? "" : ", reprieve order");
    for (const auto& v : plan.victims) {
      const auto [vns, vname] = SplitKey(v.key);
      Status st = api_.Evict(vns, vname, v.uid, /*dry_run=*/false);
      if (!st.ok() && st.code() != StatusCode::kNotFound) {
        Forget(request.key);
        GiveUp(request, "evicting " + v.key + " failed: " + st.message());
        return;
      }
      api_.RecordEvent(vns, vname, v.uid, "Normal", "TesseraPreempted",
                       "Preempted by " + request.key + " (priority " + std::to_string(request.priority) +
                           ") on node " + plan.node + ": it needs " + share + " and this pod (priority " +
                           std::to_string(v.priority) + ") held " + DescribeAssignment(v.assignment) +
                           (slots_short && v.slots > 0 ? " and " + SlotText(v.slots, request.slots.resource) : ""));
    }
    api_.RecordEvent(ns, name, request.uid, "Normal", "TesseraPreempting",
                     "Preempting " + std::to_string(plan.victims.size()) + " lower-priority pod(s) on node " +
                         plan.node + " for this pod's GPU share (" + share + "): " + VictimList(plan));
    return;
  }
  GiveUp(request, "PodDisruptionBudgets forbid evicting " + refusals + " (tried " +
                      std::to_string(options_.max_attempts) + " plans)");
}

}  // namespace tessera::scheduler
