// Bytes a CUDA array or mipmapped array takes, estimated from its descriptor
// before creation (admission needs a number up front). The hooks replace the
// estimate by the driver's own figure after creation when it gives one.
//
//   uint64_t n = ArrayBytes(desc.Width, desc.Height, desc.Depth, desc.Format, desc.NumChannels);
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_api.h"

namespace tessera::cuda {

// Bytes of one element channel of `format`; 4 for formats we do not know
// (block-compressed and video formats are corrected after creation).
constexpr uint64_t FormatBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 4;
  }
}

// Saturating multiply: an absurd descriptor must not wrap to a small charge.
constexpr uint64_t MulSat(uint64_t a, uint64_t b) {
  return (a != 0 && b > ~0ull / a) ? ~0ull : a * b;
}

// A 1-D, 2-D or 3-D array; zero height/depth count as 1.
constexpr uint64_t ArrayBytes(uint64_t width, uint64_t height, uint64_t depth,
                              CUarray_format format, unsigned channels) {
  uint64_t n = MulSat(std::max<uint64_t>(width, 1), std::max<uint64_t>(height, 1));
  n = MulSat(n, std::max<uint64_t>(depth, 1));
  return MulSat(n, MulSat(FormatBytes(format), std::max(channels, 1u)));
}

// Sum over `levels` mip levels, each dimension halving (not below 1).
constexpr uint64_t MipmappedBytes(uint64_t width, uint64_t height, uint64_t depth,
                                  CUarray_format format, unsigned channels, unsigned levels) {
  uint64_t total = 0;
  for (unsigned l = 0; l < std::max(levels, 1u); ++l) {
    uint64_t level = ArrayBytes(width, height, depth, format, channels);
    total = total > ~0ull - level ? ~0ull : total + level;
    width = std::max<uint64_t>(width / 2, 1);
    height = height == 0 ? 0 : std::max<uint64_t>(height / 2, 1);
    depth = depth == 0 ? 0 : std::max<uint64_t>(depth / 2, 1);
    if (width == 1 && height <= 1 && depth <= 1 && l > 64) break;
  }
  return total;
}

}  // namespace tessera::cuda
