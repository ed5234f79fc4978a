#include "node/node_pods.h"

#include "kube/paths.h"

namespace tessera::node {
namespace {

std::string ResourceVersionOf(const nlohmann::json& obj) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return "";
  auto rv = meta->find("resourceVersion");
  return rv != meta->end() && rv->is_string() ? rv->get<std::string>() : "";
}

// A resourceVersion Read can wait for (a decimal etcd revision).
bool Comparable(const std::string& rv) { return !rv.empty() && kube::ResourceVersionAtLeast(rv, rv); }

kube::InformerOptions OnNode(const std::string& node) {
  kube::InformerOptions options;
  options.field_selector = "spec.nodeName=" + node;
  return options;
}

}  // namespace

Result<PodViews> ListNodePods(kube::Api& api, const std::string& node, const core::ResourceNames& names) {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json pods, api.List(kube::PodsPath(""), "", "spec.nodeName=" + node));
  auto items = pods.find("items");
  if (items == pods.end() || !items->is_array()) return Internal("the pod list has no items");
  PodViews out;
  out.reserve(items->size());
  for (const nlohmann::json& pod : *items) {
    if (Result<core::PodView> view = core::DecodePod(pod, names); view.ok()) {
      out.push_back(std::make_shared<const core::PodView>(std::move(view).value()));
    }
  }
  return out;
}

NodePods::NodePods(kube::Api& api, std::string node, std::shared_ptr<spdlog::logger> log, NodePodsOptions options)
    : api_(api),
      node_(std::move(node)),
      log_(std::move(log)),
      options_(options),
      informer_(api, kube::PodsPath(""), OnNode(node_)) {}

Status NodePods::Start() { return informer_.Start(); }

std::shared_ptr<const core::PodView> NodePods::Decode(const nlohmann::json& pod) const {
  Result<core::PodView> view = core::DecodePod(pod, options_.resources);
  if (!view.ok()) {
    log_->warn("a pod of node {} is left out: {}", node_, view.status().message());
    return nullptr;
  }
  return std::make_shared<const core::PodView>(std::move(view).value());
}

Result<NodePods::Snapshot> NodePods::List() {
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json pods, api_.List(kube::PodsPath(""), "", "spec.nodeName=" + node_));
  Snapshot snap;
  snap.listed = true;
  if (auto it = pods.find("items"); it != pods.end() && it->is_array()) {
    snap.pods.reserve(it->size());
    for (const nlohmann::json& pod : *it) {
      if (auto view = Decode(pod)) snap.pods.push_back(std::move(view));
    }
    snap.pending = PendingPodsFromList(snap.pods, node_);
  }
  return snap;
}

Result<NodePods::Snapshot> NodePods::Read(bool fresh) {
  if (fresh || !informer_.HasSynced()) return List();
  std::string want;
  {
    MutexLock lock(mu_);
    want = last_write_;
  }
  if (want.empty()) return FromCache();  // no write of ours yet
  if (!Comparable(want)) {
    log_->debug("our last write to a pod of node {} has no comparable resourceVersion; listing", node_);
    return List();
  }
  if (!informer_.WaitForResourceVersion(want, options_.write_wait)) {
    log_->warn("the pod cache of node {} has not caught up with our write at resourceVersion {} within {} ms "
               "(it is at {}); listing instead", node_, want, options_.write_wait.count(),
               informer_.ResourceVersion());
    return List();
  }
  return FromCache();
}

void NodePods::Refresh(const std::function<void(const Parsed&)>& each) const {
  std::map<std::string, Parsed> seen;
  informer_.ForEach([&](const std::string& key, const nlohmann::json& obj) {
    mu_.AssertHeld();  // ForEach calls this before it returns
    const std::string rv = ResourceVersionOf(obj);
    auto it = parsed_.find(key);
    Parsed p;
    if (it != parsed_.end() && !rv.empty() && it->second.rv == rv) {
      p = std::move(it->second);
    } else {
      p.rv = rv;
      p.view = Decode(obj);
      if (p.view) p.pod = PendingPodFrom(*p.view, node_);
    }
    each(p);
    seen.emplace(key, std::move(p));
  });
  parsed_ = std::move(seen);  // pods gone from the cache are forgotten
}

NodePods::Snapshot NodePods::FromCache() {
  Snapshot snap;
  MutexLock lock(mu_);
  Refresh([&](const Parsed& p) {
    if (p.pod) snap.pending.push_back(*p.pod);
    if (p.view) snap.pods.push_back(p.view);
  });
  SortOldestFirst(snap.pending);
  return snap;
}

std::optional<PodViews> NodePods::Cached() const {
  if (!informer_.HasSynced()) return std::nullopt;
  PodViews pods;
  MutexLock lock(mu_);
  Refresh([&](const Parsed& p) {
    if (p.view) pods.push_back(p.view);
  });
  return pods;
}

void NodePods::NoteWrite(const nlohmann::json& written) {
  const std::string resource_version = ResourceVersionOf(written);
  MutexLock lock(mu_);
  if (!Comparable(resource_version)) {
    // Nothing to wait for: LIST until a later, comparable write (which orders after this one) replaces it.
    last_write_ = "unknown";
  } else if (!Comparable(last_write_) || !kube::ResourceVersionAtLeast(last_write_, resource_version)) {
    last_write_ = resource_version;
  }
}

}  // namespace tessera::node
