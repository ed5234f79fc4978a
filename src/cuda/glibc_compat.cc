// Keeps libtessera-cuda.so loadable on the glibc of the images users run.
//
// The library is mounted as /etc/ld.so.preload into every sharing container,
// so every process of that image loads it, whatever its glibc. Built on a
// current glibc, the linker binds each libc function to its newest version
// (pthread_once@GLIBC_2.34, fstat@GLIBC_2.33, ...), and the static libstdc++
// and libgcc_eh bring in arc4random (2.36) and _dl_find_object (2.35): on an
// older glibc (Ubuntu 22.04 has 2.35, RHEL 8 has 2.28) the process would not
// start. This file defines, inside the library (the export map keeps them
// local), each function whose newest version is above the baseline; every
// reference in the link, ours and the static archives' alike, binds to these,
// and they call the oldest version of the real function or do the work with
// older calls. cuda_library_check fails the build when any needed version is
// above the baseline (TESSERA_CUDA_GLIBC_BASELINE in CMakeLists.txt).
//
// x86-64 and aarch64 only (the platforms with NVIDIA drivers); elsewhere the
// file is empty and the check is skipped. Functions that moved from
// libpthread/libdl into libc in 2.34 still live there on older systems: the
// library lists libpthread.so.0 and libdl.so.2 as needed (current glibc ships
// both as stubs), and symbol versions match by name across objects.
#include <features.h>  // __GLIBC__

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#define TESSERA_GLIBC_BASE "GLIBC_2.2.5"
#define TESSERA_GLIBC_ROBUST "GLIBC_2.12"
#define TESSERA_GLIBC_DLADDR1 "GLIBC_2.3.3"
#else
#define TESSERA_GLIBC_BASE "GLIBC_2.17"
#define TESSERA_GLIBC_ROBUST "GLIBC_2.17"
#define TESSERA_GLIBC_DLADDR1 "GLIBC_2.17"
#endif

// Binds `local` to `name`@`version` of the real library.
#define TESSERA_OLD(local, name, version) __asm__(".symver " #local "," #name "@" version)

extern "C" {

// The oldest versions of the functions wrapped below.
void* tessera_old_dlopen(const char*, int);
void* tessera_old_dlvsym(void*, const char*, const char*);
int tessera_old_pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int tessera_old_pthread_once(pthread_once_t*, void (*)());
int tessera_old_pthread_key_create(pthread_key_t*, void (*)(void*));
int tessera_old_pthread_mutexattr_init(pthread_mutexattr_t*);
int tessera_old_pthread_mutexattr_destroy(pthread_mutexattr_t*);
int tessera_old_pthread_mutexattr_setpshared(pthread_mutexattr_t*, int);
int tessera_old_pthread_mutexattr_setrobust(pthread_mutexattr_t*, int);
int tessera_old_pthread_mutex_consistent(pthread_mutex_t*);
int tessera_old_pthread_mutex_timedlock(pthread_mutex_t*, const struct timespec*);
int tessera_old_pthread_mutex_trylock(pthread_mutex_t*);
int tessera_old_pthread_sigmask(int, const sigset_t*, sigset_t*);
int tessera_old_dladdr1(const void*, Dl_info*, void**, int);
TESSERA_OLD(tessera_old_dlopen, dlopen, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_dlvsym, dlvsym, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_create, pthread_create, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_once, pthread_once, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_key_create, __pthread_key_create, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_mutexattr_init, pthread_mutexattr_init, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_mutexattr_destroy, pthread_mutexattr_destroy, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_mutexattr_setpshared, pthread_mutexattr_setpshared, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_mutexattr_setrobust, pthread_mutexattr_setrobust, TESSERA_GLIBC_ROBUST);
TESSERA_OLD(tessera_old_pthread_mutex_consistent, pthread_mutex_consistent, TESSERA_GLIBC_ROBUST);
TESSERA_OLD(tessera_old_pthread_mutex_timedlock, pthread_mutex_timedlock, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_mutex_trylock, pthread_mutex_trylock, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_pthread_sigmask, pthread_sigmask, TESSERA_GLIBC_BASE);
TESSERA_OLD(tessera_old_dladdr1, dladdr1, TESSERA_GLIBC_DLADDR1);

void* dlopen(const char* file, int mode) noexcept { return tessera_old_dlopen(file, mode); }
void* dlvsym(void* handle, const char* name, const char* version) noexcept {
  return tessera_old_dlvsym(handle, name, version);
}
int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                   void* arg) noexcept {
  return tessera_old_pthread_create(thread, attr, start, arg);
}
int pthread_once(pthread_once_t* once, void (*init)()) {
  return tessera_old_pthread_once(once, init);
}
int __pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) noexcept {
  return tessera_old_pthread_key_create(key, destructor);
}
int pthread_mutexattr_init(pthread_mutexattr_t* attr) noexcept {
  return tessera_old_pthread_mutexattr_init(attr);
}
int pthread_mutexattr_destroy(pthread_mutexattr_t* attr) noexcept {
  return tessera_old_pthread_mutexattr_destroy(attr);
}
int pthread_mutexattr_setpshared(pthread_mutexattr_t* attr, int shared) noexcept {
  return tessera_old_pthread_mutexattr_setpshared(attr, shared);
}
int pthread_mutexattr_setrobust(pthread_mutexattr_t* attr, int robust) noexcept {
  return tessera_old_pthread_mutexattr_setrobust(attr, robust);
}
int pthread_mutex_consistent(pthread_mutex_t* mutex) noexcept {
  return tessera_old_pthread_mutex_consistent(mutex);
}
int pthread_mutex_timedlock(pthread_mutex_t* mutex, const struct timespec* abstime) noexcept {
  return tessera_old_pthread_mutex_timedlock(mutex, abstime);
}
int pthread_mutex_trylock(pthread_mutex_t* mutex) noexcept {
  return tessera_old_pthread_mutex_trylock(mutex);
}
int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return tessera_old_pthread_sigmask(how, set, old);
}

// fstat became a real symbol in 2.33; before, the headers called __fxstat.
// The system call needs neither.
int fstat(int fd, struct stat* st) noexcept {
  return static_cast<int>(syscall(SYS_fstat, fd, st));
}

// Read by libstdc++ to skip atomic reference counts in single-threaded
// processes. Always "not single-threaded": correct, if slightly slower.
char __libc_single_threaded = 0;

// Only std::random_device uses these (the library never does); its object
// comes with libstdc++'s string instantiations. Kernel entropy, as glibc's.
// getentropy without noexcept, as unistd.h declares it (clang rejects a
// definition that adds it).
int getentropy(void* buffer, size_t length) {
  if (length > 256) {
    errno = EIO;
    return -1;
  }
  auto* p = static_cast<unsigned char*>(buffer);
  while (length > 0) {
    long n = syscall(SYS_getrandom, p, length, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    length -= static_cast<size_t>(n);
  }
  return 0;
}
uint32_t arc4random() noexcept {
  uint32_t v = 0;
  while (getentropy(&v, sizeof v) != 0) {
  }
  return v;
}

}  // extern "C"

namespace {

struct FindState {
  uintptr_t pc;
  bool found;
  uintptr_t start, end, eh_frame;
};

int FindObject(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<FindState*>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0, eh = 0;
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD) {
      lo = begin < lo ? begin : lo;
      hi = begin + ph.p_memsz > hi ? begin + ph.p_memsz : hi;
      contains |= s->pc >= begin && s->pc < begin + ph.p_memsz;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh = begin;
    }
  }
  if (!contains) return 0;
  *s = FindState{s->pc, true, lo, hi, eh};
  return 1;
}

}  // namespace

// The unwinder of the static libgcc_eh asks this for the exception tables
// of the object holding a code address (glibc 2.35). The same answer from
// dl_iterate_phdr, which every glibc has.
extern "C" int _dl_find_object(void* address, struct dl_find_object* result) noexcept {
  FindState s{reinterpret_cast<uintptr_t>(address), false, 0, 0, 0};
  dl_iterate_phdr(&FindObject, &s);
  if (!s.found) return -1;
  Dl_info info;
  struct link_map* map = nullptr;
  if (tessera_old_dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0) {
    map = nullptr;
  }
  *result = {};
  result->dlfo_map_start = reinterpret_cast<void*>(s.start);
  result->dlfo_map_end = reinterpret_cast<void*>(s.end);
  result->dlfo_link_map = map;
  result->dlfo_eh_frame = reinterpret_cast<void*>(s.eh_frame);
  return 0;
}

#endif  // __GLIBC__ && (x86-64 || aarch64)
