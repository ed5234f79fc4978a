// Symbol routing. cuGetProcAddress(_v2): the driver picks the variant for the
// caller's cudaVersion and flags; we map the pointer it returns to our hook
// with exactly that ABI (_v2, _ptsz, ...), by address, never by name. dlsym:
// requests for hooked cu* / nvml* names get the hook whatever the handle
// (RTLD_NEXT and RTLD_DEFAULT included); everything else is the real dlsym's.
#include <dlfcn.h>

#include <cctype>

#include "cuda/driver_table.h"
#include "cuda/hooks.h"
#include "cuda/runtime.h"

namespace tessera::cuda {
namespace {

// Replaces the driver's pointer by our hook of the same ABI, if we hook it.
void Route(CUresult r, void** pfn) {
  if (r != CUDA_SUCCESS || pfn == nullptr || *pfn == nullptr) return;
  if (void* hook = HookByRealAddress(*pfn); hook != nullptr) *pfn = hook;
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
  if (g_mode.load(std::memory_order_acquire) == kEnforce) Route(r, pfn);
  return r;
}

// `status` may be NULL (cudaGetDeviceCount passes NULL); only the driver
// writes it.
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) noexcept {
  if (!PassThrough()) [[unlikely]] EnsureInit();
  CUresult r = TESSERA_REAL(cuGetProcAddress_v2)(symbol, pfn, cuda_version, flags, status);
  if (g_mode.load(std::memory_order_acquire) == kEnforce) Route(r, pfn);
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
