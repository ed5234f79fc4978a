// libFuzzer target for the annotation codec: any bytes must decode to a value
// or an error, and whatever decodes must survive encode -> decode unchanged.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/codec.h"

namespace {

// Aborts unless `value` encodes, decodes back, and compares equal.
template <typename T, typename Encode, typename Decode>
void CheckRoundTrip(const T& value, Encode encode, Decode decode) {
  tessera::Result<std::string> text = encode(value);
  if (!text.ok()) std::abort();
  auto again = decode(*text);
  if (!again.ok() || !(*again == value)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto gpus = tessera::core::DecodeInventory(input); gpus.ok()) {
    CheckRoundTrip(*gpus, tessera::core::EncodeInventory, tessera::core::DecodeInventory);
  }
  if (auto assignment = tessera::core::DecodeAssignment(input); assignment.ok()) {
    CheckRoundTrip(*assignment, tessera::core::EncodeAssignment, tessera::core::DecodeAssignment);
  }
  if (auto usage = tessera::core::DecodeUsage(input); usage.ok()) {
    // The annotation keeps whole seconds of "at".
    usage->at = std::chrono::floor<std::chrono::seconds>(usage->at);
    CheckRoundTrip(*usage, tessera::core::EncodeUsage, tessera::core::DecodeUsage);
  }
  return 0;
}
