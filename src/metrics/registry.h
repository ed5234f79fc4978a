// Registry: the metric families one process serves on /metrics, and their
// rendering in the Prometheus text exposition format 0.0.4. Owned by main
// (or a server object), never global; families live as long as it does.
//
// Names follow the conventions promtool checks: counters end in _total,
// other families do not end in _total, _count, _sum or _bucket; values are
// in base units (seconds, bytes, ratios). Families render sorted by name,
// series by label values, so two scrapes of the same state are identical.
//
// Thread-safety: every method may be called from any thread at once.
// Render holds no registry lock while it runs callbacks.
//
//   Registry registry;
//   TESSERA_ASSIGN_OR_RETURN(Family<Counter>* runs, registry.AddCounter("x_runs_total", "Runs."));
//   runs->Get().Increment();
//   std::string body = registry.Render();  // served with kContentType
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "metrics/family.h"
#include "metrics/series.h"

namespace tessera::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each Add* returns the new family (owned by the registry), or
  // INVALID_ARGUMENT for a name or label name that is not valid or not
  // conventional for the type, duplicate label names or empty help, and
  // ALREADY_EXISTS when the name is taken.
  Result<Family<Counter>*> AddCounter(std::string name, std::string help, std::vector<std::string> label_names = {});
  Result<Family<Gauge>*> AddGauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  // `bounds`: the buckets' upper bounds, finite and strictly increasing (+Inf
  // is added); "le" may not be a label name. INVALID_ARGUMENT otherwise.
  Result<Family<Histogram>*> AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                                          std::vector<double> bounds);
  // A counter or gauge family whose samples `collect` returns at each
  // Render; `collect` runs on the scraping thread and must be thread-safe.
  // Errors as above, and INVALID_ARGUMENT for type kHistogram.
  Status AddCallback(MetricType type, std::string name, std::string help, std::vector<std::string> label_names,
                     CallbackFamily::Collect collect);

  // Every family: HELP, TYPE and samples, sorted by name.
  std::string Render() const;

 private:
  Status Check(const std::string& name, const std::string& help, MetricType type,
               const std::vector<std::string>& label_names) const;
  template <typename F>
  F* Insert(std::unique_ptr<F> family);

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_ TESSERA_GUARDED_BY(mu_);  // by name
};

}  // namespace tessera::metrics
