// Checks what the kubelet actually allocated (its pod-resources record)
// against what the scheduler assigned (each pod's tessera.io/assignment), so
// a container that got the wrong GPUs is caught after the fact. Pure logic,
// no I/O; the agent feeds it and reports. Thread-safety: the free functions
// are pure; a MismatchTracker is used from one thread.
//
//   auto mismatches = FindMismatches(records, PodAssignmentsFromList(*ListNodePods(api, "node-1")), "node-1");
//   for (const Mismatch& m : tracker.New(mismatches)) Report(m);
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/pod_view.h"
#include "node/pod_views.h"

namespace tessera::node {

// One container's devices of our resource, as the kubelet records them.
struct KubeletRecord {
  std::string ns, pod, container;
  std::vector<std::string> device_ids;  // "<uuid>-<k>"
  bool operator==(const KubeletRecord&) const = default;
};

// A pod as the API server holds it, with its assignment decoded.
struct PodAssignment {
  std::string ns, name, uid;
  bool annotated = false;                   // carries tessera.io/assignment
  std::optional<core::Assignment> assignment;  // set when annotated and readable
  std::string error;                        // annotated but unreadable: why
};

// `pod` with its assignment decoded, annotated or not.
PodAssignment PodAssignmentOf(const core::PodView& pod);
// PodAssignmentOf each of `pods`, in order.
std::vector<PodAssignment> PodAssignmentsFromList(const PodViews& pods);

enum class MismatchKind {
  kNoAssignment,          // the pod carries no tessera.io/assignment
  kUnreadableAssignment,  // the annotation cannot be read, or names another node
  kContainerNotAssigned,  // the assignment gives this container no GPU
  kWrongSlotCount,        // slots received != GPUs assigned (one slot per GPU)
  kWrongGpus,             // slots on GPUs other than the assigned ones
};

std::string_view MismatchKindName(MismatchKind kind);

// A container whose kubelet record disagrees with its assignment.
struct Mismatch {
  std::string ns, pod, uid, container;
  MismatchKind kind = MismatchKind::kWrongGpus;
  std::string message;  // what differs, for a person: both sides spelled out
  std::string Key() const { return uid + "/" + container; }
};

// The mismatches between `records` and `pods` on `node`, in record order.
// Records of pods the API server does not list (deleted meanwhile) and
// records with no device IDs are skipped.
std::vector<Mismatch> FindMismatches(const std::vector<KubeletRecord>& records,
                                     const std::vector<PodAssignment>& pods, const std::string& node);

// Remembers which mismatches were reported (by pod uid and container), so
// each is reported once while it lasts, and again only if it goes away and
// comes back.
class MismatchTracker {
 public:
  // Those of `current` not reported before; forgets the ones no longer present.
  std::vector<Mismatch> New(const std::vector<Mismatch>& current);

 private:
  std::set<std::string> reported_;
};

}  // namespace tessera::node
