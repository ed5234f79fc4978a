#include "kubectl/format.h"

#include <cstdio>

namespace tessera::kubectl {

const char* UnitName(MemUnit unit) { return unit == MemUnit::kGiB ? "GiB" : "MiB"; }

std::string FormatMem(int64_t mib, MemUnit unit) {
  if (unit == MemUnit::kMiB) return std::to_string(mib);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(mib) / 1024.0);
  return buf;
}

std::string FormatCore(int64_t milli) {
  if (milli % 10 == 0) return std::to_string(milli / 10) + "%";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", static_cast<double>(milli) / 10.0);
  return buf;
}

std::string FormatRatio(int64_t used, int64_t total) {
  if (total <= 0) return "-";
  return std::to_string((used * 100 + total / 2) / total) + "%";
}

Style LoadStyle(int64_t used, int64_t total) {
  if (total <= 0) return Style::kPlain;
  if (used * 10 >= total * 9) return Style::kBad;
  if (used * 10 >= total * 7) return Style::kWarn;
  return Style::kGood;
}

}  // namespace tessera::kubectl
