// Symbol routing. cuGetProcAddress(_v2): the driver answers first (whether
// the symbol exists for that cudaVersion, and symbolStatus); when it hands
// out a function we hand out instead our hook of the ABI it hands out for
// that name, cudaVersion and flags (_v2, _ptsz, ...), found by name
// (abi_list.inc), never by the address it returned, which may be an internal
// entry point no exported symbol has. dlsym: requests for hooked cu* / nvml*
// names get the hook whatever the handle (RTLD_NEXT and RTLD_DEFAULT
// included); everything else is the real dlsym's.
#include <dlfcn.h>

#include <cctype>

#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

// Replaces the function the driver found by our hook of the same ABI, if we
// hook it. Names we do not hook are left alone; a hooked name whose ABI we
// do not hook too, with a line at debug level.
void Route(CUresult r, const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  if (r != CUDA_SUCCESS || symbol == nullptr || pfn == nullptr || *pfn == nullptr) return;
  bool unhooked_abi = false;
  if (void* hook = HookForProcAddress(symbol, cuda_version, flags, &unhooked_abi)) {
    *pfn = hook;
  } else if (unhooked_abi) {
    TESSERA_LOG(kLogDebug,
                "cuGetProcAddress(%s, %d, flags %#llx): no hook of the ABI the driver hands "
                "out; the driver's function is used",
                symbol, cuda_version, static_cast<unsigned long long>(flags));
  }
}

bool IsRoutedName(const char* n) {
  if (n[0] == 'c' && n[1] == 'u') return std::isupper(static_cast<unsigned char>(n[2])) != 0;
  return n[0] == 'n' && n[1] == 'v' && n[2] == 'm' && n[3] == 'l' &&
         std::isupper(static_cast<unsigned char>(n[4])) != 0;
}

}  // namespace

namespace hooks {

// In pass-through mode the driver's own pointers are handed out: no hook is
// in the way of any call resolved this way.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                          cuuint64_t flags) noexcept {
  if (!PassThrough()) [[unlikely]] EnsureInit();
  CUresult r = TESSERA_REAL(cuGetProcAddress)(symbol, pfn, cuda_version, flags);
  if (g_mode.load(std::memory_order_acquire) == kEnforce) {
    Route(r, symbol, pfn, cuda_version, flags);
  }
  return r;
}

// `status` may be NULL (cudaGetDeviceCount passes NULL); only the driver
// writes it.
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) noexcept {
  if (!PassThrough()) [[unlikely]] EnsureInit();
  CUresult r = TESSERA_REAL(cuGetProcAddress_v2)(symbol, pfn, cuda_version, flags, status);
  if (g_mode.load(std::memory_order_acquire) == kEnforce) {
    Route(r, symbol, pfn, cuda_version, flags);
  }
  return r;
}

}  // namespace hooks
}  // namespace tessera::cuda

extern "C" void* tessera_cuda_dlsym_route(void* handle, const char* name) {
  using namespace tessera::cuda;
  if (name == nullptr || !IsRoutedName(name)) return nullptr;
  void* hook = HookByName(name);
  if (hook == nullptr) return nullptr;
  // The symbol must exist where the caller looks. For RTLD_DEFAULT and
  // RTLD_NEXT look past this library, which would otherwise find itself.
  void* where = (handle == RTLD_DEFAULT || handle == RTLD_NEXT) ? RTLD_NEXT : handle;
  return RealDlsym(where, name) != nullptr ? hook : nullptr;
}
