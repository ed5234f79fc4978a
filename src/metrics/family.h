// A metric family: one name, HELP text, type and fixed label names, and its
// series. Family<Counter|Gauge|Histogram> holds series updated by the code
// that owns them; CallbackFamily asks a function for its samples at each
// scrape (for values kept elsewhere, like the scheduler's ledger totals).
// Families are created by, and live as long as, a Registry (registry.h).
//
// Thread-safety: all methods may be called from any thread at once.
// WithLabels and Remove take the family's mutex; updating a series does not.
//
//   Family<Counter>* decisions = ...;  // Registry::AddCounter
//   Counter& fit = decisions->WithLabels({"filter", "fit"});
//   fit.Increment();
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_annotations.h"
#include "metrics/series.h"
#include "metrics/text_format.h"

namespace tessera::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
// "counter", "gauge", "histogram": the TYPE line's word.
const char* MetricTypeName(MetricType type);

// What every family has; Registry renders families through this.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends "# HELP", "# TYPE" and every series' samples, series sorted by
  // their label values.
  void Render(std::string& out) const;

 protected:
  virtual void RenderSamples(std::string& out) const = 0;
  // Aborts, naming the family, when `values` does not match the label names:
  // a programming error, since label names are fixed in code.
  void CheckArity(const std::vector<std::string>& values) const;

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

template <typename Series>
class Family final : public FamilyBase {
 public:
  // Made by Registry. `bounds` is for histograms only. A family without
  // labels has its one series from the start, so it renders as 0.
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds = {})
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)), bounds_(std::move(bounds)) {
    if (this->label_names().empty()) series_.emplace(std::vector<std::string>{}, MakeSeries());
  }

  // The series with these label values (one per label name, in order),
  // created at zero on first use. The reference stays valid until Remove of
  // the same values or the registry's end. Takes the family's mutex and
  // allocates on first use: resolve once, keep the reference on hot paths.
  // Aborts when the number of values is not the number of label names.
  Series& WithLabels(const std::vector<std::string>& values) {
    CheckArity(values);
    MutexLock lock(mu_);
    auto it = series_.find(values);
    if (it == series_.end()) it = series_.emplace(values, MakeSeries()).first;
    return *it->second;
  }
  // The one series of a family without labels.
  Series& Get() { return WithLabels({}); }

  // Drops the series with these values (a pod that went away); references to
  // it dangle from here on. False when there was none.
  bool Remove(const std::vector<std::string>& values) {
    MutexLock lock(mu_);
    return series_.erase(values) > 0;
  }

 private:
  std::unique_ptr<Series> MakeSeries() const {
    if constexpr (std::is_same_v<Series, Histogram>) {
      return std::make_unique<Histogram>(&bounds_);
    } else {
      return std::make_unique<Series>();
    }
  }
  void RenderSamples(std::string& out) const override {
    MutexLock lock(mu_);
    for (const auto& [values, series] : series_) series->Append(out, name(), FormatLabels(label_names(), values));
  }

  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Series>> series_ TESSERA_GUARDED_BY(mu_);
};

// One sample a callback family reports.
struct Sample {
  std::vector<std::string> label_values;  // one per label name, in order
  double value = 0;
};

// Counters or gauges whose samples `collect` returns at each Render.
// Samples with the wrong number of label values are dropped, and so are
// repeats of a label set after its first sample.
class CallbackFamily final : public FamilyBase {
 public:
  using Collect = std::function<std::vector<Sample>()>;
  CallbackFamily(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                 Collect collect)
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)), collect_(std::move(collect)) {}

 private:
  void RenderSamples(std::string& out) const override;
  const Collect collect_;
};

}  // namespace tessera::metrics
