#include "cuda/gpu_uuid.h"

namespace tessera::cuda {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Offsets of the dashes in the text form.
bool IsDashAt(size_t i) { return i == 12 || i == 17 || i == 22 || i == 27; }

}  // namespace

bool ParseGpuUuid(std::string_view text, GpuUuid* out) {
  if (text.size() != kGpuUuidChars || text.substr(0, 4) != "GPU-") return false;
  GpuUuid u;
  int nibble = 0;
  for (size_t i = 4; i < text.size(); ++i) {
    if (IsDashAt(i)) {
      if (text[i] != '-') return false;
      continue;
    }
    const int v = HexValue(text[i]);
    if (v < 0) return false;
    u.bytes[nibble / 2] = static_cast<uint8_t>(nibble % 2 == 0 ? v << 4 : u.bytes[nibble / 2] | v);
    ++nibble;
  }
  *out = u;
  return true;
}

GpuUuid GpuUuidFromBytes(const char (&bytes)[16]) {
  GpuUuid u;
  for (int i = 0; i < 16; ++i) u.bytes[i] = static_cast<uint8_t>(bytes[i]);
  return u;
}

void FormatGpuUuid(const GpuUuid& uuid, char (&out)[kGpuUuidChars + 1]) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t o = 0;
  for (char c : std::string_view("GPU-")) out[o++] = c;
  for (int b = 0; b < 16; ++b) {
    if (IsDashAt(o)) out[o++] = '-';
    out[o++] = kHex[uuid.bytes[b] >> 4];
    out[o++] = kHex[uuid.bytes[b] & 0xF];
  }
  out[o] = '\0';
}

}  // namespace tessera::cuda
