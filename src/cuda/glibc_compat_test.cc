// glibc_compat.cc's functions against glibc's own, from inside a shared
// library linked as libtessera-cuda.so is (static libstdc++ and libgcc, the
// replacements kept local by a version script), so its exceptions unwind
// through our _dl_find_object and its calls go to the old versions exactly
// as in the library. glibc_compat_test_main.cc runs it. No GTest: GTest's
// shared libstdc++ would bring the dynamic unwinder back.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

extern "C" uint32_t arc4random() noexcept;

namespace {

int failures = 0;
void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

[[gnu::noinline]] void Thrower(int v) {
  if (v > 0) throw std::runtime_error("unwound");
}

int once_runs = 0;
void OnceInit() { ++once_runs; }

}  // namespace

// 0 when every check passes; each failure is printed.
extern "C" int tessera_glibc_compat_selftest() {
  // Unwinding through our _dl_find_object (the static libgcc_eh asks it).
  bool caught = false;
  try {
    Thrower(1);
  } catch (const std::runtime_error& e) {
    caught = std::string_view(e.what()) == "unwound";
  }
  Expect(caught, "an exception thrown in this program is caught");

  // Same object bounds and exception tables as glibc's own, where it has one.
  using FindFn = int (*)(void*, dl_find_object*);
  auto real = reinterpret_cast<FindFn>(dlvsym(RTLD_NEXT, "_dl_find_object", "GLIBC_2.35"));
  void* probes[] = {reinterpret_cast<void*>(&Thrower), reinterpret_cast<void*>(&std::printf),
                    reinterpret_cast<void*>(&pthread_self)};
  for (void* p : probes) {
    dl_find_object ours{}, theirs{};
    Expect(_dl_find_object(p, &ours) == 0, "_dl_find_object finds a code address");
    Expect(ours.dlfo_eh_frame != nullptr, "_dl_find_object returns the exception tables");
    if (real != nullptr && real(p, &theirs) == 0) {
      Expect(ours.dlfo_map_start == theirs.dlfo_map_start, "map start as glibc's");
      Expect(ours.dlfo_map_end == theirs.dlfo_map_end, "map end as glibc's");
      Expect(ours.dlfo_eh_frame == theirs.dlfo_eh_frame, "eh_frame as glibc's");
      Expect(ours.dlfo_link_map == theirs.dlfo_link_map, "link map as glibc's");
    }
  }
  dl_find_object none{};
  Expect(_dl_find_object(nullptr, &none) == -1, "no object holds address 0");

  // The wrappers call the old versions of the real functions.
  pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, &OnceInit);
  pthread_once(&once, &OnceInit);
  Expect(once_runs == 1, "pthread_once runs its routine once");
  pthread_mutexattr_t attr;
  pthread_mutex_t mu;
  Expect(pthread_mutexattr_init(&attr) == 0 && pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) == 0 &&
             pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0 &&
             pthread_mutex_init(&mu, &attr) == 0 && pthread_mutexattr_destroy(&attr) == 0,
         "a robust shared mutex is set up");
  timespec deadline{};
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 1;
  Expect(pthread_mutex_timedlock(&mu, &deadline) == 0 && pthread_mutex_unlock(&mu) == 0,
         "pthread_mutex_timedlock locks a free mutex");
  Expect(pthread_mutex_trylock(&mu) == 0 && pthread_mutex_trylock(&mu) == EBUSY &&
             pthread_mutex_unlock(&mu) == 0,
         "pthread_mutex_trylock locks a free mutex and not a held one");

  char path[] = "/tmp/tessera-compat-XXXXXX";
  const int fd = mkstemp(path);
  Expect(fd >= 0 && write(fd, "12345", 5) == 5, "a temporary file is written");
  struct stat st{};
  Expect(fstat(fd, &st) == 0 && st.st_size == 5 && S_ISREG(st.st_mode), "fstat sees its size");
  Expect(fstat(-1, &st) == -1 && errno == EBADF, "fstat of a bad descriptor fails with EBADF");
  close(fd);
  unlink(path);

  uint32_t a = arc4random(), b = arc4random(), c = arc4random();
  Expect(!(a == b && b == c), "arc4random returns varying values");

  if (failures == 0) std::printf("glibc_compat: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
