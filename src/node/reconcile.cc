#include "node/reconcile.h"

#include <algorithm>
#include <map>

#include "core/codec.h"
#include "node/identify.h"
#include "node/slots.h"

namespace tessera::node {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "2 slot(s) [GPU-a-0, GPU-b-3]" against "wants 2 slot(s) on [GPU-a, GPU-c]".
std::string Compare(const KubeletRecord& r, const std::vector<std::string>& assigned) {
  return "the kubelet gave it " + std::to_string(r.device_ids.size()) + " slot(s) [" + Join(r.device_ids) +
         "], its assignment wants " + std::to_string(assigned.size()) + " slot(s) on [" + JoinUuids(assigned) + "]";
}

}  // namespace

std::string_view MismatchKindName(MismatchKind kind) {
  switch (kind) {
    case MismatchKind::kNoAssignment: return "no-assignment";
    case MismatchKind::kUnreadableAssignment: return "unreadable-assignment";
    case MismatchKind::kContainerNotAssigned: return "container-not-assigned";
    case MismatchKind::kWrongSlotCount: return "wrong-slot-count";
    case MismatchKind::kWrongGpus: return "wrong-gpus";
  }
  return "unknown";
}

PodAssignment PodAssignmentOf(const core::PodView& pod) {
  PodAssignment p;
  p.ns = pod.ns;
  p.name = pod.name;
  p.uid = pod.uid;
  p.annotated = pod.assignment.has_value();
  if (p.annotated) {
    Result<core::Assignment> decoded = core::DecodeAssignment(*pod.assignment);
    if (decoded.ok()) {
      p.assignment = std::move(decoded).value();
    } else {
      p.error = decoded.status().message();
    }
  }
  return p;
}

std::vector<PodAssignment> PodAssignmentsFromList(const PodViews& pods) {
  std::vector<PodAssignment> out;
  out.reserve(pods.size());
  for (const auto& pod : pods) out.push_back(PodAssignmentOf(*pod));
  return out;
}

std::vector<Mismatch> FindMismatches(const std::vector<KubeletRecord>& records,
                                     const std::vector<PodAssignment>& pods, const std::string& node) {
  std::map<std::pair<std::string, std::string>, const PodAssignment*> by_name;
  for (const auto& p : pods) by_name[{p.ns, p.name}] = &p;
  std::vector<Mismatch> out;
  for (const KubeletRecord& r : records) {
    if (r.device_ids.empty()) continue;
    auto it = by_name.find({r.ns, r.pod});
    if (it == by_name.end()) continue;  // gone from the API server; the kubelet will drop it too
    const PodAssignment& pod = *it->second;
    Mismatch m{r.ns, r.pod, pod.uid, r.container, MismatchKind::kWrongGpus, ""};
    const std::string who = "pod " + r.ns + "/" + r.pod + " container " + r.container;
    const std::string got = std::to_string(r.device_ids.size()) + " slot(s) [" + Join(r.device_ids) + "]";
    if (!pod.annotated) {
      m.kind = MismatchKind::kNoAssignment;
      m.message = who + ": the kubelet gave it " + got + " but the pod has no " +
                  std::string(core::kAssignmentAnnotation) + " annotation";
      out.push_back(std::move(m));
      continue;
    }
    if (!pod.assignment || pod.assignment->node != node) {
      m.kind = MismatchKind::kUnreadableAssignment;
      m.message = who + ": the kubelet gave it " + got + " but its assignment " +
                  (pod.assignment ? "names node " + pod.assignment->node + ", not " + node
                                  : "is unreadable: " + pod.error);
      out.push_back(std::move(m));
      continue;
    }
    const core::ContainerAssignment* assigned = nullptr;
    for (const auto& c : pod.assignment->containers) {
      if (c.name == r.container) assigned = &c;
    }
    if (assigned == nullptr || assigned->gpus.empty()) {
      m.kind = MismatchKind::kContainerNotAssigned;
      m.message = who + ": the kubelet gave it " + got + " but its assignment gives this container no GPU";
      out.push_back(std::move(m));
      continue;
    }
    std::vector<std::string> want;
    for (const auto& g : assigned->gpus) want.push_back(g.uuid);
    std::vector<std::string> have;
    bool parsed = true;
    for (const auto& id : r.device_ids) {
      auto uuid = SlotGpu(id);
      parsed = parsed && uuid.ok();
      have.push_back(uuid.ok() ? *uuid : id);
    }
    std::vector<std::string> want_sorted = want, have_sorted = have;
    std::sort(want_sorted.begin(), want_sorted.end());
    std::sort(have_sorted.begin(), have_sorted.end());
    if (have.size() != want.size()) {
      m.kind = MismatchKind::kWrongSlotCount;
    } else if (!parsed || have_sorted != want_sorted) {
      m.kind = MismatchKind::kWrongGpus;
    } else {
      continue;  // agrees
    }
    m.message = who + ": " + Compare(r, want);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Mismatch> MismatchTracker::New(const std::vector<Mismatch>& current) {
  std::set<std::string> now;
  std::vector<Mismatch> fresh;
  for (const auto& m : current) {
    const std::string key = m.Key();
    if (!now.insert(key).second) continue;
    if (!reported_.count(key)) fresh.push_back(m);
  }
  reported_ = std::move(now);
  return fresh;
}

}  // namespace tessera::node
