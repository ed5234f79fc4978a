#include "cuda/driver_table.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace tessera::cuda {

void* g_real[kFnCount];

namespace {

template <typename F>
struct Missing;
template <typename... A>
struct Missing<CUresult (*)(A...)> {
  static CUresult Call(A...) noexcept { return CUDA_ERROR_NOT_FOUND; }
};
template <typename... A>
struct Missing<nvmlReturn_t (*)(A...)> {
  static nvmlReturn_t Call(A...) noexcept { return NVML_ERROR_FUNCTION_NOT_FOUND; }
};

struct NamedFn {
  std::string_view name;
  Fn fn;
};

constexpr NamedFn kHooks[] = {
#define TESSERA_CU_HOOK(name, params, args) {#name, Fn::name},
#define TESSERA_NVML_HOOK(name, params, args) {#name, Fn::name},
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
};
constexpr int kHookCount = sizeof(kHooks) / sizeof(kHooks[0]);

// Sorted by name at compile time: constant-initialized, no static constructor.
constexpr auto kHooksByName = [] {
  std::array<NamedFn, kHookCount> a{};
  for (int i = 0; i < kHookCount; ++i) a[i] = kHooks[i];
  std::sort(a.begin(), a.end(), [](const NamedFn& x, const NamedFn& y) { return x.name < y.name; });
  return a;
}();

void* HookAddress(Fn fn) {
  switch (fn) {
#define TESSERA_CU_HOOK(name, params, args) \
  case Fn::name:                            \
    return reinterpret_cast<void*>(&::name);
#define TESSERA_NVML_HOOK(name, params, args) TESSERA_CU_HOOK(name, params, args)
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
    default:
      return nullptr;
  }
}

// Real address -> hook, sorted by real address; built by ResolveDriver.
struct RealToHook {
  const void* real;
  void* hook;
};
RealToHook g_by_real[kHookCount];
int g_by_real_count = 0;

template <Fn F>
void Resolve(void* lib, void* (*lookup)(void*, const char*), const char* name, int* missing) {
  void* p = lib != nullptr ? lookup(lib, name) : nullptr;
  if (p == nullptr) {
    p = reinterpret_cast<void*>(&Missing<typename FnType<F>::Type>::Call);
    ++*missing;
  }
  g_real[static_cast<int>(F)] = p;
}

}  // namespace

int ResolveDriver(void* libcuda, void* (*lookup)(void*, const char*)) {
  int missing = 0;
#define TESSERA_CU_HOOK(name, params, args) Resolve<Fn::name>(libcuda, lookup, #name, &missing);
#define TESSERA_CU_CALL(name) Resolve<Fn::name>(libcuda, lookup, #name, &missing);
#define TESSERA_NVML_HOOK(name, params, args)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL

  // Two exported names never share one real address with different ABIs; if
  // a driver aliases them, the first hook listed wins.
  g_by_real_count = 0;
  for (const NamedFn& h : kHooks) {
    void* real = libcuda != nullptr ? lookup(libcuda, h.name.data()) : nullptr;
    if (real != nullptr) g_by_real[g_by_real_count++] = {real, HookAddress(h.fn)};
  }
  std::stable_sort(g_by_real, g_by_real + g_by_real_count,
                   [](const RealToHook& a, const RealToHook& b) { return a.real < b.real; });
  return missing;
}

int ResolveNvml(void* libnvml, void* (*lookup)(void*, const char*)) {
  int missing = 0;
#define TESSERA_NVML_HOOK(name, params, args) Resolve<Fn::name>(libnvml, lookup, #name, &missing);
#define TESSERA_NVML_CALL(name) Resolve<Fn::name>(libnvml, lookup, #name, &missing);
#define TESSERA_CU_HOOK(name, params, args)
#define TESSERA_CU_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
  return missing;
}

void* HookByName(const char* name) {
  std::string_view n(name);
  auto it = std::lower_bound(kHooksByName.begin(), kHooksByName.end(), n,
                             [](const NamedFn& a, std::string_view b) { return a.name < b; });
  if (it == kHooksByName.end() || it->name != n) return nullptr;
  return HookAddress(it->fn);
}

void* HookByRealAddress(const void* real) {
  const RealToHook* end = g_by_real + g_by_real_count;
  const RealToHook* it = std::lower_bound(
      static_cast<const RealToHook*>(g_by_real), end, real, [](const RealToHook& a, const void* b) { return a.real < b; });
  if (it == end || it->real != real) return nullptr;
  return it->hook;
}

const char* HookName(int index) { return kHooks[index].name.data(); }
int HookCount() { return kHookCount; }

}  // namespace tessera::cuda
