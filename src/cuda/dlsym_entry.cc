// The exported dlsym. On x86-64 it is an assembly stub: it asks
// tessera_cuda_dlsym_route for a hook and otherwise *jumps* to the real
// dlsym, so glibc sees the caller's return address and RTLD_NEXT keeps its
// meaning (the next object after the caller, not after this library). Other
// architectures get a C++ fallback whose RTLD_NEXT lookups of names we do
// not hook resolve relative to this library.
#include <dlfcn.h>

#include "cuda/hooks.h"
#include "cuda/runtime.h"

extern "C" {
// Set by RealDlsym's bootstrap before the route returns; read by the stub.
__attribute__((visibility("hidden"))) void* tessera_cuda_real_dlsym_for_stub = nullptr;
}

// Route, then publish the real dlsym for the stub's jump (bootstrapped
// through dlvsym by RealDlsymFn, never through the public dlsym).
extern "C" __attribute__((visibility("hidden"), used)) void* tessera_cuda_dlsym_stub_route(
    void* handle, const char* name) {
  if (__atomic_load_n(&tessera_cuda_real_dlsym_for_stub, __ATOMIC_ACQUIRE) == nullptr) {
    __atomic_store_n(&tessera_cuda_real_dlsym_for_stub,
                     reinterpret_cast<void*>(tessera::cuda::RealDlsymFn()), __ATOMIC_RELEASE);
  }
  return tessera_cuda_dlsym_route(handle, name);
}

#if defined(__x86_64__)
// rdi = handle, rsi = name. Saves both (plus 8 bytes to keep rsp 16-aligned
// at the call), routes, and either returns the hook or restores the
// arguments and tail-jumps to the real dlsym.
__asm__(
    ".text\n"
    ".globl dlsym\n"
    ".type dlsym, @function\n"
    "dlsym:\n"
    "  .cfi_startproc\n"
    "  pushq %rdi\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  pushq %rsi\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  subq $8, %rsp\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  call tessera_cuda_dlsym_stub_route\n"
    "  addq $8, %rsp\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  popq %rsi\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  popq %rdi\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  testq %rax, %rax\n"
    "  jz 1f\n"
    "  ret\n"
    "1:\n"
    "  jmp *tessera_cuda_real_dlsym_for_stub(%rip)\n"
    "  .cfi_endproc\n"
    ".size dlsym, .-dlsym\n");
#else
extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  if (void* hook = tessera_cuda_dlsym_stub_route(handle, name)) return hook;
  return tessera::cuda::RealDlsym(handle, name);
}
#endif
