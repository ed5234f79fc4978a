#include "cuda/config.h"

#include <charconv>
#include <cstring>
#include <string_view>

namespace tessera::cuda {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kMaxMiB = ~0ull / kMiB;

bool ParseUint(const char* s, uint64_t* out) {
  std::string_view v(s);
  if (v.empty()) return false;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return ec == std::errc() && end == v.data() + v.size();
}

// Returns true and sets *bytes when `name` is set to a valid MiB count.
bool ReadLimit(const std::function<const char*(const char*)>& env, const std::string& name,
               uint64_t* bytes, std::vector<std::string>* problems) {
  const char* v = env(name.c_str());
  if (v == nullptr) return false;
  uint64_t mib = 0;
  if (!ParseUint(v, &mib) || mib > kMaxMiB) {
    problems->push_back(name + "=\"" + v + "\" is not a size in MiB; ignored");
    return false;
  }
  *bytes = mib * kMiB;
  return true;
}

}  // namespace

bool Config::AnyLimit() const {
  for (uint64_t b : limit_bytes) {
    if (b != 0) return true;
  }
  return false;
}

Config ParseConfig(const std::function<const char*(const char*)>& env,
                   std::vector<std::string>* problems) {
  Config c;
  if (const char* v = env("TESSERA_CUDA_DISABLE")) c.disabled = std::strcmp(v, "1") == 0;
  if (const char* v = env("TESSERA_REGION_DIR")) c.region_dir = v;
  uint64_t all = 0;
  ReadLimit(env, "TESSERA_GPU_MEM_LIMIT_MIB", &all, problems);
  for (int i = 0; i < region::kMaxGpus; ++i) {
    uint64_t b = all;
    ReadLimit(env, "TESSERA_GPU_MEM_LIMIT_MIB_" + std::to_string(i), &b, problems);
    c.limit_bytes[i] = b;
  }
  if (const char* v = env("TESSERA_MANAGED_MEMORY")) {
    if (std::strcmp(v, "count") == 0) {
      c.count_managed = true;
    } else if (std::strcmp(v, "ignore") == 0) {
      c.count_managed = false;
    } else {
      problems->push_back(std::string("TESSERA_MANAGED_MEMORY=\"") + v +
                          "\" is not count or ignore; counting managed memory");
    }
  }
  if (const char* v = env("TESSERA_LOG_LEVEL")) {
    uint64_t level = 0;
    if (ParseUint(v, &level) && level <= 3) {
      c.log_level = static_cast<int>(level);
    } else {
      problems->push_back(std::string("TESSERA_LOG_LEVEL=\"") + v + "\" is not 0-3; ignored");
    }
  }
  return c;
}

}  // namespace tessera::cuda
