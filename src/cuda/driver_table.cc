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

constexpr NamedFn kDriverHooks[] = {
#define TESSERA_CU_HOOK(name, params, args) {#name, Fn::name},
#define TESSERA_NVML_HOOK(name, params, args)
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
};

// One ABI of a driver entry point as cuGetProcAddress hands it out.
enum class AbiStream { kLegacy, kPtsz, kPtds };
struct Abi {
  std::string_view base;  // the name callers ask for
  int since;              // the CUDA version that introduced this ABI
  AbiStream stream;
  Fn fn;  // our hook of this ABI; Fn::kCount: left to the driver
};

constexpr Abi kAbis[] = {
#define TESSERA_CU_ABI(name, base, since, stream) {#base, since, AbiStream::k##stream, Fn::name},
#define TESSERA_CU_ABI_PASS(base, since, stream) {#base, since, AbiStream::k##stream, Fn::kCount},
#include "cuda/abi_list.inc"
#undef TESSERA_CU_ABI
#undef TESSERA_CU_ABI_PASS
};
constexpr int kAbiCount = sizeof(kAbis) / sizeof(kAbis[0]);

// Every exported driver hook is one ABI, of a base its name starts with:
// a hook without a row would never be handed out by cuGetProcAddress.
constexpr bool EveryDriverHookIsOneAbi() {
  for (const NamedFn& h : kDriverHooks) {
    int rows = 0;
    for (const Abi& a : kAbis) {
      if (a.fn != h.fn) continue;
      if (!h.name.starts_with(a.base)) return false;
      ++rows;
    }
    if (rows != 1) return false;
  }
  return true;
}
static_assert(EveryDriverHookIsOneAbi(),
              "each TESSERA_CU_HOOK of hook_list.inc needs exactly one TESSERA_CU_ABI row in "
              "abi_list.inc, of a base its name starts with");

constexpr auto kAbisByBase = [] {
  std::array<Abi, kAbiCount> a{};
  for (int i = 0; i < kAbiCount; ++i) a[i] = kAbis[i];
  std::sort(a.begin(), a.end(), [](const Abi& x, const Abi& y) { return x.base < y.base; });
  return a;
}();

// Which of two ABIs the driver prefers for a request both are eligible for:
// a per-thread variant (eligible only when asked for), else the newer.
constexpr bool Preferred(const Abi& a, const Abi& b) {
  const bool a_pt = a.stream != AbiStream::kLegacy, b_pt = b.stream != AbiStream::kLegacy;
  if (a_pt != b_pt) return a_pt;
  return a.since > b.since;
}

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

void* HookForProcAddress(const char* symbol, int cuda_version, cuuint64_t flags,
                         bool* unhooked_abi) {
  *unhooked_abi = false;
  const std::string_view base(symbol);
  auto it = std::lower_bound(kAbisByBase.begin(), kAbisByBase.end(), base,
                             [](const Abi& a, std::string_view b) { return a.base < b; });
  if (it == kAbisByBase.end() || it->base != base) {
    // Not a base name; an exported ABI name (cuMemAlloc_v2) is that ABI.
    return base.starts_with("cu") ? HookByName(symbol) : nullptr;
  }
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Abi* pick = nullptr;
  for (; it != kAbisByBase.end() && it->base == base; ++it) {
    if (it->since > cuda_version) continue;
    if (it->stream != AbiStream::kLegacy && !per_thread) continue;
    if (pick == nullptr || Preferred(*it, *pick)) pick = &*it;
  }
  if (pick == nullptr || pick->fn == Fn::kCount) {
    *unhooked_abi = true;
    return nullptr;
  }
  return HookAddress(pick->fn);
}

const char* HookName(int index) { return kHooks[index].name.data(); }
int HookCount() { return kHookCount; }

}  // namespace tessera::cuda
