#include "core/pod_lifecycle.h"

#include <array>
#include <string>

namespace tessera::core {
namespace {

constexpr int kStages = static_cast<int>(PodStage::kReleased) + 1;
constexpr int kEvents = static_cast<int>(PodEvent::kGone) + 1;

using S = PodStage;
using E = PodEvent;

// kTable[from][event]: the next stage; kNone (never a destination) marks an
// event the stage does not take.
constexpr std::array<std::array<PodStage, kEvents>, kStages> MakeTable() {
  std::array<std::array<PodStage, kEvents>, kStages> t{};
  for (auto& row : t) row.fill(S::kNone);
  auto on = [&t](S from, E event, S to) { t[static_cast<int>(from)][static_cast<int>(event)] = to; };
  // Not bound yet: the watch shows it pending, Bind books it, or it is found
  // already bound (a restart, another scheduler).
  for (S from : {S::kNone, S::kPending}) {
    on(from, E::kSeenPending, S::kPending);
    on(from, E::kBooked, S::kAssumed);
    on(from, E::kPlaced, S::kAwaitingAdmission);
    on(from, E::kNodeMissing, S::kWaitingForNode);
    on(from, E::kDoesNotFit, S::kConflict);
    on(from, E::kGone, S::kReleased);
  }
  // Every stage after Bind: the watch may still show the pod unbound (it
  // lags the Binding), the share may lose its node or stop fitting, this
  // extender may forget its own bind, and the pod may go.
  for (S from : {S::kAssumed, S::kAwaitingAdmission, S::kAdmissionAbandoned, S::kHeld, S::kWaitingForNode,
                 S::kConflict}) {
    on(from, E::kSeenPending, from);
    on(from, E::kNodeMissing, S::kWaitingForNode);
    on(from, E::kDoesNotFit, S::kConflict);
    on(from, E::kForgotten, S::kReleased);
    on(from, E::kGone, S::kReleased);
  }
  // Booked, the Binding not sent: the watch confirming it changes no stage.
  on(S::kAssumed, E::kPlaced, S::kAssumed);
  on(S::kAssumed, E::kTurnGranted, S::kAwaitingAdmission);
  // Bound: admission.
  for (S from : {S::kAwaitingAdmission, S::kAdmissionAbandoned, S::kHeld}) {
    on(from, E::kPlaced, from);
    on(from, E::kAdmitted, S::kHeld);
  }
  on(S::kAwaitingAdmission, E::kAgentAwaits, S::kAwaitingAdmission);
  on(S::kAdmissionAbandoned, E::kAgentAwaits, S::kAdmissionAbandoned);
  on(S::kHeld, E::kAgentAwaits, S::kAwaitingAdmission);
  on(S::kAwaitingAdmission, E::kGaveUp, S::kAdmissionAbandoned);
  on(S::kAdmissionAbandoned, E::kGaveUp, S::kAdmissionAbandoned);
  // Parked: retried when its node arrives or frees room.
  on(S::kWaitingForNode, E::kPlaced, S::kAwaitingAdmission);
  on(S::kConflict, E::kPlaced, S::kAwaitingAdmission);
  // Released is the end: a pod of the same name starts again from kNone.
  on(S::kReleased, E::kGone, S::kReleased);
  return t;
}

constexpr auto kTable = MakeTable();

}  // namespace

std::string_view StageName(PodStage stage) {
  switch (stage) {
    case S::kNone: return "none";
    case S::kPending: return "pending";
    case S::kAssumed: return "assumed";
    case S::kAwaitingAdmission: return "awaiting admission";
    case S::kAdmissionAbandoned: return "admission abandoned";
    case S::kHeld: return "held";
    case S::kWaitingForNode: return "waiting for its node";
    case S::kConflict: return "conflict";
    case S::kReleased: return "released";
  }
  return "?";
}

std::string_view EventName(PodEvent event) {
  switch (event) {
    case E::kSeenPending: return "seen pending";
    case E::kBooked: return "booked";
    case E::kTurnGranted: return "admission turn granted";
    case E::kPlaced: return "placed";
    case E::kAdmitted: return "admitted";
    case E::kAgentAwaits: return "agent awaits";
    case E::kGaveUp: return "gave up awaiting admission";
    case E::kNodeMissing: return "node missing";
    case E::kDoesNotFit: return "does not fit";
    case E::kForgotten: return "forgotten";
    case E::kGone: return "gone";
  }
  return "?";
}

Result<PodStage> Next(PodStage from, PodEvent event) {
  const int f = static_cast<int>(from), e = static_cast<int>(event);
  if (f < 0 || f >= kStages || e < 0 || e >= kEvents)
    return InvalidArgument("pod stage " + std::to_string(f) + " or event " + std::to_string(e) + " out of range");
  const PodStage to = kTable[static_cast<size_t>(f)][static_cast<size_t>(e)];
  if (to == S::kNone)
    return FailedPrecondition("a pod in stage \"" + std::string(StageName(from)) + "\" does not take the event \"" +
                              std::string(EventName(event)) + "\"");
  return to;
}

}  // namespace tessera::core
