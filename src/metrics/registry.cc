#include "metrics/registry.h"

#include <cmath>
#include <set>

#include "metrics/text_format.h"

namespace tessera::metrics {

Status Registry::Check(const std::string& name, const std::string& help, MetricType type,
                       const std::vector<std::string>& label_names) const {
  if (!IsValidMetricName(name)) return InvalidArgument("metric name \"" + name + "\" is not valid");
  const bool total = name.ends_with("_total");
  if (type == MetricType::kCounter && !total) {
    return InvalidArgument("counter " + name + " must end in _total");
  }
  if (type != MetricType::kCounter &&
      (total || name.ends_with("_count") || name.ends_with("_sum") || name.ends_with("_bucket"))) {
    return InvalidArgument(std::string(MetricTypeName(type)) + " " + name +
                           " must not end in _total, _count, _sum or _bucket");
  }
  if (help.empty()) return InvalidArgument("metric " + name + " needs help text");
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    if (!IsValidLabelName(label)) return InvalidArgument("metric " + name + ": label name \"" + label + "\" is not valid");
    if (type == MetricType::kHistogram && label == "le") {
      return InvalidArgument("histogram " + name + " may not have a label named le");
    }
    if (!seen.insert(label).second) return InvalidArgument("metric " + name + ": label " + label + " is repeated");
  }
  return Status::Ok();
}

template <typename F>
F* Registry::Insert(std::unique_ptr<F> family) {
  MutexLock lock(mu_);
  const auto [it, inserted] = families_.try_emplace(family->name(), nullptr);
  if (!inserted) return nullptr;
  F* raw = family.get();
  it->second = std::move(family);
  return raw;
}

Result<Family<Counter>*> Registry::AddCounter(std::string name, std::string help,
                                              std::vector<std::string> label_names) {
  TESSERA_RETURN_IF_ERROR(Check(name, help, MetricType::kCounter, label_names));
  auto* f = Insert(std::make_unique<Family<Counter>>(name, std::move(help), MetricType::kCounter,
                                                      std::move(label_names)));
  if (f == nullptr) return AlreadyExists("metric " + name + " is registered already");
  return f;
}

Result<Family<Gauge>*> Registry::AddGauge(std::string name, std::string help, std::vector<std::string> label_names) {
  TESSERA_RETURN_IF_ERROR(Check(name, help, MetricType::kGauge, label_names));
  auto* f =
      Insert(std::make_unique<Family<Gauge>>(name, std::move(help), MetricType::kGauge, std::move(label_names)));
  if (f == nullptr) return AlreadyExists("metric " + name + " is registered already");
  return f;
}

Result<Family<Histogram>*> Registry::AddHistogram(std::string name, std::string help,
                                                  std::vector<std::string> label_names, std::vector<double> bounds) {
  TESSERA_RETURN_IF_ERROR(Check(name, help, MetricType::kHistogram, label_names));
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      return InvalidArgument("histogram " + name + ": bucket bounds must be finite and strictly increasing");
    }
  }
  auto* f = Insert(std::make_unique<Family<Histogram>>(name, std::move(help), MetricType::kHistogram,
                                                        std::move(label_names), std::move(bounds)));
  if (f == nullptr) return AlreadyExists("metric " + name + " is registered already");
  return f;
}

Status Registry::AddCallback(MetricType type, std::string name, std::string help,
                             std::vector<std::string> label_names, CallbackFamily::Collect collect) {
  if (type == MetricType::kHistogram) return InvalidArgument("callback family " + name + " cannot be a histogram");
  TESSERA_RETURN_IF_ERROR(Check(name, help, type, label_names));
  if (!collect) return InvalidArgument("callback family " + name + " needs a function");
  if (Insert(std::make_unique<CallbackFamily>(name, std::move(help), type, std::move(label_names),
                                              std::move(collect))) == nullptr) {
    return AlreadyExists("metric " + name + " is registered already");
  }
  return Status::Ok();
}

std::string Registry::Render() const {
  std::vector<const FamilyBase*> families;
  {
    MutexLock lock(mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  // Families are never removed, so the pointers stay valid without the lock.
  std::string out;
  for (const FamilyBase* f : families) f->Render(out);
  return out;
}

}  // namespace tessera::metrics
