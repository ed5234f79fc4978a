// ClusterState's part for bound pods without GPUs (cluster_state.h, "Pods
// without GPUs"): their CPU and memory in the ledger, and their arrivals for
// the policy.
#include "scheduler/cluster_state.h"

#include <spdlog/spdlog.h>

namespace tessera::scheduler {

namespace {

// A pod without GPUs that has not ended, bound or not.
bool LiveHostPod(const core::PodView& pod) {
  return !pod.terminal() && !pod.wants_gpu && !pod.assignment.has_value();
}

bool UnboundHostPod(const core::PodView& pod) { return pod.node.empty() && LiveHostPod(pod); }

}  // namespace

void ClusterState::NoteHostPod(const core::PodView& pod) {
  const bool host = !pod.node.empty() && LiveHostPod(pod);
  auto it = host_pods_.find(pod.key);
  if (!host) {
    if (it == host_pods_.end()) return;
    // The watch may show the pod as it was before kube-scheduler bound it:
    // an assumption stays (ExpireAssumed ends it if the pod never binds).
    if (it->second.assumed && it->second.uid == pod.uid && UnboundHostPod(pod)) return;
    ForgetHostPod(pod.key, "");
    return;
  }
  const bool seen = it != host_pods_.end() && it->second.uid == pod.uid;  // an arrival already
  if (it != host_pods_.end()) {
    HostRecord& rec = it->second;
    if (seen && rec.node == pod.node && rec.request.cpu_milli == pod.host.cpu_milli &&
        rec.request.memory_mib == pod.host.memory_mib) {
      if (rec.assumed) {  // bound where prioritize booked it: confirmed
        host_assumed_.erase({rec.assumed_at, pod.key});
        rec.assumed = false;
      }
      return;  // status, labels, annotations: nothing the ledger holds
    }
    ForgetHostPod(pod.key, "");  // replaced, resized in place, or bound elsewhere than assumed: booked anew
  }
  HostRecord rec;
  rec.uid = pod.uid;
  rec.node = pod.node;
  rec.request.key = HostLedgerKey(pod.key);
  rec.request.cpu_milli = pod.host.cpu_milli;
  rec.request.memory_mib = pod.host.memory_mib;
  if (!seen) PushNewHold(rec.request);  // an arrival, wherever it runs, as the simulator counts it
  HostRecord& kept = host_pods_.emplace(pod.key, std::move(rec)).first->second;
  BookHost(pod.key, kept);
}

void ClusterState::ForgetHostPod(const std::string& key, std::string_view uid) {
  auto it = host_pods_.find(key);
  if (it == host_pods_.end() || (!uid.empty() && !it->second.uid.empty() && it->second.uid != uid)) return;
  HostRecord rec = std::move(it->second);
  host_pods_.erase(it);
  if (rec.assumed) host_assumed_.erase({rec.assumed_at, key});
  const bool freed = rec.booked;
  UnbookHost(key, rec);
  if (auto w = host_waiting_.find(rec.node); w != host_waiting_.end()) {
    w->second.erase(key);
    if (w->second.empty()) host_waiting_.erase(w);
  }
  if (freed) {
    freed_.fetch_add(1, std::memory_order_relaxed);
    ApplyParked(rec.node);
  }
}

void ClusterState::AssumeHostPod(const core::PodView& pod, const std::string& node, Clock::time_point now,
                                 bool counted) {
  if (!UnboundHostPod(pod) || node.empty()) return;
  MutexLock lock(mu_);
  auto it = host_pods_.find(pod.key);
  bool seen = counted;  // counted as an arrival already
  if (it != host_pods_.end()) {
    if (!it->second.assumed) return;  // the watch has shown it bound: that booking stands
    seen = seen || it->second.uid == pod.uid;
    ForgetHostPod(pod.key, "");
  }
  HostRecord rec;
  rec.uid = pod.uid;
  rec.node = node;
  rec.request.key = HostLedgerKey(pod.key);
  rec.request.cpu_milli = pod.host.cpu_milli;
  rec.request.memory_mib = pod.host.memory_mib;
  rec.assumed = true;
  rec.assumed_at = now;
  if (!seen) PushNewHold(rec.request);
  HostRecord& kept = host_pods_.emplace(pod.key, std::move(rec)).first->second;
  host_assumed_.insert({now, pod.key});
  BookHost(pod.key, kept);
}

bool ClusterState::DropHostAssumption(std::string_view key, std::string_view uid) {
  MutexLock lock(mu_);
  auto it = host_pods_.find(key);
  if (it == host_pods_.end() || !it->second.assumed || it->second.uid != uid) return false;
  ForgetHostPod(std::string(key), uid);
  return true;
}

void ClusterState::UnbookHost(const std::string& key, HostRecord& rec) {
  if (!rec.booked) return;
  rec.booked = false;
  if (Status st = ledger_.Forget(rec.request.key); !st.ok()) log_->error("pod {}: {}", key, st.message());
  host_waiting_[rec.node].insert(key);
}

void ClusterState::BookHost(const std::string& key, HostRecord& rec) {
  if (rec.booked) return;
  core::Assignment where;
  where.node = rec.node;
  Status st = ledger_.Assume(rec.request, where);
  if (st.ok()) {
    (void)ledger_.Confirm(rec.request.key);
    rec.booked = true;
    rec.problem.clear();
    if (auto w = host_waiting_.find(rec.node); w != host_waiting_.end()) {
      w->second.erase(key);
      if (w->second.empty()) host_waiting_.erase(w);
    }
    return;
  }
  host_waiting_[rec.node].insert(key);
  if (st.code() == StatusCode::kNotFound) {  // not a GPU node (yet): nothing to book, nothing wrong
    rec.problem.clear();
    return;
  }
  if (rec.problem != st.message())
    log_->warn("pod {} (no GPU) on node {}: its CPU and memory do not fit tessera-scheduler's book of the node "
               "({}); counted once the node frees room",
               key, rec.node, st.message());
  rec.problem = st.message();
}

void ClusterState::RetryHostPods(const std::string& node) {
  auto w = host_waiting_.find(node);
  if (w == host_waiting_.end()) return;
  const std::set<std::string, std::less<>> keys = w->second;
  for (const std::string& key : keys) BookHost(key, host_pods_.at(key));
}

std::vector<ClusterView::HostPod> ClusterView::HostPodsOn(std::string_view node) const {
  state_->mu_.AssertHeld();
  std::vector<HostPod> out;
  for (const std::string& ledger_key : state_->ledger_.PodsOn(node)) {
    if (!IsHostLedgerKey(ledger_key)) continue;
    const std::string_view key = std::string_view(ledger_key).substr(kHostLedgerPrefix.size());
    auto it = state_->host_pods_.find(key);
    if (it == state_->host_pods_.end()) continue;
    out.push_back({std::string(key), it->second.uid, it->second.request.cpu_milli, it->second.request.memory_mib});
  }
  return out;
}

}  // namespace tessera::scheduler
