#include "cuda/config.h"

#include "cuda/compute_gate.h"

#include <algorithm>
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

bool Config::AnyUuid() const {
  for (bool b : has_uuid) {
    if (b) return true;
  }
  return false;
}

int Config::ShareIndexOf(int fallback, const GpuUuid* device_uuid) const {
  if (!AnyUuid()) return fallback >= 0 && fallback < region::kMaxGpus ? fallback : -1;
  if (device_uuid == nullptr) return -1;
  for (int i = 0; i < region::kMaxGpus; ++i) {
    if (has_uuid[i] && uuid[i] == *device_uuid) return i;
  }
  return -1;
}

bool Config::AnyComputeLimit() const {
  for (uint32_t p : core_ppm) {
    if (p != 0 && p < kPpm) return true;
  }
  return false;
}

namespace {

bool ReadShare(const std::function<const char*(const char*)>& env, const std::string& name,
               uint32_t* ppm, std::vector<std::string>* problems) {
  const char* v = env(name.c_str());
  if (v == nullptr) return false;
  if (!ParseSharePercent(v, ppm)) {
    problems->push_back(name + "=\"" + v + "\" is not a percentage in [0, 100]; ignored");
    return false;
  }
  return true;
}

}  // namespace

Config ParseConfig(const std::function<const char*(const char*)>& env,
                   std::vector<std::string>* problems) {
  Config c;
  if (const char* v = env("TESSERA_CUDA_DISABLE")) c.disabled = std::strcmp(v, "1") == 0;
  if (const char* v = env("TESSERA_REGION_DIR")) c.region_dir = v;
  if (const char* v = env("TESSERA_GPU_BOARD_DIR")) c.board_dir = v;
  for (int i = 0; i < region::kMaxGpus; ++i) {
    const std::string name = "TESSERA_GPU_UUID_" + std::to_string(i);
    const char* v = env(name.c_str());
    if (v == nullptr) continue;
    GpuUuid u;
    if (!ParseGpuUuid(v, &u)) {
      problems->push_back(name + "=\"" + v +
                          "\" is not a GPU UUID (GPU- and 36 characters, as nvidia-smi -L shows); ignored");
      continue;
    }
    int same = 0;
    while (same < i && !(c.has_uuid[same] && c.uuid[same] == u)) ++same;
    if (same < i) {
      problems->push_back(name + "=\"" + v + "\" repeats TESSERA_GPU_UUID_" + std::to_string(same) +
                          "; ignored");
      continue;
    }
    c.uuid[i] = u;
    c.has_uuid[i] = true;
  }
  uint64_t all = 0;
  ReadLimit(env, "TESSERA_GPU_MEM_LIMIT_MIB", &all, problems);
  for (int i = 0; i < region::kMaxGpus; ++i) {
    uint64_t b = all;
    ReadLimit(env, "TESSERA_GPU_MEM_LIMIT_MIB_" + std::to_string(i), &b, problems);
    c.limit_bytes[i] = b;
  }
  uint64_t all_context = kDefaultContextMiB * kMiB;
  ReadLimit(env, "TESSERA_GPU_CONTEXT_MIB", &all_context, problems);
  for (int i = 0; i < region::kMaxGpus; ++i) {
    uint64_t b = all_context;
    ReadLimit(env, "TESSERA_GPU_CONTEXT_MIB_" + std::to_string(i), &b, problems);
    c.context_bytes[i] = b;
  }
  if (const char* v = env("TESSERA_GPU_MEM_VIEW")) {
    if (std::strcmp(v, "device") == 0) {
      c.device_total = true;
    } else if (std::strcmp(v, "share") != 0) {
      problems->push_back(std::string("TESSERA_GPU_MEM_VIEW=\"") + v + "\" is not share or device; using share");
    }
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
  uint32_t all_ppm = 0;
  ReadShare(env, "TESSERA_GPU_CORE_PERCENT", &all_ppm, problems);
  for (int i = 0; i < region::kMaxGpus; ++i) {
    uint32_t p = all_ppm;
    ReadShare(env, "TESSERA_GPU_CORE_PERCENT_" + std::to_string(i), &p, problems);
    c.core_ppm[i] = p;
  }
  if (const char* v = env("TESSERA_GPU_CORE_POLICY")) {
    if (std::strcmp(v, "hard") == 0 || std::strcmp(v, "share") == 0) {
      c.core_hard = std::strcmp(v, "hard") == 0;
    } else {
      problems->push_back(std::string("TESSERA_GPU_CORE_POLICY=\"") + v +
                          "\" is not share or hard; using share");
    }
  }
  if (const char* v = env("TESSERA_GPU_CORE_WINDOW_MS")) {
    uint64_t ms = 0;
    if (ParseUint(v, &ms) && ms >= 10 && ms <= 1000) {
      c.core_window_us = static_cast<uint32_t>(ms * 1000);
    } else {
      problems->push_back(std::string("TESSERA_GPU_CORE_WINDOW_MS=\"") + v +
                          "\" is not 10-1000; using 100");
    }
  }
  if (const char* v = env("TESSERA_TEST_CLOCK")) c.fake_clock = std::strcmp(v, "fake_cuda") == 0;
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
