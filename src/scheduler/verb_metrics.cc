#include "scheduler/verb_metrics.h"

#include <vector>

namespace tessera::scheduler {
namespace {

// Upper bounds of the latency buckets, in seconds: filter and prioritize at
// a few thousand nodes take well under a millisecond; bind waits on the API
// server (milliseconds to a second).
const std::vector<double> kLatencyBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                            0.025,  0.05,    0.1,    0.25,  0.5,    1};

// The outcomes each verb can have (each gets a zero series up front).
std::vector<Decision> Outcomes(Verb verb) {
  switch (verb) {
    case Verb::kFilter:
      return {Decision::kFit, Decision::kNoFit, Decision::kUnschedulable, Decision::kBadRequest};
    case Verb::kPrioritize:
      return {Decision::kScored, Decision::kNoFit, Decision::kUnschedulable, Decision::kBadRequest};
    case Verb::kBind:
      return {Decision::kBound,    Decision::kRefused, Decision::kConflict,
              Decision::kApiError, Decision::kError,   Decision::kBadRequest};
    case Verb::kPreempt:
      return {Decision::kVictims, Decision::kNoFit, Decision::kUnschedulable, Decision::kBadRequest};
    case Verb::kDraFilter:  // passes every node (kube-scheduler's allocator filters)
      return {Decision::kFit, Decision::kBadRequest};
    case Verb::kDraPrioritize:
      return {Decision::kScored, Decision::kNoFit, Decision::kBadRequest};
  }
  return {};
}

}  // namespace

const char* VerbName(Verb verb) {
  switch (verb) {
    case Verb::kFilter: return "filter";
    case Verb::kPrioritize: return "prioritize";
    case Verb::kBind: return "bind";
    case Verb::kPreempt: return "preempt";
    case Verb::kDraFilter: return "dra_filter";
    case Verb::kDraPrioritize: return "dra_prioritize";
  }
  return "unknown";
}

Result<std::unique_ptr<VerbMetrics>> VerbMetrics::Create(metrics::Registry& registry) {
  TESSERA_ASSIGN_OR_RETURN(
      metrics::Family<metrics::Histogram> * latency,
      registry.AddHistogram("tessera_scheduler_extender_request_duration_seconds",
                            "Time tessera-scheduler took to answer one extender call, from the request body to the "
                            "reply body (bind includes the Binding POST).",
                            {"verb"}, kLatencyBounds));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::Family<metrics::Counter> * decisions,
      registry.AddCounter("tessera_scheduler_decisions_total",
                          "Extender calls answered, by verb and what the answer was.", {"verb", "outcome"}));
  std::unique_ptr<VerbMetrics> m(new VerbMetrics());
  m->decision_family_ = decisions;
  for (size_t v = 0; v < kVerbCount; ++v) {
    const Verb verb = static_cast<Verb>(v);
    m->latency_[v] = &latency->WithLabels({VerbName(verb)});
    for (const Decision d : Outcomes(verb)) {
      m->decisions_[v][static_cast<size_t>(d)] = &decisions->WithLabels({VerbName(verb), DecisionName(d)});
    }
  }
  return m;
}

void VerbMetrics::RecordUnexpected(Verb verb, Decision decision) {
  decision_family_->WithLabels({VerbName(verb), DecisionName(decision)}).Increment();
}

}  // namespace tessera::scheduler
