#include "metrics/series.h"

#include <cmath>

#include "metrics/text_format.h"

namespace tessera::metrics {
namespace {

void AppendLine(std::string& out, std::string_view name, std::string_view suffix, std::string_view labels,
                const std::string& value) {
  out += name;
  out += suffix;
  out += labels;
  out += ' ';
  out += value;
  out += '\n';
}

}  // namespace

void Counter::Append(std::string& out, std::string_view name, std::string_view labels) const {
  AppendLine(out, name, "", labels, std::to_string(Value()));
}

void Gauge::Append(std::string& out, std::string_view name, std::string_view labels) const {
  AppendLine(out, name, "", labels, FormatValue(Value()));
}

Histogram::Histogram(const std::vector<double>* bounds)
    : bounds_(bounds), counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds->size() + 1)) {}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.cumulative.reserve(bounds_->size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

void Histogram::Append(std::string& out, std::string_view name, std::string_view labels) const {
  const Snapshot s = Read();
  // The labels with `le` added last: `{a="x",le="0.5"}` or `{le="0.5"}`.
  const std::string open = labels.empty() ? std::string("{") : std::string(labels.substr(0, labels.size() - 1)) + ",";
  for (size_t i = 0; i < s.cumulative.size(); ++i) {
    const std::string le = i < bounds_->size() ? FormatValue((*bounds_)[i]) : "+Inf";
    AppendLine(out, name, "_bucket", open + "le=\"" + le + "\"}", std::to_string(s.cumulative[i]));
  }
  AppendLine(out, name, "_sum", labels, FormatValue(s.sum));
  AppendLine(out, name, "_count", labels, std::to_string(s.count));
}

}  // namespace tessera::metrics
