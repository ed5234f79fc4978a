#include "node/identify.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/codec.h"
#include "core/podspec.h"

namespace tessera::node {
namespace {

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The containers' names in the kubelet's order (the view's: init
// containers, then containers).
std::vector<std::string> SpecOrder(const core::PodView& pod) {
  std::vector<std::string> names;
  for (const auto& c : pod.containers) names.push_back(c.name);
  return names;
}

std::vector<std::string> Uuids(const PendingContainer& c) {
  std::vector<std::string> out;
  for (const auto& g : c.gpus) out.push_back(g.uuid);
  return out;
}

std::string Describe(const PendingPod& pod) {
  if (!pod.assignment_error.empty()) return pod.Key() + ": " + pod.assignment_error;
  const PendingContainer& c = pod.containers.front();
  return pod.Key() + " container " + c.name + " wants " + std::to_string(c.gpus.size()) + " slot(s) on [" +
         JoinUuids(Uuids(c)) + "]";
}

}  // namespace

std::vector<std::string> AllocatedContainers(const core::PodView& pod) { return Split(pod.allocated); }

std::string JoinUuids(const std::vector<std::string>& uuids) {
  std::string out;
  for (const auto& u : uuids) out += (out.empty() ? "" : ", ") + u;
  return out;
}

ComputeAnnotations ComputeAnnotationsOf(const core::PodView& pod) {
  ComputeAnnotations out;
  const std::string& priority = pod.priority_annotation;
  out.priority = priority == "high" ? core::Priority::kHigh
                 : priority == "low" ? core::Priority::kLow
                                     : core::Priority::kNormal;
  out.core_hard = pod.core_policy_annotation == "hard";
  if (const std::string& limit = pod.core_limit_annotation; !limit.empty() && !out.core_hard) {
    int percent = 0;
    const auto [end, ec] = std::from_chars(limit.data(), limit.data() + limit.size(), percent);
    if (ec == std::errc() && end == limit.data() + limit.size() && percent >= 1 && percent <= 100) {
      out.core_limit_milli = percent * 10;
    }
  }
  return out;
}

std::optional<PendingPod> PendingPodFrom(const core::PodView& pod, const std::string& node) {
  if (pod.node != node || !pod.assignment) return std::nullopt;
  if (pod.terminating || pod.terminal()) return std::nullopt;

  PendingPod p;
  p.ns = pod.ns;
  p.name = pod.name;
  p.uid = pod.uid;
  p.resource_version = pod.resource_version;
  p.created_at = pod.created_at;
  p.assigned_at = pod.assigned_at;
  if (pod.isolation_annotation == core::IsolationName(core::Isolation::kMps)) p.isolation = core::Isolation::kMps;
  if (pod.isolation_annotation == core::IsolationName(core::Isolation::kNone)) p.isolation = core::Isolation::kNone;
  p.allocated = AllocatedContainers(pod);
  const ComputeAnnotations compute = ComputeAnnotationsOf(pod);
  p.priority = compute.priority;
  p.core_hard = compute.core_hard;
  p.core_limit_milli = compute.core_limit_milli;
  const std::set<std::string> done(p.allocated.begin(), p.allocated.end());
  for (const core::PodView::Container& c : pod.containers) {
    if (!c.name.empty()) p.specs[c.name] = c;
  }

  Result<core::Assignment> assignment = core::DecodeAssignment(*pod.assignment);
  if (!assignment.ok()) {
    p.assignment_error = "assignment annotation unreadable: " + assignment.status().message();
  } else if (assignment->node != node) {
    p.assignment_error = "assignment names node " + assignment->node + ", not " + node;
  } else {
    std::map<std::string, const core::ContainerAssignment*> by_name;
    for (const auto& c : assignment->containers) by_name[c.name] = &c;
    std::vector<std::string> order = SpecOrder(pod);
    for (const auto& c : assignment->containers) {
      if (std::find(order.begin(), order.end(), c.name) == order.end()) order.push_back(c.name);
    }
    for (const auto& name : order) {
      auto it = by_name.find(name);
      if (it == by_name.end() || it->second->gpus.empty() || done.count(name)) continue;
      p.containers.push_back({name, it->second->gpus});
    }
    if (p.containers.empty()) return std::nullopt;  // fully allocated
  }
  return p;
}

void SortOldestFirst(std::vector<PendingPod>& pending) {
  std::sort(pending.begin(), pending.end(), [](const PendingPod& a, const PendingPod& b) {
    return std::tie(a.assigned_at, a.created_at, a.ns, a.name) < std::tie(b.assigned_at, b.created_at, b.ns, b.name);
  });
}

std::vector<PendingPod> PendingPodsFromList(const PodViews& pods, const std::string& node) {
  std::vector<PendingPod> pending;
  for (const auto& pod : pods) {
    if (auto p = PendingPodFrom(*pod, node)) pending.push_back(std::move(*p));
  }
  SortOldestFirst(pending);
  return pending;
}

bool AsksFor(const PendingPod& pod, const std::string& name, const std::string& resource) {
  const auto spec = pod.specs.find(name);
  return spec != pod.specs.end() && spec->second.Names(resource);
}

void KeepPendingFor(std::vector<PendingPod>& pending, const std::string& resource) {
  if (resource.empty()) return;
  std::erase_if(pending, [&resource](const PendingPod& pod) {
    if (!pod.assignment_error.empty()) {
      return std::none_of(pod.specs.begin(), pod.specs.end(),
                          [&](const auto& spec) { return AsksFor(pod, spec.first, resource); });
    }
    return pod.containers.empty() || !AsksFor(pod, pod.containers.front().name, resource);
  });
}

Result<Identified> IdentifyContainer(const std::vector<std::string>& slot_gpus, const std::vector<PendingPod>& pending,
                                     const std::optional<ContainerRef>& steered, std::vector<size_t>* named) {
  std::vector<std::string> want = slot_gpus;
  std::sort(want.begin(), want.end());
  const std::string asked =
      std::to_string(slot_gpus.size()) + " slot(s) on [" + JoinUuids(want) + "]";
  if (named) named->clear();
  if (pending.empty()) {
    return FailedPrecondition("Allocate of " + asked + ": no pod bound to this node waits for a GPU allocation");
  }
  std::vector<size_t> matches;
  std::string candidates;
  for (size_t i = 0; i < pending.size(); ++i) {
    candidates += (candidates.empty() ? "" : "; ") + Describe(pending[i]);
    if (!pending[i].assignment_error.empty()) continue;
    std::vector<std::string> have = Uuids(pending[i].containers.front());
    std::sort(have.begin(), have.end());
    if (have == want) matches.push_back(i);
  }
  if (matches.size() == 1) return Identified{matches.front(), 0};
  if (matches.empty()) {
    if (named) {
      named->clear();
      for (size_t i = 0; i < pending.size(); ++i) named->push_back(i);
    }
    return FailedPrecondition("Allocate of " + asked + ": no pending container wants these GPUs; candidates: " +
                              candidates);
  }
  if (steered) {
    for (size_t i : matches) {
      if (pending[i].Key() == steered->pod_key && pending[i].containers.front().name == steered->container) {
        return Identified{i, 0};
      }
    }
  }
  std::string tied;
  for (size_t i : matches) tied += (tied.empty() ? "" : "; ") + Describe(pending[i]);
  if (named) *named = matches;
  return FailedPrecondition("Allocate of " + asked + ": ambiguous, " + std::to_string(matches.size()) +
                            " pending containers want these GPUs and none was steered to these slots: " + tied);
}

std::optional<Identified> NextToSteer(const std::vector<PendingPod>& pending, size_t size,
                                      const std::vector<std::string>& available_gpus) {
  std::multiset<std::string> free(available_gpus.begin(), available_gpus.end());
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!pending[i].assignment_error.empty()) continue;
    const PendingContainer& c = pending[i].containers.front();
    if (c.gpus.size() != size) continue;
    bool fits = true;
    for (const auto& g : c.gpus) fits = fits && free.count(g.uuid) > 0;
    if (fits) return Identified{i, 0};
  }
  return std::nullopt;
}

}  // namespace tessera::node
