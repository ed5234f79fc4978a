// How kubectl-tessera writes quantities in text output, and the options every
// text view takes. Pure; thread-safe.
//
//   FormatMem(40960, MemUnit::kGiB)   // "40.0"
//   FormatCore(305)                   // "30.5%"
#pragma once

#include <cstdint>
#include <string>

#include "kubectl/table.h"

namespace tessera::kubectl {

enum class MemUnit { kGiB, kMiB };

struct ViewOptions {
  TableOptions table;              // terminal width, colour
  MemUnit unit = MemUnit::kGiB;
  bool wide = false;               // -o wide: more columns
};

// "GiB" or "MiB".
const char* UnitName(MemUnit unit);
// MiB as GiB with one decimal ("6.0", "79.6"), or as whole MiB ("6144").
std::string FormatMem(int64_t mib, MemUnit unit);
// Core milli as a percent of one GPU: "30%", "30.5%", "100%".
std::string FormatCore(int64_t milli);
// used/total as a whole percent ("75%"); "-" when total is 0.
std::string FormatRatio(int64_t used, int64_t total);
// Green below 70 %, yellow below 90 %, red from 90 % (of `total`).
Style LoadStyle(int64_t used, int64_t total);

}  // namespace tessera::kubectl
