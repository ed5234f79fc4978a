#include "scheduler/cluster_state.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/codec.h"
#include "core/quantity.h"
#include "core/timestamp.h"

namespace tessera::scheduler {
namespace {

using Json = nlohmann::json;

constexpr size_t kNewHoldsKept = 8192;

const Json* Member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// The string at obj.a.b, or "" when absent or not a string.
std::string StringAt(const Json& obj, std::string_view a, std::string_view b) {
  const Json* outer = Member(obj, a);
  const Json* v = outer ? Member(*outer, b) : nullptr;
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

const Json* Annotation(const Json& obj, std::string_view name) {
  const Json* meta = Member(obj, "metadata");
  const Json* annotations = meta ? Member(*meta, "annotations") : nullptr;
  return annotations ? Member(*annotations, name) : nullptr;
}

// What decides a node's place in the ledger: the inventory annotation and
// allocatable CPU, memory and slots. Heartbeats change none of these.
std::string NodeFingerprint(const Json& node, const core::ResourceNames& names) {
  std::string fp;
  const Json* inv = Annotation(node, core::kInventoryAnnotation);
  fp += inv ? inv->dump() : "-";
  fp += Annotation(node, core::kNodeAgentAnnotation) != nullptr ? "\nagent" : "\n-";
  const Json* status = Member(node, "status");
  const Json* alloc = status ? Member(*status, "allocatable") : nullptr;
  std::vector<std::string> counted{"cpu", "memory"};
  for (std::string& r : core::SlotResources(names)) counted.push_back(std::move(r));
  for (const std::string& r : counted) {
    const Json* v = alloc ? Member(*alloc, r) : nullptr;
    fp += '\n';
    fp += v ? v->dump() : "-";
  }
  return fp;
}

// Whether the node has admitted a bound pod: it runs, or the node agent has
// listed every container the assignment gives GPUs in tessera.io/allocated.
bool IsAdmitted(const core::Assignment& assignment, const std::string& phase, const std::string& allocated) {
  if (phase == "Running") return true;
  std::set<std::string, std::less<>> listed;
  for (size_t start = 0; start <= allocated.size();) {
    size_t comma = allocated.find(',', start);
    if (comma == std::string::npos) comma = allocated.size();
    if (comma > start) listed.insert(allocated.substr(start, comma - start));
    start = comma + 1;
  }
  for (const auto& c : assignment.containers) {
    if (!c.gpus.empty() && !listed.count(c.name)) return false;
  }
  return true;
}

}  // namespace

int64_t GpuSummary::core_free_milli() const { return core::kCoreMilliPerGpu - core_used_milli; }

std::string StateSummary::ToString() const {
  return "nodes=" + std::to_string(nodes) + " gpu_nodes=" + std::to_string(gpu_nodes) +
         " gpus=" + std::to_string(gpus) + " held=" + std::to_string(pods_held) +
         " assumed=" + std::to_string(pods_assumed) + " waiting=" + std::to_string(pods_waiting) +
         " conflicts=" + std::to_string(pods_conflict) + " pending=" + std::to_string(pods_pending) +
         " host_pods=" + std::to_string(host_pods);
}

// ---- ClusterView ----
// A view exists only inside ClusterState::Read (and Assume, which checks
// its node through one), with the state's mutex held: each method says so
// to the analysis.

const core::Ledger& ClusterView::ledger() const {
  state_->mu_.AssertHeld();
  return state_->ledger_;
}

ClusterView::NodeKind ClusterView::KindOf(std::string_view node, const std::string** reason) const {
  state_->mu_.AssertHeld();
  auto it = state_->nodes_.find(std::string(node));
  if (it == state_->nodes_.end()) return NodeKind::kUnknown;
  if (it->second.not_gpu_reason.empty()) return NodeKind::kGpu;
  if (reason) *reason = &it->second.not_gpu_reason;
  return NodeKind::kNotGpu;
}

uint64_t ClusterView::topology_version() const {
  state_->mu_.AssertHeld();
  return state_->topology_version_;
}

std::string ClusterView::AdmissionStall(std::string_view node, Clock::time_point now) const {
  state_->mu_.AssertHeld();
  auto a = state_->awaiting_.find(node);
  if (a == state_->awaiting_.end()) return "";
  const std::string* oldest = nullptr;
  Clock::time_point since = now;
  for (const std::string& key : a->second) {
    const Clock::time_point t = state_->pods_.at(key).awaiting_since;
    if (oldest == nullptr || t < since) {
      oldest = &key;
      since = t;
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
  if (oldest == nullptr || waited <= state_->options_.admission_wait) return "";
  return "node " + std::string(node) + " has not admitted pod " + *oldest + " for " +
         std::to_string(waited.count() / 1000) + " s; tessera-scheduler binds one pod at a time to a node with a "
         "node agent, so new pods go to other nodes until it does";
}

SlotAsk SlotsAsked(const core::PodView& pod, const core::ResourceNames& names) {
  SlotAsk ask;
  for (const core::PodView::Container& c : pod.containers) {
    // Init containers may not ask for GPUs (PodRequestFromJson refuses the
    // pod), so the app containers' sum is what the kubelet allocates.
    const bool hami = c.front_end == core::FrontEnd::kHami && names.hami.enabled;
    if (c.init || (c.front_end != core::FrontEnd::kTessera && !hami)) continue;
    const std::string& r = hami ? names.hami.gpu : names.gpu;
    auto q = c.limits.find(r);
    if (q == c.limits.end()) {
      q = c.requests.find(r);
      if (q == c.requests.end()) continue;
    }
    Result<int64_t> n = core::ParseCount(q->second);
    if (!n.ok()) continue;  // the request's own check says what is wrong
    ask.resource = r;
    ask.which = hami ? 1 : 0;
    ask.count += *n;
  }
  return ask;
}

std::optional<ClusterView::SlotCount> ClusterView::SlotsFor(size_t index, size_t which) const {
  state_->mu_.AssertHeld();
  if (state_->slots_short_.empty()) return std::nullopt;
  const auto& nodes = state_->ledger_.nodes();
  auto& table = state_->short_by_index_;
  if (state_->short_by_index_version_ != state_->topology_version_) {
    const std::vector<std::string> resources = core::SlotResources(state_->options_.resources);
    table.assign(nodes.size(), {});
    for (size_t i = 0; i < nodes.size(); ++i) {
      auto it = state_->slots_short_.find(nodes[i].info.name);
      if (it == state_->slots_short_.end()) continue;
      for (size_t w = 0; w < resources.size(); ++w) {
        if (auto r = it->second.find(resources[w]); r != it->second.end()) table[i].have[w] = r->second;
      }
    }
    state_->short_by_index_version_ = state_->topology_version_;
  }
  if (index >= table.size() || which >= 2 || table[index].have[which] < 0) return std::nullopt;
  ClusterState::ShortSlots& entry = table[index];
  const core::NodeState& node = nodes[index];
  if (entry.version != node.version) {
    entry.taken[0] = entry.taken[1] = 0;
    for (const std::string& key : state_->ledger_.PodsOn(node.info.name)) {
      auto it = state_->pods_.find(key);
      if (it == state_->pods_.end() || it->second.slots.count == 0) continue;
      entry.taken[it->second.slots.which] += it->second.slots.count;
    }
    entry.version = node.version;
  }
  return SlotCount{entry.have[which], entry.taken[which]};
}

std::string ClusterView::SlotShortage(size_t index, const SlotAsk& ask, int64_t also_taken) const {
  state_->mu_.AssertHeld();
  if (ask.count == 0) return "";
  const std::optional<SlotCount> count = SlotsFor(index, ask.which);
  if (!count) return "";
  const int64_t have = count->allocatable;
  const int64_t taken = count->taken + also_taken;
  if (taken + ask.count <= have) return "";
  const core::NodeState& node = state_->ledger_.nodes()[index];
  const int64_t listed = core::ListedSlots(node.info);  // -1 when a GPU lists no slots
  std::string why = "node " + node.info.name + ": its kubelet reports " + std::to_string(have) + " " + ask.resource +
                    " slots allocatable, " + std::to_string(taken) + " of them taken" +
                    (also_taken > 0 ? " (" + std::to_string(also_taken) + " by pods being bound or preempting)" : "") +
                    ", and the pod asks for " + std::to_string(ask.count);
  if (have < listed) {
    why += " (its inventory lists " + std::to_string(listed) +
           ": the node agent is starting or restarting, or some GPUs' slots are unhealthy)";
  }
  return why;
}

const std::map<std::string, int64_t, std::less<>>& ClusterView::Models() const {
  state_->mu_.AssertHeld();
  if (state_->models_dirty_) {
    state_->models_.clear();
    for (const auto& n : state_->ledger_.nodes()) {
      for (const auto& g : n.info.gpus) {
        int64_t& m = state_->models_[g.model];
        m = std::max(m, g.memory_mib);
      }
    }
    state_->models_dirty_ = false;
  }
  return state_->models_;
}

std::vector<core::PodRequest> ClusterView::HeldRequests() const {
  state_->mu_.AssertHeld();
  std::vector<core::PodRequest> out;
  for (const auto& [key, rec] : state_->pods_)
    if (core::HoldsShare(rec.stage)) out.push_back(rec.request);
  for (const auto& [key, rec] : state_->claims_)
    if (!rec.node.empty()) out.push_back(rec.request);
  for (const auto& [key, rec] : state_->host_pods_) out.push_back(rec.request);
  return out;
}

std::vector<core::PodRequest> ClusterView::NewHoldsSince(uint64_t* cursor) const {
  state_->mu_.AssertHeld();
  const uint64_t first = state_->new_holds_first_;
  const uint64_t end = first + state_->new_holds_.size();
  std::vector<core::PodRequest> out;
  for (uint64_t i = std::max(*cursor, first); i < end; ++i) out.push_back(state_->new_holds_[i - first]);
  *cursor = end;
  return out;
}

std::vector<core::PreemptionPod> ClusterView::HeldPodsOn(std::string_view node, const SlotAsk& ask) const {
  state_->mu_.AssertHeld();
  std::vector<core::PreemptionPod> out;
  for (const std::string& key : state_->ledger_.PodsOn(node)) {
    auto it = state_->pods_.find(key);
    if (it == state_->pods_.end()) continue;
    const ClusterState::PodRecord& rec = it->second;
    core::PreemptionPod p;
    p.key = key;
    p.uid = rec.uid;
    p.priority = rec.priority;
    p.started_unix = rec.started_unix;
    p.terminating = rec.terminating;
    p.evictable = rec.seen && !rec.uid.empty();
    p.request = rec.request;
    p.assignment = rec.assignment;
    if (ask.count > 0 && rec.slots.which == ask.which) p.slots = rec.slots.count;
    out.push_back(std::move(p));
  }
  return out;
}

core::PreemptionNode ClusterView::PreemptionNodeOf(size_t index, const SlotAsk& ask, int64_t also_taken) const {
  state_->mu_.AssertHeld();
  core::PreemptionNode pn;
  pn.node = state_->ledger_.nodes().at(index);
  pn.pods = HeldPodsOn(pn.node.info.name, ask);
  if (ask.count > 0) {
    if (std::optional<SlotCount> count = SlotsFor(index, ask.which)) {
      pn.slots.allocatable = count->allocatable;
      pn.slots.taken = count->taken + also_taken;
      pn.slots.asked = ask.count;
    }
  }
  return pn;
}

Result<const core::NodeState*> ClusterView::BindTarget(std::string_view pod_key, std::string_view node) const {
  state_->mu_.AssertHeld();
  if (auto it = state_->pods_.find(pod_key); it != state_->pods_.end())
    return AlreadyExists("pod " + std::string(pod_key) + " already has a share on node " + it->second.assignment.node);
  const core::NodeState* state = state_->ledger_.FindNode(node);
  if (state != nullptr) return state;
  const std::string* reason = nullptr;
  if (KindOf(node, &reason) == NodeKind::kUnknown)
    return NotFound("node " + std::string(node) + " is not known to tessera-scheduler");
  return FailedPrecondition("node " + std::string(node) + ": " +
                            (reason != nullptr ? *reason : std::string("not a GPU node")));
}

const LoadTracker& ClusterView::load() const {
  state_->mu_.AssertHeld();
  return state_->load_;
}

const core::PodRequest* ClusterView::HeldRequest(std::string_view key) const {
  state_->mu_.AssertHeld();
  auto it = state_->pods_.find(key);
  if (it == state_->pods_.end() || !core::HoldsShare(it->second.stage)) return nullptr;
  return &it->second.request;
}

const SlotAsk* ClusterView::HeldSlots(std::string_view key) const {
  state_->mu_.AssertHeld();
  auto it = state_->pods_.find(key);
  if (it == state_->pods_.end() || !core::HoldsShare(it->second.stage)) return nullptr;
  return &it->second.slots;
}

// ---- ClusterState ----

ClusterState::ClusterState(ClusterStateOptions options)
    : options_(std::move(options)),
      log_(options_.logger ? options_.logger : spdlog::default_logger()),
      load_(options_.load) {}

int64_t ClusterState::NowSeconds() const {
  const auto now = options_.wall_now ? options_.wall_now() : std::chrono::system_clock::now();
  return std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
}

void ClusterState::UpsertNode(const Json& node) {
  const std::string name = StringAt(node, "metadata", "name");
  if (name.empty()) {
    log_->warn("node event without metadata.name ignored");
    return;
  }
  std::string fp = NodeFingerprint(node, options_.resources);
  MutexLock lock(mu_);
  NodeEntry& entry = nodes_[name];
  if (entry.fingerprint == fp) return;  // a heartbeat: nothing the ledger uses changed
  entry.fingerprint = std::move(fp);
  const bool had_agent = entry.has_agent;
  entry.has_agent = Annotation(node, core::kNodeAgentAnnotation) != nullptr;
  TopologyChanged();
  Result<core::NodeInfo> info = core::NodeInfoFromJson(node);
  const bool in_ledger = ledger_.FindNode(name) != nullptr;
  if (!info.ok()) {
    entry.not_gpu_reason = info.status().code() == StatusCode::kNotFound
                               ? info.status().message()
                               : "not a GPU node: " + info.status().message();
    if (in_ledger) {
      log_->warn("node {} is no longer a GPU node: {}", name, entry.not_gpu_reason);
      Evict(name, "node " + name + " is not a GPU node: " + entry.not_gpu_reason);
      Status st = ledger_.RemoveNode(name);
      if (!st.ok()) log_->error("node {}: {}", name, st.message());
      TopologyChanged();
    } else {
      log_->debug("node {}: {}", name, entry.not_gpu_reason);
    }
    slots_short_.erase(name);
    SetWaitingReason(name, "waiting for node " + name + " to be a GPU node (" + entry.not_gpu_reason + ")");
    return;
  }
  entry.not_gpu_reason.clear();
  TopologyChanged();
  if (!in_ledger) {
    log_->info("node {}: {} GPUs", name, info->gpus.size());
    Status st = ledger_.AddNode(*info);
    if (!st.ok()) {
      entry.not_gpu_reason = "not a GPU node: " + st.message();
      log_->error("node {}: {}", name, st.message());
      slots_short_.erase(name);
      return;
    }
  } else if (!(ledger_.FindNode(name)->info == *info)) {
    if (Status st = ledger_.UpdateNode(*info); !st.ok()) {
      // Its pods no longer fit the new capacity: re-place them one by one;
      // what does not fit becomes a conflict.
      log_->warn("node {} changed under its pods ({}); re-placing them", name, st.message());
      Evict(name, "node " + name + " changed");
      if (Status again = ledger_.UpdateNode(*info); !again.ok())
        log_->error("node {}: {}", name, again.message());
    }
    log_->info("node {} updated: {} GPUs", name, info->gpus.size());
  }
  NoteSlots(name, node, *info);
  freed_.fetch_add(1, std::memory_order_relaxed);  // a GPU node added or changed: room may have appeared
  ApplyParked(name);
  if (had_agent != entry.has_agent) {
    log_->info("node {} {} a node agent", name, entry.has_agent ? "has" : "no longer has");
    for (const std::string& key : ledger_.PodsOn(name)) {
      if (!IsClaimLedgerKey(key) && !IsHostLedgerKey(key)) SettleAdmission(key, pods_.at(key));
    }
  }
}

void ClusterState::NoteSlots(const std::string& name, const Json& node, const core::NodeInfo& info) {
  const int64_t listed = core::ListedSlots(info);
  const bool limited = listed >= 0;
  std::map<std::string, int64_t, std::less<>> short_of;
  for (const std::string& r : core::SlotResources(options_.resources)) {
    if (const int64_t have = core::AllocatableCount(node, r); !limited || have < listed) short_of[r] = have;
  }
  auto it = slots_short_.find(name);
  const bool was_short = it != slots_short_.end();
  if (short_of.empty()) {
    if (was_short) {
      log_->info("node {}: all {} device-plugin slots its inventory lists are allocatable", name, listed);
      slots_short_.erase(it);
    }
    return;
  }
  if (!was_short || it->second != short_of) {
    std::string counts;
    for (const auto& [r, have] : short_of) counts += (counts.empty() ? "" : ", ") + std::to_string(have) + " " + r;
    if (limited) {
      log_->info("node {}: {} slots allocatable of the {} its inventory lists; pods asking for more wait", name,
                 counts, listed);
    } else {
      log_->debug("node {}: {} slots allocatable (its inventory lists no slots per GPU)", name, counts);
    }
  }
  slots_short_.insert_or_assign(name, std::move(short_of));
}

void ClusterState::DeleteNode(std::string_view name) {
  MutexLock lock(mu_);
  const std::string n(name);
  if (nodes_.erase(n) == 0) return;
  slots_short_.erase(n);
  TopologyChanged();
  if (ledger_.FindNode(n) == nullptr) {
    SetWaitingReason(n, "waiting for node " + n + " (deleted)");
    return;
  }
  Evict(n, "node " + n + " was deleted");
  if (Status st = ledger_.RemoveNode(n); !st.ok()) log_->error("node {}: {}", n, st.message());
  TopologyChanged();
  log_->info("node {} deleted", n);
}

std::shared_ptr<const core::PodView> ClusterState::UpsertPod(const Json& pod) {
  Result<core::PodView> view = core::DecodePod(pod, options_.resources);
  if (!view.ok()) {
    log_->warn("pod event ignored: {}", view.status().message());
    return nullptr;
  }
  auto shared = std::make_shared<const core::PodView>(std::move(*view));
  UpsertPod(*shared);
  return shared;
}

void ClusterState::DeletePod(const Json& pod) {
  Result<core::PodView> view = core::DecodePod(pod, options_.resources);
  if (!view.ok()) {
    log_->warn("pod delete ignored: {}", view.status().message());
    return;
  }
  DeletePod(*view);
}

void ClusterState::UpsertPod(const core::PodView& pod) {
  const std::string& key = pod.key;
  const std::string& uid = pod.uid;
  const std::string& phase = pod.phase;
  const std::string& node = pod.node;
  const bool terminal = pod.terminal();
  const std::string& allocated = pod.allocated;
  const bool wants_gpu = node.empty() && !terminal && pod.wants_gpu;
  const std::string& workload = pod.workload;
  // Work that needs no lock first.
  const std::string none;
  const std::string& usage_text = node.empty() || terminal ? none : pod.usage;
  const Result<core::PodUsage> usage =
      usage_text.empty() ? Result<core::PodUsage>(core::PodUsage{}) : core::DecodeUsage(usage_text);
  const SlotAsk slots = SlotsAsked(pod, options_.resources);
  auto note_meta = [&pod, &slots](PodRecord& rec) {
    rec.slots = slots;
    rec.workload = pod.workload;
    rec.priority = pod.priority;
    rec.started_unix = pod.started_unix;
    rec.terminating = pod.terminating;
    rec.seen = true;
  };
  PendingPod pending;
  if (wants_gpu) {
    pending.uid = uid;
    pending.nominated_node = pod.nominated_node;
    pending.workload = workload;
    if (pod.request.ok()) {
      pending.request = *pod.request;
      pending.slots = slots;
    } else {
      pending.error = pod.request.status();
    }
  }

  MutexLock lock(mu_);
  NoteHostPod(pod);
  auto it = pods_.find(key);
  if (it != pods_.end() && !uid.empty() && !it->second.uid.empty() && it->second.uid != uid) {
    log_->info("pod {} was replaced (uid {} -> {}); releasing the old one's share", key, it->second.uid, uid);
    Release(key);
    it = pods_.end();
  }
  if (terminal) {
    if (pending_.erase(key) > 0 && it == pods_.end()) load_.Released(key);
    if (it != pods_.end()) {
      log_->info("pod {} {}: releasing its share", key, phase);
      Release(key);
    }
    return;
  }
  if (node.empty()) {
    if (it != pods_.end() && !it->second.assumed) {
      log_->warn("pod {} holds a share but is no longer bound; releasing it", key);
      Release(key);
    } else if (it != pods_.end()) {
      (void)Advance(key, it->second, core::PodEvent::kSeenPending);  // the watch lags this extender's Binding
    }
    if (wants_gpu) {
      // (A pod assumed here keeps the load booked at bind.)
      if (pending.error.ok() && pods_.find(key) == pods_.end())
        load_.Pending(key, workload, pending.request, NowSeconds());
      pending_[key] = std::move(pending);
    }
    return;
  }
  if (pending_.erase(key) > 0 && it == pods_.end()) load_.Released(key);  // re-predicted once it holds a share
  if (!pod.assignment.has_value()) {
    if (it != pods_.end()) {
      log_->warn("pod {} is bound to {} without a {} annotation; releasing the share held for it", key, node,
                 core::kAssignmentAnnotation);
      Release(key);
    }
    return;
  }
  const std::string& text = *pod.assignment;
  if (it != pods_.end() && it->second.assignment_text == text && it->second.assignment.node == node) {
    // An update that does not change the share (status, labels, admission).
    note_meta(it->second);
    it->second.admitted = IsAdmitted(it->second.assignment, phase, allocated);
    SettleAdmission(key, it->second);
    NoteUsage(key, it->second, usage_text, usage);
    return;
  }
  Result<core::Assignment> assignment = core::DecodeAssignment(text);
  Result<core::PodRequest> request =
      assignment.ok() ? core::HeldRequest(pod, *assignment) : Result<core::PodRequest>(assignment.status());
  if (request.ok() && assignment->node != node) {
    request = InvalidArgument("assignment names node " + assignment->node + " but the pod is bound to " + node);
  }
  if (it != pods_.end()) {
    PodRecord& rec = it->second;
    if (request.ok() && rec.assignment == *assignment && rec.request.cpu_milli == request->cpu_milli &&
        rec.request.memory_mib == request->memory_mib) {
      rec.assignment_text = text;
      if (rec.assumed) {
        rec.assumed = false;
        assumed_.erase({rec.assumed_at, key});
        if (core::HoldsShare(rec.stage)) {
          (void)ledger_.Confirm(key);
          (void)Advance(key, rec, core::PodEvent::kPlaced);
        }
        log_->debug("pod {} confirmed on {}", key, node);
      }
      rec.admitted = IsAdmitted(rec.assignment, phase, allocated);
      note_meta(rec);
      SettleAdmission(key, rec);
      NoteUsage(key, rec, usage_text, usage);
      return;
    }
    log_->info("pod {} changed its assignment; re-placing it", key);
    Release(key);
  }
  PodRecord rec;
  rec.uid = uid;
  rec.assignment_text = text;
  note_meta(rec);
  if (!request.ok()) {
    // Unusable annotation: kept as a conflict on the pod's node so it shows.
    rec.assignment.node = node;
    rec.problem = request.status().message();
    ++conflicts_total_;
    log_->error("pod {} on {}: unusable {} annotation: {}", key, node, core::kAssignmentAnnotation, rec.problem);
    PodRecord& kept = pods_.emplace(key, std::move(rec)).first->second;
    (void)Advance(key, kept, core::PodEvent::kDoesNotFit);
    return;
  }
  rec.request = std::move(request).value();
  rec.assignment = std::move(assignment).value();
  rec.admitted = IsAdmitted(rec.assignment, phase, allocated);
  Hold(key, std::move(rec));
  NoteUsage(key, pods_.at(key), usage_text, usage);
}

void ClusterState::DeletePod(const core::PodView& pod) {
  const std::string& key = pod.key;
  const std::string& uid = pod.uid;
  MutexLock lock(mu_);
  ForgetHostPod(key, uid);
  auto it = pods_.find(key);
  if (auto p = pending_.find(key); p != pending_.end() && (uid.empty() || p->second.uid == uid)) {
    pending_.erase(p);
    if (it == pods_.end()) load_.Released(key);
  }
  if (it == pods_.end()) return;
  if (!uid.empty() && !it->second.uid.empty() && it->second.uid != uid) return;  // a newer pod of that name
  log_->info("pod {} deleted: releasing its share on {}", key, it->second.assignment.node);
  Release(key);
}

Status ClusterState::ClaimAdmissionTurn(std::string_view pod_key, Clock::time_point deadline) {
  MutexLock lock(mu_);
  while (true) {
    auto it = pods_.find(pod_key);
    if (it == pods_.end() || it->second.stage != core::PodStage::kAssumed) {
      return NotFound("pod " + std::string(pod_key) + " is not assumed by this extender" +
                      (it == pods_.end() ? "" : " (it is " + std::string(core::StageName(it->second.stage)) + ")"));
    }
    PodRecord& rec = it->second;
    GiveUpStaleAwaiting(rec.assignment.node, Clock::now());
    auto a = awaiting_.find(rec.assignment.node);
    if (a == awaiting_.end()) {
      const std::string key(pod_key);
      (void)Advance(key, rec, core::PodEvent::kTurnGranted);
      SettleAdmission(key, rec);
      return Status::Ok();
    }
    if (admitted_.WaitUntil(mu_, deadline) == std::cv_status::timeout) {
      auto now_it = pods_.find(pod_key);
      auto still = now_it == pods_.end() ? awaiting_.end() : awaiting_.find(now_it->second.assignment.node);
      if (now_it != pods_.end() && still == awaiting_.end()) continue;  // freed just now: take it
      return Status(StatusCode::kUnavailable,
                    "node " + (now_it == pods_.end() ? std::string("?") : now_it->second.assignment.node) +
                        " has not admitted pod " + (still == awaiting_.end() ? std::string("?") : *still->second.begin()) +
                        " yet; tessera-scheduler binds one pod at a time to a node with a node agent, so that "
                        "Allocate cannot mix pods up (waited " + std::to_string(options_.admission_wait.count()) +
                        " ms)");
    }
  }
}

Result<core::Assignment> ClusterState::Assume(const core::PodRequest& pod, const SlotAsk& slots,
                                              std::string_view uid, const core::Assignment& assignment,
                                              uint64_t seen_version, Clock::time_point now) {
  MutexLock lock(mu_);
  TESSERA_ASSIGN_OR_RETURN(const core::NodeState* node, ClusterView(this).BindTarget(pod.key, assignment.node));
  if (node->version != seen_version)
    return Status(StatusCode::kUnavailable, "pod " + pod.key + ": node " + assignment.node +
                   " changed after its GPUs were chosen (another pod was placed or released there, or the node "
                   "was updated); choose again");
  TESSERA_RETURN_IF_ERROR(ledger_.Assume(pod, assignment));
  PodRecord rec;
  rec.uid = std::string(uid);
  rec.request = pod;
  rec.assignment = assignment;
  rec.slots = slots;
  if (auto p = pending_.find(pod.key); p != pending_.end()) rec.workload = p->second.workload;
  load_.Placed(pod.key, rec.workload, pod, assignment, NowSeconds());
  rec.assumed = true;
  rec.assumed_at = now;
  assumed_.emplace(now, pod.key);
  PodRecord& kept = pods_.emplace(pod.key, std::move(rec)).first->second;
  (void)Advance(pod.key, kept, core::PodEvent::kBooked);  // awaits its admission turn (ClaimAdmissionTurn)
  NoteNewHold(kept);
  return assignment;
}

Status ClusterState::ForgetAssumed(std::string_view pod_key) {
  MutexLock lock(mu_);
  auto it = pods_.find(pod_key);
  if (it == pods_.end()) return NotFound("pod " + std::string(pod_key) + " holds no share");
  if (!it->second.assumed)
    return FailedPrecondition("pod " + std::string(pod_key) + " is already confirmed by the pod watch");
  Release(std::string(pod_key), core::PodEvent::kForgotten);
  return Status();
}

int ClusterState::ExpireAssumed(Clock::time_point now) {
  MutexLock lock(mu_);
  std::vector<std::string> expired;  // oldest first; stops at the first one still young
  for (auto it = assumed_.begin(); it != assumed_.end() && now - it->first >= options_.assume_ttl; ++it)
    expired.push_back(it->second);
  for (const auto& key : expired) {
    log_->warn("pod {}: bound {} s ago but never seen with its assignment; releasing its share on {}", key,
               options_.assume_ttl.count(), pods_.at(key).assignment.node);
    Release(key, core::PodEvent::kForgotten);
    ++expired_total_;
  }
  std::vector<std::string> host_expired;  // pods without GPUs scored but never seen bound
  for (auto it = host_assumed_.begin(); it != host_assumed_.end() && now - it->first >= options_.host_assume_ttl;
       ++it)
    host_expired.push_back(it->second);
  for (const auto& key : host_expired) {
    log_->debug("pod {} (no GPU): scored {} s ago but never seen bound; releasing its booking on {}", key,
                options_.host_assume_ttl.count(), host_pods_.at(key).node);
    ForgetHostPod(key, "");
    ++host_expired_total_;
  }
  return static_cast<int>(expired.size());
}

Result<BindAsk> ClusterState::PendingRequest(std::string_view pod_key, std::string_view uid) const {
  MutexLock lock(mu_);
  auto it = pending_.find(std::string(pod_key));
  if (it == pending_.end() || (!uid.empty() && !it->second.uid.empty() && it->second.uid != uid))
    return NotFound("pod " + std::string(pod_key) + " is not a pending GPU pod seen by the pod watch");
  if (!it->second.error.ok()) return it->second.error;
  return BindAsk{it->second.request, it->second.slots};
}

bool ClusterState::IsPending(std::string_view pod_key, std::string_view uid, std::string* nominated_node) const {
  MutexLock lock(mu_);
  auto it = pending_.find(std::string(pod_key));
  if (it == pending_.end() || (!uid.empty() && !it->second.uid.empty() && it->second.uid != uid)) return false;
  if (nominated_node != nullptr) *nominated_node = it->second.nominated_node;
  return true;
}

// ---- internals (mu_ held) ----

bool ClusterState::Advance(const std::string& key, PodRecord& rec, core::PodEvent event) {
  const core::PodStage before = rec.stage;
  Result<core::PodStage> next = core::Next(before, event);
  if (!next.ok()) {
    log_->error("pod {}: {} (ignored)", key, next.status().message());
    return false;
  }
  const core::PodStage after = *next;
  if (after == before) return true;
  const std::string& node = rec.assignment.node;
  if (core::HoldsBindsBack(before)) {
    if (auto a = awaiting_.find(node); a != awaiting_.end()) {
      a->second.erase(key);
      if (a->second.empty()) awaiting_.erase(a);
    }
    admitted_.NotifyAll();
  }
  if (core::Parked(before) && !core::Parked(after)) {
    if (auto p = parked_.find(node); p != parked_.end()) {
      p->second.erase(key);
      if (p->second.empty()) parked_.erase(p);
    }
  }
  if (core::HoldsBindsBack(after)) {
    rec.awaiting_since = Clock::now();
    awaiting_[node].insert(key);
  }
  if (core::Parked(after)) parked_[node].insert(key);
  rec.stage = after;
  log_->debug("pod {}: {} -> {} ({})", key, core::StageName(before), core::StageName(after), core::EventName(event));
  return true;
}

bool ClusterState::NodeHasAgent(const std::string& node) const {
  auto n = nodes_.find(node);
  return n != nodes_.end() && n->second.has_agent;
}

void ClusterState::SettleAdmission(const std::string& key, PodRecord& rec) {
  const bool waits = rec.stage == core::PodStage::kAwaitingAdmission || rec.stage == core::PodStage::kAdmissionAbandoned;
  if (waits && (rec.admitted || !NodeHasAgent(rec.assignment.node))) {
    (void)Advance(key, rec, core::PodEvent::kAdmitted);
  } else if (rec.stage == core::PodStage::kHeld && !rec.admitted && NodeHasAgent(rec.assignment.node)) {
    (void)Advance(key, rec, core::PodEvent::kAgentAwaits);
  }
}

void ClusterState::Hold(const std::string& key, PodRecord record) {
  auto [it, inserted] = pods_.insert_or_assign(key, std::move(record));
  TryPlace(key, it->second);
}

void ClusterState::NoteNewHold(PodRecord& rec) {
  if (rec.counted) return;
  rec.counted = true;
  PushNewHold(rec.request);
}

void ClusterState::PushNewHold(const core::PodRequest& request) {
  new_holds_.push_back(request);
  if (new_holds_.size() > kNewHoldsKept) {
    new_holds_.pop_front();
    ++new_holds_first_;
  }
}

// Books `rec` in the ledger, or parks it (waiting for its node / conflict).
void ClusterState::TryPlace(const std::string& key, PodRecord& rec) {
  const std::string& node = rec.assignment.node;
  const core::PodStage before = rec.stage;
  if (ledger_.FindNode(node) == nullptr) {
    auto n = nodes_.find(node);
    rec.problem = n == nodes_.end() ? "waiting for node " + node + " (not seen yet)"
                                    : "waiting for node " + node + " to be a GPU node (" +
                                          n->second.not_gpu_reason + ")";
    (void)Advance(key, rec, core::PodEvent::kNodeMissing);
    log_->info("pod {}: {}", key, rec.problem);
    return;
  }
  Status st = ledger_.Assume(rec.request, rec.assignment);
  if (st.ok()) {
    if (!rec.assumed) (void)ledger_.Confirm(key);
    load_.Placed(key, rec.workload, rec.request, rec.assignment, NowSeconds());
    rec.problem.clear();
    (void)Advance(key, rec, core::PodEvent::kPlaced);
    SettleAdmission(key, rec);
    NoteNewHold(rec);
    if (before == core::PodStage::kConflict) log_->info("pod {}: conflict resolved, now holds its share on {}", key, node);
    log_->debug("pod {} holds its share on {}", key, node);
    return;
  }
  if (before != core::PodStage::kConflict || rec.problem != st.message()) {
    if (before != core::PodStage::kConflict) ++conflicts_total_;
    log_->error("pod {}: its assignment does not fit node {}: {} (kept as a conflict; "
                "was it placed by another scheduler?)", key, node, st.message());
  }
  rec.problem = st.message();
  (void)Advance(key, rec, core::PodEvent::kDoesNotFit);
}

void ClusterState::Release(const std::string& key, core::PodEvent event) {
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  const std::string node = it->second.assignment.node;
  const bool freed = core::HoldsShare(it->second.stage);
  if (freed) {
    if (Status st = ledger_.Forget(key); !st.ok()) log_->error("pod {}: {}", key, st.message());
    freed_.fetch_add(1, std::memory_order_relaxed);
  }
  if (it->second.assumed) assumed_.erase({it->second.assumed_at, key});
  (void)Advance(key, it->second, event);
  pods_.erase(it);
  load_.Released(key);
  if (freed) ApplyParked(node);
}

// Takes every pod off `node` in the ledger and parks it there.
void ClusterState::Evict(const std::string& node, const std::string& why) {
  for (const std::string& key : ledger_.PodsOn(node)) {
    if (IsClaimLedgerKey(key)) {  // a claim: held again when the node is back (RetryClaims)
      auto claim = claims_.find(std::string_view(key).substr(kClaimLedgerPrefix.size()));
      if (claim != claims_.end()) {
        UnbookClaim(claim->first, claim->second, /*retry=*/false);
        claim->second.problem = why;
        claims_waiting_.insert(claim->first);
      } else {
        (void)ledger_.Forget(key);
      }
      continue;
    }
    if (IsHostLedgerKey(key)) {  // a pod without GPUs: booked again when the node is back (RetryHostPods)
      auto host = host_pods_.find(std::string_view(key).substr(kHostLedgerPrefix.size()));
      if (host != host_pods_.end()) UnbookHost(host->first, host->second);
      else (void)ledger_.Forget(key);
      continue;
    }
    (void)ledger_.Forget(key);
    load_.Released(key);
    PodRecord& rec = pods_.at(key);
    rec.problem = why;
    (void)Advance(key, rec, core::PodEvent::kNodeMissing);
  }
  // Pods without GPUs that did not fit: judged again when the node is back.
  if (auto w = host_waiting_.find(node); w != host_waiting_.end())
    for (const std::string& key : w->second) host_pods_.at(key).problem.clear();
}

void ClusterState::SetWaitingReason(const std::string& node, const std::string& why) {
  auto p = parked_.find(node);
  if (p == parked_.end()) return;
  for (const std::string& key : p->second) {
    PodRecord& rec = pods_.at(key);
    if (rec.stage == core::PodStage::kWaitingForNode) rec.problem = why;
  }
}

void ClusterState::NoteUsage(const std::string& key, const PodRecord& rec, const std::string& usage_text,
                             const Result<core::PodUsage>& usage) {
  if (!core::HoldsShare(rec.stage) || usage_text.empty()) return;
  Result<bool> changed = load_.Measured(key, rec.workload, usage_text, usage, NowSeconds());
  if (!changed.ok()) {
    ++usage_rejected_total_;
    log_->warn("pod {}: {} ignored for load prediction: {}", key, core::kUsageAnnotation, changed.status().message());
    return;
  }
  if (!*changed) return;
  log_->debug("pod {} on {}: measured usage re-predicts workload {}", key, rec.assignment.node, rec.workload);
  if (Status st = ledger_.Touch(rec.assignment.node); !st.ok()) log_->error("pod {}: {}", key, st.message());
}

void ClusterState::GiveUpStaleAwaiting(const std::string& node, Clock::time_point now) {
  auto a = awaiting_.find(node);
  if (a == awaiting_.end()) return;
  const auto limit = options_.admission_wait * kAdmissionGiveUpFactor;
  const std::set<std::string, std::less<>> keys = a->second;
  for (const std::string& key : keys) {
    PodRecord& rec = pods_.at(key);
    if (now - rec.awaiting_since < limit) continue;
    log_->warn("pod {} was bound to node {} {} s ago and its node agent has not admitted it; binds to {} no "
               "longer wait for it (is the node's kubelet running?)",
               key, node, std::chrono::duration_cast<std::chrono::seconds>(now - rec.awaiting_since).count(), node);
    (void)Advance(key, rec, core::PodEvent::kGaveUp);
  }
}

// Retries the pods parked on `node`: pods seen by the watch first, then own
// assumptions, each group in key order (the order a fresh list delivers).
void ClusterState::ApplyParked(const std::string& node) {
  if (ledger_.FindNode(node) == nullptr) return;
  // Claims and pods without GPUs first: kube-scheduler has placed them already.
  RetryClaims(node);
  RetryHostPods(node);
  auto p = parked_.find(node);
  if (p == parked_.end()) return;
  const std::set<std::string> keys = p->second;
  for (bool assumed : {false, true}) {
    for (const std::string& key : keys) {
      PodRecord& rec = pods_.at(key);
      if (rec.assumed != assumed) continue;
      if (rec.request.key.empty()) continue;  // unusable annotation: nothing to place
      TryPlace(key, rec);
    }
  }
}

StateSummary ClusterState::SummaryLocked() const {
  StateSummary s;
  s.nodes = static_cast<int>(nodes_.size());
  s.gpu_nodes = static_cast<int>(ledger_.nodes().size());
  s.gpus = ledger_.TotalGpus();
  for (const auto& [key, rec] : pods_) {
    s.pods_held += core::HoldsShare(rec.stage);
    s.pods_assumed += rec.assumed;
    s.pods_held_assumed += core::HoldsShare(rec.stage) && rec.assumed;
    s.pods_waiting += rec.stage == core::PodStage::kWaitingForNode;
    s.pods_conflict += rec.stage == core::PodStage::kConflict;
  }
  s.pods_pending = static_cast<int>(pending_.size());
  s.claims_waiting = static_cast<int>(claims_waiting_.size());
  for (const auto& [key, rec] : claims_) s.claims_held += !rec.node.empty();
  for (const auto& [key, rec] : host_pods_) {
    s.host_pods += rec.booked;
    s.host_pods_unfit += !rec.problem.empty();
    s.host_pods_assumed += rec.assumed;
  }
  s.conflicts_total = conflicts_total_;
  s.expired_total = expired_total_;
  s.host_expired_total = host_expired_total_;
  s.workloads_learned = static_cast<int64_t>(load_.history().size());
  s.usage_samples_total = load_.samples();
  s.usage_rejected_total = usage_rejected_total_;
  return s;
}

StateSummary ClusterState::Summary() const {
  MutexLock lock(mu_);
  return SummaryLocked();
}

StateSummary ClusterState::Snapshot() const {
  MutexLock lock(mu_);
  StateSummary s = SummaryLocked();
  for (const auto& n : ledger_.nodes()) {
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      const auto& g = n.info.gpus[i];
      s.gpu_use.push_back({n.info.name, g.index, g.model, g.healthy, g.memory_mib, n.gpus[i].mem_used_mib,
                           n.gpus[i].core_used_milli, n.gpus[i].sharers,
                           load_.book().GpuBusy(n.info.name, static_cast<int>(i))});
    }
  }
  return s;
}

std::vector<std::string> ClusterState::Problems() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, rec] : pods_)
    if (!core::HoldsShare(rec.stage)) out.push_back(key + ": " + rec.problem);
  for (const std::string& key : claims_waiting_) out.push_back("claim " + key + ": " + claims_.at(key).problem);
  for (const auto& [key, rec] : host_pods_)
    if (!rec.problem.empty()) out.push_back(key + " (no GPU): its CPU and memory do not fit node " + rec.node + ": " +
                                            rec.problem);
  std::sort(out.begin(), out.end());
  return out;
}

int ClusterState::conflict_count() const {
  MutexLock lock(mu_);
  int n = 0;
  for (const auto& [key, rec] : pods_) n += rec.stage == core::PodStage::kConflict;
  return n;
}

}  // namespace tessera::scheduler
