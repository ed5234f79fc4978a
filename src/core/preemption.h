// Preemption planning for GPU shares: which lower-priority pods must leave a
// node so that a pod that fits nowhere fits there, and which node costs the
// least. Pure (no I/O, no clock); the scheduler evicts what a plan names.
//
// Victims are pods of strictly lower priority (Kubernetes spec.priority) than
// the preemptor. Where the node's kubelet has fewer device-plugin slots
// allocatable than its inventory lists (PreemptionNode::slots), the plan must
// also free enough of them. A plan is ranked, lowest first, by
//   1. the highest priority among its victims (evict only the least important),
//   2. the number of victims,
//   3. the work lost: the sum of the victims' run times (evict the youngest),
//   4. the node name (so equal plans are chosen the same way every time).
// Per node the victim set is searched exactly while that is cheap (see
// PreemptionOptions::search_budget) and otherwise found the way kube-scheduler
// does: remove every candidate, then give back the most important ones that
// the preemptor can do without. Pods already terminating count as gone and are
// never victims; a pod's multi-GPU or multi-container request must fit whole.
// Thread-safety: pure functions.
//
//   std::vector<PreemptionPlan> plans = PlanPreemption(pod, 1000, nodes, PreemptionOptions{});
//   if (!plans.empty()) Evict(plans[0].victims);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ledger.h"
#include "core/model.h"

namespace tessera::core {

// A pod holding a share on a node, as the planner sees it.
struct PreemptionPod {
  std::string key;             // "namespace/name"
  std::string uid;
  int32_t priority = 0;        // spec.priority
  int64_t started_unix = 0;    // when it started (status.startTime, else its creation), seconds
  bool terminating = false;    // deletion already requested: it leaves by itself
  bool evictable = true;       // false: never a victim (its priority is not known yet, a PDB refused, ...)
  PodRequest request;          // what it holds
  Assignment assignment;
  int64_t slots = 0;           // device-plugin slots it holds of the resource the preemptor asks for
};

// The device-plugin slots of the preemptor's resource on a node whose kubelet
// has fewer allocatable than the node's inventory lists. Slots are counted
// per resource (tessera.io/gpu, nvidia.com/gpu); `taken` includes what the
// pods in PreemptionNode::pods hold (their `slots`) and what pods not listed
// there take (pods being bound, nominated pods), which no plan frees.
struct SlotRoom {
  int64_t allocatable = -1;  // -1: the kubelet has them all; no slot check
  int64_t taken = 0;
  int64_t asked = 0;         // what the preemptor needs
};

// One node that may host the preemptor.
struct PreemptionNode {
  NodeState node;                     // its capacity and current use (every pod below included)
  std::vector<PreemptionPod> pods;    // the pods holding shares there
  // Uids already chosen as victims by someone else (kube-scheduler's preempt
  // verb): removed first, and part of every plan for this node whatever their
  // priority.
  std::vector<std::string> forced_uids;
  SlotRoom slots;
};

struct PreemptionOptions {
  // The clock the run times are measured against (seconds since the epoch).
  int64_t now_unix = 0;
  // Plans needing more victims than this (besides forced ones) are dropped;
  // 0: no limit.
  int max_victims = 0;
  // Fit checks allowed for the exact search on one node before it falls back
  // to kube-scheduler's reprieve order. Default 20000 (a node of 8 GPUs with
  // 40 sharing pods is searched exactly up to 3 victims).
  int64_t search_budget = 20000;
};

struct PreemptionPlan {
  std::string node;
  std::vector<PreemptionPod> victims;  // forced ones first, then by priority, youngest first
  int32_t highest_victim_priority = 0; // INT32_MIN when there are no victims
  int64_t work_lost_seconds = 0;
  bool exact = true;                   // false: the reprieve fallback chose the victims
  Assignment assignment;               // where the preemptor goes once the victims are gone
};

// The cheapest plan on `node` for `pod` of priority `priority`, or nullopt
// when even removing every lower-priority pod (and the forced ones) leaves no
// room, or the plan would need more than options.max_victims victims. A plan
// with no victims means the pod fits once the terminating pods are gone.
std::optional<PreemptionPlan> PlanOnNode(const PodRequest& pod, int32_t priority, const PreemptionNode& node,
                                         const PreemptionOptions& options);

// PlanOnNode on every node, the feasible plans ranked best first.
std::vector<PreemptionPlan> PlanPreemption(const PodRequest& pod, int32_t priority,
                                           const std::vector<PreemptionNode>& nodes,
                                           const PreemptionOptions& options);

// True when plan `a` is better than plan `b` (the ranking above).
bool BetterPlan(const PreemptionPlan& a, const PreemptionPlan& b);

// Adds (sign +1) or removes (-1) what `pod` holds per `assignment` on
// `node`, as the ledger books it: CPU, memory, and per GPU its memory,
// compute and one sharer per container share.
void ApplyHold(NodeState& node, const PodRequest& pod, const Assignment& assignment, int sign);

}  // namespace tessera::core
