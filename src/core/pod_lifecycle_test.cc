#include "core/pod_lifecycle.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace tessera::core {
namespace {

using S = PodStage;
using E = PodEvent;

struct Row {
  S from;
  E event;
  S to;
};

// Every transition there is. Any (stage, event) pair not listed is refused.
const std::vector<Row> kTransitions = {
    // Before Bind.
    {S::kNone, E::kSeenPending, S::kPending},
    {S::kNone, E::kBooked, S::kAssumed},
    {S::kNone, E::kPlaced, S::kAwaitingAdmission},
    {S::kNone, E::kNodeMissing, S::kWaitingForNode},
    {S::kNone, E::kDoesNotFit, S::kConflict},
    {S::kNone, E::kGone, S::kReleased},
    {S::kPending, E::kSeenPending, S::kPending},
    {S::kPending, E::kBooked, S::kAssumed},
    {S::kPending, E::kPlaced, S::kAwaitingAdmission},
    {S::kPending, E::kNodeMissing, S::kWaitingForNode},
    {S::kPending, E::kDoesNotFit, S::kConflict},
    {S::kPending, E::kGone, S::kReleased},
    // Booked, the Binding waiting for the node's admission turn.
    {S::kAssumed, E::kSeenPending, S::kAssumed},
    {S::kAssumed, E::kTurnGranted, S::kAwaitingAdmission},
    {S::kAssumed, E::kPlaced, S::kAssumed},
    {S::kAssumed, E::kNodeMissing, S::kWaitingForNode},
    {S::kAssumed, E::kDoesNotFit, S::kConflict},
    {S::kAssumed, E::kForgotten, S::kReleased},
    {S::kAssumed, E::kGone, S::kReleased},
    // Bound, its node's agent not done.
    {S::kAwaitingAdmission, E::kSeenPending, S::kAwaitingAdmission},
    {S::kAwaitingAdmission, E::kPlaced, S::kAwaitingAdmission},
    {S::kAwaitingAdmission, E::kAdmitted, S::kHeld},
    {S::kAwaitingAdmission, E::kAgentAwaits, S::kAwaitingAdmission},
    {S::kAwaitingAdmission, E::kGaveUp, S::kAdmissionAbandoned},
    {S::kAwaitingAdmission, E::kNodeMissing, S::kWaitingForNode},
    {S::kAwaitingAdmission, E::kDoesNotFit, S::kConflict},
    {S::kAwaitingAdmission, E::kForgotten, S::kReleased},
    {S::kAwaitingAdmission, E::kGone, S::kReleased},
    {S::kAdmissionAbandoned, E::kSeenPending, S::kAdmissionAbandoned},
    {S::kAdmissionAbandoned, E::kPlaced, S::kAdmissionAbandoned},
    {S::kAdmissionAbandoned, E::kAdmitted, S::kHeld},
    {S::kAdmissionAbandoned, E::kAgentAwaits, S::kAdmissionAbandoned},
    {S::kAdmissionAbandoned, E::kGaveUp, S::kAdmissionAbandoned},
    {S::kAdmissionAbandoned, E::kNodeMissing, S::kWaitingForNode},
    {S::kAdmissionAbandoned, E::kDoesNotFit, S::kConflict},
    {S::kAdmissionAbandoned, E::kForgotten, S::kReleased},
    {S::kAdmissionAbandoned, E::kGone, S::kReleased},
    // Admitted.
    {S::kHeld, E::kSeenPending, S::kHeld},
    {S::kHeld, E::kPlaced, S::kHeld},
    {S::kHeld, E::kAdmitted, S::kHeld},
    {S::kHeld, E::kAgentAwaits, S::kAwaitingAdmission},
    {S::kHeld, E::kNodeMissing, S::kWaitingForNode},
    {S::kHeld, E::kDoesNotFit, S::kConflict},
    {S::kHeld, E::kForgotten, S::kReleased},
    {S::kHeld, E::kGone, S::kReleased},
    // Parked.
    {S::kWaitingForNode, E::kSeenPending, S::kWaitingForNode},
    {S::kWaitingForNode, E::kPlaced, S::kAwaitingAdmission},
    {S::kWaitingForNode, E::kNodeMissing, S::kWaitingForNode},
    {S::kWaitingForNode, E::kDoesNotFit, S::kConflict},
    {S::kWaitingForNode, E::kForgotten, S::kReleased},
    {S::kWaitingForNode, E::kGone, S::kReleased},
    {S::kConflict, E::kSeenPending, S::kConflict},
    {S::kConflict, E::kPlaced, S::kAwaitingAdmission},
    {S::kConflict, E::kNodeMissing, S::kWaitingForNode},
    {S::kConflict, E::kDoesNotFit, S::kConflict},
    {S::kConflict, E::kForgotten, S::kReleased},
    {S::kConflict, E::kGone, S::kReleased},
    // The end.
    {S::kReleased, E::kGone, S::kReleased},
};

const std::vector<S> kAllStages = {S::kNone,
                                   S::kPending,
                                   S::kAssumed,
                                   S::kAwaitingAdmission,
                                   S::kAdmissionAbandoned,
                                   S::kHeld,
                                   S::kWaitingForNode,
                                   S::kConflict,
                                   S::kReleased};
const std::vector<E> kAllEvents = {E::kSeenPending, E::kBooked,      E::kTurnGranted, E::kPlaced,
                                   E::kAdmitted,    E::kAgentAwaits, E::kGaveUp,      E::kNodeMissing,
                                   E::kDoesNotFit,  E::kForgotten,   E::kGone};

TEST(PodLifecycleTest, EveryListedTransitionHappens) {
  for (const Row& row : kTransitions) {
    Result<S> next = Next(row.from, row.event);
    ASSERT_TRUE(next.ok()) << StageName(row.from) << " + " << EventName(row.event) << ": " << next.status().message();
    EXPECT_EQ(*next, row.to) << StageName(row.from) << " + " << EventName(row.event) << " -> " << StageName(*next)
                             << ", want " << StageName(row.to);
  }
}

TEST(PodLifecycleTest, EveryOtherPairIsRefusedNamingStageAndEvent) {
  std::set<std::pair<S, E>> listed;
  for (const Row& row : kTransitions) EXPECT_TRUE(listed.insert({row.from, row.event}).second) << "listed twice";
  int refused = 0;
  for (S from : kAllStages) {
    for (E event : kAllEvents) {
      if (listed.count({from, event}) != 0) continue;
      Result<S> next = Next(from, event);
      ASSERT_FALSE(next.ok()) << StageName(from) << " + " << EventName(event) << " -> " << StageName(*next);
      EXPECT_EQ(next.status().code(), StatusCode::kFailedPrecondition);
      EXPECT_NE(next.status().message().find(StageName(from)), std::string::npos) << next.status().message();
      EXPECT_NE(next.status().message().find(EventName(event)), std::string::npos) << next.status().message();
      ++refused;
    }
  }
  EXPECT_EQ(refused + static_cast<int>(kTransitions.size()),
            static_cast<int>(kAllStages.size() * kAllEvents.size()));
}

TEST(PodLifecycleTest, OutOfRangeValuesAreInvalidArguments) {
  EXPECT_EQ(Next(static_cast<S>(200), E::kGone).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Next(S::kHeld, static_cast<E>(200)).status().code(), StatusCode::kInvalidArgument);
}

// Whole lives, as event sequences, with the stage after each.
struct Life {
  const char* name;
  std::vector<std::pair<E, S>> steps;
};

const std::vector<Life> kLives = {
    {"bound here on a node with an agent",
     {{E::kSeenPending, S::kPending},
      {E::kBooked, S::kAssumed},
      {E::kTurnGranted, S::kAwaitingAdmission},
      {E::kPlaced, S::kAwaitingAdmission},  // the watch shows it bound
      {E::kAdmitted, S::kHeld},
      {E::kGone, S::kReleased}}},
    {"bound here on a node without an agent (admitted at once)",
     {{E::kBooked, S::kAssumed}, {E::kTurnGranted, S::kAwaitingAdmission}, {E::kAdmitted, S::kHeld}}},
    {"the watch shows the bound pod before the Binding's turn is taken",
     {{E::kBooked, S::kAssumed}, {E::kPlaced, S::kAssumed}, {E::kTurnGranted, S::kAwaitingAdmission}}},
    {"the Binding fails",
     {{E::kSeenPending, S::kPending}, {E::kBooked, S::kAssumed}, {E::kForgotten, S::kReleased}}},
    {"found bound after a restart, its node known later",
     {{E::kNodeMissing, S::kWaitingForNode}, {E::kPlaced, S::kAwaitingAdmission}, {E::kAdmitted, S::kHeld}}},
    {"placed by another scheduler into room that is not there, then room freed",
     {{E::kDoesNotFit, S::kConflict}, {E::kDoesNotFit, S::kConflict}, {E::kPlaced, S::kAwaitingAdmission}}},
    {"its kubelet never admits it",
     {{E::kPlaced, S::kAwaitingAdmission},
      {E::kGaveUp, S::kAdmissionAbandoned},
      {E::kAdmitted, S::kHeld},
      {E::kGone, S::kReleased}}},
    {"its node shrinks under it, and is deleted",
     {{E::kPlaced, S::kAwaitingAdmission},
      {E::kAdmitted, S::kHeld},
      {E::kDoesNotFit, S::kConflict},
      {E::kNodeMissing, S::kWaitingForNode},
      {E::kGone, S::kReleased}}},
    {"its node gains an agent",
     {{E::kPlaced, S::kAwaitingAdmission}, {E::kAdmitted, S::kHeld}, {E::kAgentAwaits, S::kAwaitingAdmission}}},
};

TEST(PodLifecycleTest, WholeLives) {
  for (const Life& life : kLives) {
    S stage = S::kNone;
    for (const auto& [event, want] : life.steps) {
      Result<S> next = Next(stage, event);
      ASSERT_TRUE(next.ok()) << life.name << ": " << next.status().message();
      EXPECT_EQ(*next, want) << life.name << ": " << StageName(stage) << " + " << EventName(event);
      stage = *next;
    }
  }
}

TEST(PodLifecycleTest, PredicatesFollowTheStage) {
  for (S s : kAllStages) {
    const bool booked = s == S::kAssumed || s == S::kAwaitingAdmission || s == S::kAdmissionAbandoned || s == S::kHeld;
    EXPECT_EQ(HoldsShare(s), booked) << StageName(s);
    EXPECT_EQ(Parked(s), s == S::kWaitingForNode || s == S::kConflict) << StageName(s);
    EXPECT_EQ(HoldsBindsBack(s), s == S::kAwaitingAdmission) << StageName(s);
    EXPECT_FALSE(HoldsShare(s) && Parked(s)) << StageName(s);
  }
  // Booking is only possible for a pod that holds nothing yet.
  for (S s : kAllStages) EXPECT_EQ(Next(s, E::kBooked).ok(), s == S::kNone || s == S::kPending) << StageName(s);
}

}  // namespace
}  // namespace tessera::core
