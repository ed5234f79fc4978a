// VerbMetrics: how long each extender verb took and what it decided, as
// tessera_scheduler_extender_request_duration_seconds{verb} (a histogram,
// 100 us .. 1 s) and tessera_scheduler_decisions_total{verb,outcome}.
// ExtenderServer records every call it serves, both entries' verbs.
//
// Thread-safety: Record may be called from any thread at once; it is
// lock-free (series are resolved at creation).
//
//   metrics::Registry registry;
//   TESSERA_ASSIGN_OR_RETURN(auto verbs, VerbMetrics::Create(registry));
//   verbs->Record(Verb::kFilter, reply.decision, 0.0004);
#pragma once

#include <array>
#include <memory>

#include "core/status.h"
#include "metrics/registry.h"
#include "scheduler/extender.h"

namespace tessera::scheduler {

// The extender's verbs: those of its first entry (device-plugin pods) and
// kDraFilter, kDraPrioritize, the second entry's (claim pods, served under
// ServerOptions::claims_prefix).
enum class Verb : uint8_t { kFilter, kPrioritize, kBind, kPreempt, kDraFilter, kDraPrioritize };
inline constexpr size_t kVerbCount = 6;
// The metrics' label: "filter", "prioritize", "bind", "preempt",
// "dra_filter", "dra_prioritize".
const char* VerbName(Verb verb);

class VerbMetrics {
 public:
  // Adds both families to `registry` (which must outlive this object), with
  // a zero series for each verb and each outcome it can have.
  // ALREADY_EXISTS when they are there already.
  static Result<std::unique_ptr<VerbMetrics>> Create(metrics::Registry& registry);

  // One call of `verb` that decided `decision` in `seconds`: one bucket and
  // sum update, one counter increment.
  void Record(Verb verb, Decision decision, double seconds) {
    const size_t v = static_cast<size_t>(verb);
    latency_[v]->Observe(seconds);
    if (metrics::Counter* c = decisions_[v][static_cast<size_t>(decision)]; c != nullptr) [[likely]] {
      c->Increment();
    } else {
      RecordUnexpected(verb, decision);
    }
  }

 private:
  VerbMetrics() = default;
  // A decision the verb was not expected to make: counted all the same.
  [[gnu::cold, gnu::noinline]] void RecordUnexpected(Verb verb, Decision decision);

  metrics::Family<metrics::Counter>* decision_family_ = nullptr;
  std::array<metrics::Histogram*, kVerbCount> latency_{};
  std::array<std::array<metrics::Counter*, kDecisionCount>, kVerbCount> decisions_{};
};

}  // namespace tessera::scheduler
