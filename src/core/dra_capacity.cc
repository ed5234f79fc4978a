#include "core/dra_capacity.h"

#include <string>

#include <nlohmann/json.hpp>

#include "core/dra_names.h"
#include "core/model.h"
#include "core/quantity.h"

namespace tessera::core {
namespace {

// The quantity text at capacity[name]: "" when absent.
Result<std::string> QuantityText(const nlohmann::json& capacity, const char* name) {
  const auto it = capacity.find(name);
  if (it == capacity.end()) return std::string();
  if (!it->is_string()) return InvalidArgument(std::string(name) + " is not a quantity string");
  return it->get<std::string>();
}

// Reads capacity[name] with `parse`; nullopt when not named.
template <typename Parse>
Result<std::optional<int64_t>> Read(const nlohmann::json& capacity, const char* name, Parse parse) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, QuantityText(capacity, name));
  if (text.empty()) return std::optional<int64_t>();
  Result<int64_t> value = parse(text);
  if (!value.ok()) return value.status().WithContext(name);
  return std::optional<int64_t>(*value);
}

}  // namespace

Result<int64_t> PercentToCoreMilli(std::string_view text) {
  TESSERA_ASSIGN_OR_RETURN(Quantity q, ParseQuantity(text));
  return (q.milli + 99) / 100;  // percent in milli-units -> core milli (10 per percent), rounded up
}

Result<DraCapacity> ReadDraCapacity(const nlohmann::json& capacity) {
  DraCapacity out;
  if (!capacity.is_object()) return out;
  TESSERA_ASSIGN_OR_RETURN(out.mem_mib, Read(capacity, kMemoryCapacity, ParseMemoryMiB));
  TESSERA_ASSIGN_OR_RETURN(out.core_milli, Read(capacity, kComputeCapacity, PercentToCoreMilli));
  return out;
}

Result<DraConsumedCapacity> ConsumedCapacityOf(const nlohmann::json& result) {
  DraConsumedCapacity out{std::nullopt, kCoreMilliPerGpu};
  if (!result.is_object()) return out;
  const auto consumed = result.find("consumedCapacity");
  if (consumed == result.end() || !consumed->is_object()) return out;
  Result<DraCapacity> capacity = ReadDraCapacity(*consumed);
  if (!capacity.ok()) return Status(capacity.status().code(), "consumed " + capacity.status().message());
  out.mem_mib = capacity->mem_mib;
  out.core_milli = capacity->core_milli.value_or(0);
  return out;
}

}  // namespace tessera::core
