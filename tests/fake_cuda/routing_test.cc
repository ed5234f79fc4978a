// Symbol routing, the memory views, fork and clone, and long random
// sequences; with libtessera-cuda.so preloaded over the fake driver and the
// limits TESSERA_GPU_MEM_LIMIT_MIB_0=64, _1=32 (see CMakeLists.txt). Run
// twice: once over a driver whose cuGetProcAddress hands out its exported
// symbols, once over one that hands out internal entry points
// (FAKE_CUDA_PROC_ADDRESS=internal), as a real driver may.
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <dlfcn.h>
#include <nvml.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fake_cuda/fake_control.h"
#include "fake_cuda/test_util.h"

extern "C" void* fakecuda_LookupNextMarker();

namespace {

using fake_test::kMiB;
using fake_test::Used0;

class RoutingTest : public fake_test::DeviceTest {};

bool InternalEntryPoints() {
  const char* mode = std::getenv("FAKE_CUDA_PROC_ADDRESS");
  return mode != nullptr && std::string(mode) == "internal";
}

// Every hooked driver entry point by the base name cuGetProcAddress takes:
// hook_list.inc's exported names less their ABI suffix (_v2, _ptsz, ...).
std::set<std::string> HookedBaseNames() {
  std::set<std::string> bases;
  for (std::string n : {
#define TESSERA_CU_HOOK(name, params, args) #name,
#define TESSERA_NVML_HOOK(name, params, args)
#define TESSERA_CU_CALL(name)
#define TESSERA_NVML_CALL(name)
#include "cuda/hook_list.inc"
#undef TESSERA_CU_HOOK
#undef TESSERA_NVML_HOOK
#undef TESSERA_CU_CALL
#undef TESSERA_NVML_CALL
       }) {
    for (const std::string stream : {"_ptsz", "_ptds"}) {
      if (n.size() > stream.size() && n.ends_with(stream)) n.resize(n.size() - stream.size());
    }
    const size_t v = n.rfind("_v");
    if (v != std::string::npos && v + 2 < n.size() &&
        n.find_first_not_of("0123456789", v + 2) == std::string::npos) {
      n.resize(v);
    }
    bases.insert(n);
  }
  return bases;
}

std::string Request(const std::string& base, int version, cuuint64_t flags) {
  return base + " at " + std::to_string(version) + ", flags " + std::to_string(flags);
}

void* Hook(const char* name) {
  // Our exported symbol: the preloaded library is first in the global scope.
  void* self = dlopen(nullptr, RTLD_NOW);
  return dlsym(self, name);
}

TEST_F(RoutingTest, ProcAddressReturnsTheHookWithTheDriversAbi) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st),
            CUDA_SUCCESS);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
  Dl_info info{};
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_STREQ(info.dli_sname, "cuMemAlloc_v2");
  EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);

  ASSERT_EQ(cuGetProcAddress_v2("cuMemAllocAsync", &p, 12000,
                                CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr),
            CUDA_SUCCESS);  // NULL symbolStatus tolerated
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_STREQ(info.dli_sname, "cuMemAllocAsync_ptsz");

  // An old cudaVersion gets the legacy 32-bit ABI, hooked as such.
  ASSERT_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 3000, 0, nullptr), CUDA_SUCCESS);
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_STREQ(info.dli_sname, "cuMemAlloc");
  EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);

  // Asked for itself, the lookup stays hooked.
  ASSERT_EQ(cuGetProcAddress("cuGetProcAddress", &p, 12000, 0), CUDA_SUCCESS);
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_STREQ(info.dli_sname, "cuGetProcAddress_v2");
  EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);

  // What we do not hook is the driver's own function.
  ASSERT_EQ(cuGetProcAddress_v2("cuDriverGetVersion", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  ASSERT_TRUE(dladdr(p, &info));
  EXPECT_EQ(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);

  // Unknown: success and NULL; too new: the driver's error.
  ASSERT_EQ(cuGetProcAddress_v2("cuNoSuchThing", &p, 12000, 0, &st), CUDA_SUCCESS);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 99000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
}

// Whatever address the driver hands out, cuGetProcAddress(_v2) gives our
// hook of the ABI the driver chose (the fake says which), for every hooked
// name, cudaVersion and stream flag.
TEST_F(RoutingTest, EveryHookedNameResolvesToTheHookOfTheDriversAbi) {
  const std::set<std::string> bases = HookedBaseNames();
  ASSERT_GT(bases.size(), 20u);
  int routed = 0;
  for (const std::string& base : bases) {
    for (int version : {3000, 11030, 12000, 12090, 13000}) {
      for (cuuint64_t flags : {cuuint64_t{CU_GET_PROC_ADDRESS_DEFAULT},
                               cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM},
                               cuuint64_t{CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}}) {
        const char* abi = nullptr;
        const CUresult want =
            tessera_fake_cuda_proc_address_abi(base.c_str(), version, flags, &abi);
        for (bool v2 : {false, true}) {
          SCOPED_TRACE(Request(base, version, flags) + (v2 ? " through _v2" : ""));
          void* p = nullptr;
          CUdriverProcAddressQueryResult st{};
          const CUresult r = v2 ? cuGetProcAddress_v2(base.c_str(), &p, version, flags, &st)
                                : cuGetProcAddress(base.c_str(), &p, version, flags);
          ASSERT_EQ(r, want);
          if (r != CUDA_SUCCESS) continue;
          if (abi == nullptr) {
            EXPECT_EQ(p, nullptr);
            continue;
          }
          Dl_info info{};
          ASSERT_TRUE(dladdr(p, &info));
          EXPECT_STREQ(info.dli_sname, abi);
          EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);
          ++routed;
        }
      }
    }
  }
  EXPECT_GT(routed, 300);
}

// Callers ask by base name; one that asks by an exported name where the
// driver answers gets our hook of that very ABI.
TEST_F(RoutingTest, AnExportedNameIsItsOwnAbi) {
  for (const char* name : {"cuMemAlloc_v2", "cuMemAllocAsync_ptsz", "cuGetProcAddress_v2"}) {
    void* p = nullptr;
    ASSERT_EQ(cuGetProcAddress_v2(name, &p, 12000, 0, nullptr), CUDA_SUCCESS) << name;
    Dl_info info{};
    ASSERT_TRUE(dladdr(p, &info)) << name;
    EXPECT_STREQ(info.dli_sname, name);
    EXPECT_NE(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos) << name;
  }
}

// The mode is on where the suite says so: the driver's pointer for a name we
// do not hook is then not its exported symbol, and still works.
TEST_F(RoutingTest, TheDriverHandsOutInternalEntryPointsInThatMode) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libcuda, nullptr);
  void* p = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuDriverGetVersion", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p != dlsym(libcuda, "cuDriverGetVersion"), InternalEntryPoints());
  int version = 0;
  ASSERT_EQ(reinterpret_cast<decltype(&cuDriverGetVersion)>(p)(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
}

// cuGetProcAddress(name) as a function of type F (nullptr on failure).
template <typename F>
F ProcAddress(const char* name, int version, cuuint64_t flags) {
  void* p = nullptr;
  EXPECT_EQ(cuGetProcAddress(name, &p, version, flags), CUDA_SUCCESS) << name;
  return reinterpret_cast<F>(p);
}

// The runtime's paths (cudaMalloc, cudaMallocAsync, cudaMemGetInfo) and
// PyTorch's expandable segments (cuMemCreate), through the pointers
// cuGetProcAddress gives, at every cudaVersion and stream flag.
TEST_F(RoutingTest, AllocationsThroughProcAddressAreRefusedAtTheLimit) {
  CUmemoryPool pool;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  for (int v : {11030, 12000, 12090, 13000}) {
    for (cuuint64_t f : {cuuint64_t{CU_GET_PROC_ADDRESS_DEFAULT},
                         cuuint64_t{CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}}) {
      SCOPED_TRACE(Request("", v, f));
      auto alloc = ProcAddress<decltype(&cuMemAlloc_v2)>("cuMemAlloc", v, f);
      auto free_mem = ProcAddress<decltype(&cuMemFree_v2)>("cuMemFree", v, f);
      auto info = ProcAddress<decltype(&cuMemGetInfo_v2)>("cuMemGetInfo", v, f);
      auto alloc_async = ProcAddress<decltype(&cuMemAllocAsync)>("cuMemAllocAsync", v, f);
      auto free_async = ProcAddress<decltype(&cuMemFreeAsync)>("cuMemFreeAsync", v, f);
      auto create = ProcAddress<decltype(&cuMemCreate)>("cuMemCreate", v, f);
      auto release = ProcAddress<decltype(&cuMemRelease)>("cuMemRelease", v, f);
      ASSERT_TRUE(alloc && free_mem && info && alloc_async && free_async && create && release);

      CUdeviceptr a = 0, b = 0;
      ASSERT_EQ(alloc(&a, 64 * kMiB), CUDA_SUCCESS);
      EXPECT_EQ(alloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
      size_t free_b = 1, total = 0;
      ASSERT_EQ(info(&free_b, &total), CUDA_SUCCESS);
      EXPECT_EQ(total, 64 * kMiB);
      EXPECT_EQ(free_b, 0u);
      ASSERT_EQ(free_mem(a), CUDA_SUCCESS);

      ASSERT_EQ(alloc_async(&a, 64 * kMiB, nullptr), CUDA_SUCCESS);
      EXPECT_EQ(alloc_async(&b, 1, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
      ASSERT_EQ(free_async(a, nullptr), CUDA_SUCCESS);
      ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);

      CUmemGenericAllocationHandle h = 0, h2 = 0;
      ASSERT_EQ(create(&h, 64 * kMiB, &prop, 0), CUDA_SUCCESS);
      EXPECT_EQ(create(&h2, 2 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
      ASSERT_EQ(release(h), CUDA_SUCCESS);
      ASSERT_EQ(Used0(), 0u);
    }
  }
}

TEST_F(RoutingTest, CallsThroughProcAddressAreLimited) {
  void* p = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  auto alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(p);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(alloc(&a, 64 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(alloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
}

TEST_F(RoutingTest, AMemoryLimitAloneLeavesLaunchesUngated) {
  const CUfunction k = reinterpret_cast<CUfunction>(0x3000);
  void* p = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, nullptr), CUDA_SUCCESS);
  auto launch = reinterpret_cast<decltype(&cuLaunchKernel)>(p);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(launch(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  }
  EXPECT_EQ(tessera_fake_cuda_events_recorded(), 0u);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
}

TEST_F(RoutingTest, DlsymHandsOutHooksWhateverTheHandle) {
  void* hook = Hook("cuMemAlloc_v2");
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libcuda, nullptr);
  EXPECT_EQ(dlsym(libcuda, "cuMemAlloc_v2"), hook);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), hook);
  EXPECT_EQ(dlsym(RTLD_NEXT, "cuMemAlloc_v2"), hook);  // no bypass through RTLD_NEXT
  EXPECT_EQ(dlsym(libcuda, "cuNoSuchThing"), nullptr);
  EXPECT_NE(dlerror(), nullptr);
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(nvml, nullptr);
  EXPECT_EQ(dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2"), Hook("nvmlDeviceGetMemoryInfo_v2"));
  // Names we do not hook are the real dlsym's answer.
  Dl_info info{};
  void* version = dlsym(libcuda, "cuDriverGetVersion");
  ASSERT_TRUE(dladdr(version, &info));
  EXPECT_EQ(std::string(info.dli_fname).find("libtessera-cuda"), std::string::npos);
}

TEST_F(RoutingTest, RtldNextKeepsTheCallersMeaning) {
  // Asked from inside the fake driver, RTLD_NEXT must find the definition in
  // the library after the driver (fake NVML: 2), not the driver's own (1).
  int* marker = static_cast<int*>(fakecuda_LookupNextMarker());
  ASSERT_NE(marker, nullptr);
  EXPECT_EQ(*marker, 2);
}

TEST_F(RoutingTest, EveryMemoryViewAgrees) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 24 * kMiB), CUDA_SUCCESS);
  size_t free_b = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, 64 * kMiB);
  EXPECT_EQ(free_b, 40 * kMiB);
  unsigned int free32 = 0, total32 = 0;
  ASSERT_EQ(cuMemGetInfo(&free32, &total32), CUDA_SUCCESS);
  EXPECT_EQ(free32, 40 * kMiB);
  EXPECT_EQ(total32, 64 * kMiB);
  size_t dev_total = 0;
  ASSERT_EQ(cuDeviceTotalMem_v2(&dev_total, 0), CUDA_SUCCESS);
  EXPECT_EQ(dev_total, 64 * kMiB);
  ASSERT_EQ(cuDeviceTotalMem_v2(&dev_total, 1), CUDA_SUCCESS);
  EXPECT_EQ(dev_total, 32 * kMiB);

  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t dev;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &dev), NVML_SUCCESS);
  nvmlMemory_t m{};
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(dev, &m), NVML_SUCCESS);
  EXPECT_EQ(m.total, 64 * kMiB);
  EXPECT_EQ(m.free, 40 * kMiB);
  EXPECT_EQ(m.used, 24 * kMiB);
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(nvmlDeviceGetMemoryInfo_v2(dev, &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, 64 * kMiB);
  EXPECT_EQ(m2.free, 40 * kMiB);
  EXPECT_EQ(m2.used + m2.reserved, 24 * kMiB);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
}

TEST_F(RoutingTest, OverTheLimitFreeIsZeroNotAnError) {
  // Graph memory is charged after the fact and may pass the limit.
  CUgraph g;
  ASSERT_EQ(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.bytesize = 100 * kMiB;
  CUgraphNode node;
  ASSERT_EQ(cuGraphAddMemAllocNode(&node, g, nullptr, 0, &params), CUDA_SUCCESS);
  CUgraphExec exec;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch_ptsz(exec, nullptr), CUDA_SUCCESS);
  size_t free_b = 1, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_b, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_b, 0u);
  EXPECT_EQ(total, 64 * kMiB);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
  ASSERT_EQ(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(RoutingTest, ForkedChildKeepsTheLimitAndItsOwnSlot) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 40 * kMiB), CUDA_SUCCESS);
  pid_t pid = fork();
  if (pid == 0) {
    CUdeviceptr b = 0, c = 0;
    int rc = 0;
    if (cuMemAlloc_v2(&b, 30 * kMiB) != CUDA_ERROR_OUT_OF_MEMORY) rc |= 1;
    if (cuMemAlloc_v2(&c, 24 * kMiB) != CUDA_SUCCESS) rc |= 2;
    if (cuMemFree_v2(a) == CUDA_SUCCESS && Used0() != 64 * kMiB) rc |= 4;  // parent's: not ours
    exit(rc);  // exit handlers give back the child's 24 MiB, not the parent's
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_EQ(Used0(), 40 * kMiB);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

int CloneChild(void*) {
  CUdeviceptr b = 0, c = 0;
  if (cuMemAlloc_v2(&b, 24 * kMiB) != CUDA_SUCCESS) return 1;
  if (cuMemAlloc_v2(&c, 1 * kMiB) != CUDA_ERROR_OUT_OF_MEMORY) return 2;
  return 0;  // returns through _exit: no exit handlers, the slot stays
}

TEST_F(RoutingTest, RawCloneChildGetsItsOwnSlot) {
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAlloc_v2(&a, 40 * kMiB), CUDA_SUCCESS);
  std::vector<char> stack(256 * 1024);
  pid_t pid = clone(&CloneChild, stack.data() + stack.size(), SIGCHLD, nullptr);
  ASSERT_GT(pid, 0);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  // The dead child's 24 MiB is reaped at the next refusal; the parent's
  // slot was not touched by the child.
  CUdeviceptr b = 0;
  EXPECT_EQ(cuMemAlloc_v2(&b, 24 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 64 * kMiB);
  EXPECT_EQ(cuMemFree_v2(b), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(a), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

TEST_F(RoutingTest, ThousandsOfRandomAllocFreeNeverUnderflow) {
  std::mt19937_64 rng(42);
  struct Live {
    int kind;
    uint64_t key;
  };
  std::vector<Live> live;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || rng() % 5 < 3) {
      int kind = static_cast<int>(rng() % 3);
      uint64_t n = 1 + rng() % (6 * kMiB);
      CUdeviceptr p = 0;
      CUmemGenericAllocationHandle h = 0;
      CUresult r = kind == 0   ? cuMemAlloc_v2(&p, n)
                   : kind == 1 ? cuMemAllocAsync(&p, n, nullptr)
                               : cuMemCreate(&h, (1 + n / (2 * kMiB)) * 2 * kMiB, &prop, 0);
      ASSERT_TRUE(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY) << r;
      if (r == CUDA_SUCCESS) live.push_back({kind, kind == 2 ? h : p});
    } else {
      size_t k = rng() % live.size();
      Live l = live[k];
      live.erase(live.begin() + k);
      CUresult r = l.kind == 0   ? cuMemFree_v2(l.key)
                   : l.kind == 1 ? cuMemFreeAsync(l.key, nullptr)
                                 : cuMemRelease(l.key);
      ASSERT_EQ(r, CUDA_SUCCESS);
      // A stray second free is the driver's error and takes nothing.
      if (l.kind == 0) {
        ASSERT_NE(cuMemFree_v2(l.key), CUDA_SUCCESS);
      }
    }
    ASSERT_LE(Used0(), 64 * kMiB);
  }
  for (const Live& l : live) {
    ASSERT_EQ(l.kind == 0 ? cuMemFree_v2(l.key)
              : l.kind == 1 ? cuMemFreeAsync(l.key, nullptr)
                            : cuMemRelease(l.key),
              CUDA_SUCCESS);
  }
  CUmemoryPool pool;
  ASSERT_EQ(cuDeviceGetMemPool(&pool, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(Used0(), 0u);
}

}  // namespace
