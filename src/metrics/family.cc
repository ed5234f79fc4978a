#include "metrics/family.h"

#include <algorithm>

namespace tessera::metrics {

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

void FamilyBase::Render(std::string& out) const {
  out += "# HELP " + name_ + " " + EscapeHelp(help_) + "\n";
  out += "# TYPE " + name_ + " " + MetricTypeName(type_) + "\n";
  RenderSamples(out);
}

void FamilyBase::CheckArity(const std::vector<std::string>& values) const {
  if (values.size() == label_names_.size()) return;
  std::fprintf(stderr, "metric %s has %zu label names but was given %zu values\n", name_.c_str(),
               label_names_.size(), values.size());
  std::abort();
}

void CallbackFamily::RenderSamples(std::string& out) const {
  std::vector<Sample> samples = collect_();
  std::erase_if(samples, [&](const Sample& s) { return s.label_values.size() != label_names().size(); });
  std::stable_sort(samples.begin(), samples.end(),
                   [](const Sample& a, const Sample& b) { return a.label_values < b.label_values; });
  const std::vector<std::string>* previous = nullptr;
  for (const Sample& s : samples) {
    if (previous != nullptr && *previous == s.label_values) continue;
    previous = &s.label_values;
    out += name();
    out += FormatLabels(label_names(), s.label_values);
    out += ' ';
    out += FormatValue(s.value);
    out += '\n';
  }
}

}  // namespace tessera::metrics
