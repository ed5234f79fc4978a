// Real-GPU checks of libtessera-cuda.so, one allocation path per run:
//   gpu_alloc_paths PATH     (PATH: linear pitch managed async pool vmm array
//                             mipmap graph runtime runtime_async meminfo)
// Run with the library preloaded and TESSERA_GPU_MEM_LIMIT_MIB_0 set (see
// CMakeLists.txt). Each path: fill up to the limit, check the next request is
// refused with out-of-memory (not a crash), free, check it succeeds again.
// Exit 0 on success; a message and exit 1 on failure.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "result_line.h"
#include "share_view.h"

namespace {

int g_failures = 0;

#define CHECK(cond, ...)                                             \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                             \
      std::fprintf(stderr, "\n");                                    \
      ++g_failures;                                                  \
    }                                                                \
  } while (0)

// Allocates `block` at a time with `alloc` until refused; checks the refusal
// is out-of-memory, that the charged bytes stayed within the limit and got
// close to it, frees everything, and checks a new allocation succeeds.
void FillAndRecover(const char* path, size_t block, const std::function<CUresult(void**)>& alloc,
                    const std::function<CUresult(void*)>& release) {
  const size_t limit = LimitBytes();
  const size_t base = Used();
  std::vector<void*> held;
  CUresult r;
  void* h = nullptr;
  while ((r = alloc(&h)) == CUDA_SUCCESS) {
    held.push_back(h);
    CHECK(Used() <= limit, "%s: used %zu > limit %zu", path, Used(), limit);
    if (held.size() > 100000) break;
  }
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "%s: refusal was %d, not out of memory", path, r);
  CHECK(Used() + block + base >= limit - block, "%s: stopped early at %zu of %zu", path, Used(),
        limit);
  for (void* p : held) CHECK(release(p) == CUDA_SUCCESS, "%s: free failed", path);
  CHECK(alloc(&h) == CUDA_SUCCESS, "%s: no recovery after freeing", path);
  release(h);
  std::printf("%s: %zu blocks of %zu MiB before refusal; limit %zu MiB\n", path, held.size(),
              block / kMiB, limit / kMiB);
  ResultLine line;
  line.Add("blocks", static_cast<double>(held.size()));
  line.Add("block_mib", static_cast<double>(block / kMiB));
  line.Add("limit_mib", static_cast<double>(limit / kMiB));
  line.Add("base_mib", static_cast<double>(base / kMiB));
  line.Add("refusal_code", static_cast<double>(r));
  line.Print();
}

CUdeviceptr P(void* p) { return reinterpret_cast<CUdeviceptr>(p); }
void* V(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || LimitBytes() == 0) {
    std::fprintf(stderr, "usage: TESSERA_GPU_MEM_LIMIT_MIB_0=N %s PATH\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  cudaSetDevice(0);
  cudaFree(nullptr);  // creates the primary context
  const size_t block = 64 * kMiB;
  if (path == "context") {
    // Holds its context for run.sh's context_footprint, which reads what
    // the driver really took for it (nvidia-smi) beside what the share was
    // charged for it.
    std::printf("context charged to the share: %zu MiB\n", Used() / kMiB);
    ResultLine line;
    line.Add("charged_mib", static_cast<double>(Used() / kMiB));
    line.Print();
    std::printf("READY\n");
    std::fflush(stdout);
    sleep(4);
    return 0;
  }
  if (path == "linear") {
    FillAndRecover("cuMemAlloc", block,
                   [&](void** h) { CUdeviceptr p; CUresult r = cuMemAlloc(&p, block); *h = V(p); return r; },
                   [](void* h) { return cuMemFree(P(h)); });
  } else if (path == "pitch") {
    FillAndRecover("cuMemAllocPitch", 16 * kMiB, [&](void** h) {
      CUdeviceptr p; size_t pitch;
      CUresult r = cuMemAllocPitch(&p, &pitch, 4000, 4096, 4);  // padded rows
      *h = V(p); return r; }, [](void* h) { return cuMemFree(P(h)); });
  } else if (path == "managed") {
    FillAndRecover("cuMemAllocManaged", block, [&](void** h) {
      CUdeviceptr p; CUresult r = cuMemAllocManaged(&p, block, CU_MEM_ATTACH_GLOBAL);
      *h = V(p); return r; }, [](void* h) { return cuMemFree(P(h)); });
  } else if (path == "async" || path == "pool") {
    CUmemoryPool pool;
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    if (path == "async") cuDeviceGetMemPool(&pool, 0); else cuMemPoolCreate(&pool, &props);
    FillAndRecover(path == "async" ? "cuMemAllocAsync" : "cuMemAllocFromPoolAsync", block,
        [&](void** h) { CUdeviceptr p;
          CUresult r = path == "async" ? cuMemAllocAsync(&p, block, nullptr)
                                       : cuMemAllocFromPoolAsync(&p, block, pool, nullptr);
          *h = V(p); return r; },
        [&](void* h) { CUresult r = cuMemFreeAsync(P(h), nullptr); cuStreamSynchronize(nullptr);
          cuMemPoolTrimTo(pool, 0); return r; });
  } else if (path == "vmm") {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    FillAndRecover("cuMemCreate", block, [&](void** h) {
      CUmemGenericAllocationHandle x; CUresult r = cuMemCreate(&x, block, &prop, 0);
      *h = reinterpret_cast<void*>(x); return r; },
      [](void* h) { return cuMemRelease(reinterpret_cast<CUmemGenericAllocationHandle>(h)); });
    // Host-located handles are not the GPU's: never refused by the limit.
    prop.location = {CU_MEM_LOCATION_TYPE_HOST, 0};
    CUmemGenericAllocationHandle host;
    CUresult r = cuMemCreate(&host, LimitBytes() + block, &prop, 0);
    CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_DEVICE,
          "host-located cuMemCreate refused: %d", r);
    if (r == CUDA_SUCCESS) cuMemRelease(host);
  } else if (path == "array" || path == "mipmap") {
    CUDA_ARRAY3D_DESCRIPTOR d{4096, 4096, 0, CU_AD_FORMAT_FLOAT, 1, 0};  // 64 MiB
    FillAndRecover(path == "array" ? "cuArray3DCreate" : "cuMipmappedArrayCreate", block,
        [&](void** h) {
          if (path == "array") { CUarray a; CUresult r = cuArray3DCreate(&a, &d); *h = a; return r; }
          CUmipmappedArray m; CUresult r = cuMipmappedArrayCreate(&m, &d, 4); *h = m; return r; },
        [&](void* h) { return path == "array" ? cuArrayDestroy(static_cast<CUarray>(h))
                                              : cuMipmappedArrayDestroy(static_cast<CUmipmappedArray>(h)); });
  } else if (path == "graph") {
    // Graph memory is charged after launch: a graph taking 3/4 of the share
    // leaves the rest to cuMemAlloc.
    CUgraph g; CUgraphNode node; CUgraphExec exec;
    cuGraphCreate(&g, 0);
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    params.bytesize = LimitBytes() / 4 * 3;
    CHECK(cuGraphAddMemAllocNode(&node, g, nullptr, 0, &params) == CUDA_SUCCESS, "alloc node");
    CUgraphNode free_node;
    CHECK(cuGraphAddMemFreeNode(&free_node, g, &node, 1, params.dptr) == CUDA_SUCCESS, "free node");
    CHECK(cuGraphInstantiate(&exec, g, 0) == CUDA_SUCCESS, "instantiate");
    CHECK(cuGraphLaunch(exec, nullptr) == CUDA_SUCCESS, "launch");
    cuStreamSynchronize(nullptr);
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, LimitBytes() / 2) == CUDA_ERROR_OUT_OF_MEMORY, "graph memory not counted");
    cuGraphExecDestroy(exec);
    cuDeviceGraphMemTrim(0);
    CHECK(cuMemAlloc(&p, LimitBytes() / 2) == CUDA_SUCCESS, "no recovery after trim");
    cuMemFree(p);
  } else if (path == "runtime" || path == "runtime_async") {
    // The runtime resolves the driver through cuGetProcAddress: the routing path.
    FillAndRecover(path == "runtime" ? "cudaMalloc" : "cudaMallocAsync", block,
        [&](void** h) { cudaError_t e = path == "runtime" ? cudaMalloc(h, block)
                                                          : cudaMallocAsync(h, block, nullptr);
          cudaGetLastError();
          return e == cudaSuccess ? CUDA_SUCCESS
                 : e == cudaErrorMemoryAllocation ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN; },
        [&](void* h) { cudaError_t e = path == "runtime" ? cudaFree(h) : cudaFreeAsync(h, nullptr);
          if (path != "runtime") { cudaStreamSynchronize(nullptr); cudaMemPool_t mp;
            cudaDeviceGetDefaultMemPool(&mp, 0); cudaMemPoolTrimTo(mp, 0); }
          return e == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN; });
  } else if (path == "meminfo") {
    size_t f = 0, t = 0, dev_total = 0;
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess, "cudaMemGetInfo failed");
    CHECK(t == LimitBytes(), "cudaMemGetInfo total %zu, limit %zu", t, LimitBytes());
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    CHECK(prop.totalGlobalMem == LimitBytes(), "totalGlobalMem %zu", prop.totalGlobalMem);
    cuDeviceTotalMem(&dev_total, 0);
    CHECK(dev_total == LimitBytes(), "cuDeviceTotalMem %zu", dev_total);
    ResultLine line;
    line.Add("limit_mib", static_cast<double>(LimitBytes() / kMiB));
    line.Add("meminfo_total_mib", static_cast<double>(t / kMiB));
    line.Add("meminfo_free_mib", static_cast<double>(f / kMiB));
    line.Add("total_global_mem_mib", static_cast<double>(prop.totalGlobalMem / kMiB));
    line.Add("device_total_mem_mib", static_cast<double>(dev_total / kMiB));
    line.Print();
  } else {
    std::fprintf(stderr, "unknown path %s\n", path.c_str());
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}
