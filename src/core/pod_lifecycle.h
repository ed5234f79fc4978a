// The scheduling life of one GPU pod as the extender sees it: one stage at a
// time, changed only by the events below, through one table (Next). Pure: it
// knows nothing of locks, clocks, JSON or the ledger. Whether a share the
// pod holds is still *assumed* (bound by this extender, not yet shown by the
// pod watch) or *confirmed* is the Ledger's to say (core/ledger.h), not a
// stage: a pod may be assumed in any stage that holds a share.
//
//   (none) --SeenPending--> Pending --Booked--> Assumed --TurnGranted--> AwaitingAdmission
//   AwaitingAdmission --Admitted--> Held      (agent allocated it, it runs, or no agent)
//   AwaitingAdmission --GaveUp--> AdmissionAbandoned --Admitted--> Held
//   any stage holding a share --NodeMissing--> WaitingForNode --Placed--> AwaitingAdmission
//   any stage holding a share --DoesNotFit--> Conflict --Placed--> AwaitingAdmission
//   any stage --Gone--> Released;  Assumed (or any unconfirmed) --Forgotten--> Released
//
// A pod found already bound (a restart, another scheduler) enters with
// Placed, NodeMissing or DoesNotFit. An event a stage does not take is an
// error that names both: the caller logs it and keeps the stage.
//
//   Result<PodStage> next = Next(rec.stage, PodEvent::kAdmitted);
//   if (next.ok()) rec.stage = *next; else log(next.status().message());
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace tessera::core {

enum class PodStage : uint8_t {
  kNone,                // not known yet
  kPending,             // unbound, asks for GPUs: its request is kept for Bind
  kAssumed,             // Bind booked its share; the Binding waits for its node's admission turn
  kAwaitingAdmission,   // bound with its share booked; its node's agent has not allocated it yet
  kAdmissionAbandoned,  // awaited admission too long: keeps its share, holds no bind back
  kHeld,                // bound, booked and admitted (or on a node without an agent)
  kWaitingForNode,      // its assignment names a node not known, or not a GPU node: no share booked
  kConflict,            // its assignment does not fit its node, or cannot be read: no share booked
  kReleased,            // finished, deleted, replaced or forgotten: holds nothing
};

enum class PodEvent : uint8_t {
  kSeenPending,   // the pod watch shows it unbound, asking for GPUs
  kBooked,        // Bind picked its GPUs and booked them (assumed)
  kTurnGranted,   // its node admitted the pod before it: the Binding goes out
  kPlaced,        // its assignment is booked on its node (seen bound, or retried and now fits)
  kAdmitted,      // its node's agent allocated every GPU container, it runs, or the node has no agent
  kAgentAwaits,   // its node gained an agent that has not allocated it
  kGaveUp,        // it awaited admission for kAdmissionGiveUpFactor waits (scheduler/cluster_state.h)
  kNodeMissing,   // its node is unknown, deleted, or not a GPU node
  kDoesNotFit,    // its assignment does not fit its node, or cannot be read
  kForgotten,     // this extender's bind failed, or its assumption expired
  kGone,          // terminal, deleted, replaced by a new uid, or unbound while holding
};

std::string_view StageName(PodStage stage);
std::string_view EventName(PodEvent event);

// The stage after `event` in `from`. FAILED_PRECONDITION naming both when
// `from` does not take `event`.
Result<PodStage> Next(PodStage from, PodEvent event);

// The ledger holds a share for the pod.
constexpr bool HoldsShare(PodStage s) {
  return s == PodStage::kAssumed || s == PodStage::kAwaitingAdmission || s == PodStage::kAdmissionAbandoned ||
         s == PodStage::kHeld;
}
// Parked on its node, retried when the node arrives or frees room.
constexpr bool Parked(PodStage s) { return s == PodStage::kWaitingForNode || s == PodStage::kConflict; }
// Holds binds to its node back (one pod awaiting admission per node).
constexpr bool HoldsBindsBack(PodStage s) { return s == PodStage::kAwaitingAdmission; }

}  // namespace tessera::core
