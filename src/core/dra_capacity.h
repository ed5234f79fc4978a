// Reads the capacities of Tessera's DRA devices out of resource.k8s.io/v1
// objects: a request's capacity.requests and an allocation result's
// consumedCapacity (the maps keyed by kMemoryCapacity and kComputeCapacity,
// dra_names.h). Memory is a quantity in bytes, taken as whole MiB rounded
// up; compute is percent of a GPU, taken as core milli (10 per percent)
// rounded up. The extender (src/scheduler/dra_objects.h), the node agent
// (src/dra/claim.h) and kubectl-tessera (src/kubectl/claims.h) read claims
// through these, so they agree on what a claim holds. Pure functions;
// thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(DraConsumedCapacity c, ConsumedCapacityOf(result));
//   int64_t mem = c.mem_mib.value_or(card_mib);  // absent: the whole card
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace tessera::core {

// Percent of a GPU (a quantity, "30" or "12.5") as core milli, rounded up:
// "30" -> 300, "12.5" -> 125, "0.01" -> 1. Errors as ParseQuantity (not a
// quantity, negative, too large).
Result<int64_t> PercentToCoreMilli(std::string_view text);

// The capacities a map names; nullopt where it names none.
struct DraCapacity {
  std::optional<int64_t> mem_mib;     // kMemoryCapacity, rounded up to a MiB
  std::optional<int64_t> core_milli;  // kComputeCapacity, 10 per percent, rounded up
  bool operator==(const DraCapacity&) const = default;
};

// Reads `capacity`, a map of capacity name to quantity string such as
// {"memory": "8Gi", "compute": "30"}. A name that is absent, or whose value
// is the empty string, is not named; other keys are ignored; a `capacity`
// that is not an object names nothing. INVALID_ARGUMENT, its message
// starting with the capacity's name, when a value is not a string ("memory
// is not a quantity string") or not a quantity ("compute: ...").
Result<DraCapacity> ReadDraCapacity(const nlohmann::json& capacity);

// What one allocation result (an entry of a ResourceClaim's
// status.allocation.devices.results) holds on its device.
struct DraConsumedCapacity {
  std::optional<int64_t> mem_mib;  // nullopt: the whole card's memory
  int64_t core_milli = 0;          // 1000: the whole GPU's time
  bool operator==(const DraConsumedCapacity&) const = default;
};

// Reads `result`'s consumedCapacity. Without one (absent or not an object:
// an exclusive allocation, the cluster does not run consumable capacity) it
// holds the whole card: all memory and 1000 core milli. With one, its
// memory (absent: the whole card, the slice's default) and compute
// (absent: 0). INVALID_ARGUMENT as ReadDraCapacity, the message starting
// with "consumed " ("consumed memory: ...").
Result<DraConsumedCapacity> ConsumedCapacityOf(const nlohmann::json& result);

}  // namespace tessera::core
