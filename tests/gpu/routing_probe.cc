// gpu_routing_probe HOOK_LIST: every entry point libtessera-cuda.so hooks,
// however a program looks it up, must resolve into the library and not into
// libcuda. Run with the library preloaded and a memory limit (the library
// routes only while it enforces something):
//   LD_PRELOAD=libtessera-cuda.so TESSERA_GPU_MEM_LIMIT_MIB_0=1024
//   gpu_routing_probe src/cuda/hook_list.inc
// HOOK_LIST is read for its TESSERA_CU_HOOK names; each base name (without
// _v2 / _ptsz) is looked up through
//   cuGetProcAddress_v2 and cuGetProcAddress (v1, found with dlsym) at CUDA
//     versions 12000, 12090, 13000 with the default, legacy-stream and
//     per-thread-stream flags,
//   cudaGetDriverEntryPointByVersion at the same versions and flags,
//   cudaGetDriverEntryPoint with each flag,
// and every exact hooked name through dlsym(RTLD_DEFAULT / RTLD_NEXT / the
// handle of libcuda.so.1). A pointer is checked with dladdr(). A name the
// driver does not know at that version is reported, not failed. Exit 0 when
// nothing resolved outside the library, 1 otherwise, 2 on a setup error.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "result_line.h"

namespace {

using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

struct Tally {
  int in_library = 0;
  int elsewhere = 0;
  int not_found = 0;
  std::set<std::string> unknown;  // "how name@version" that found nothing
};

std::string Where(void* p) {
  Dl_info info{};
  if (p == nullptr || dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash != nullptr ? slash + 1 : info.dli_fname;
}

bool InLibrary(void* p) { return Where(p).find("libtessera-cuda") != std::string::npos; }

// TESSERA_CU_HOOK names in the file, in order.
std::vector<std::string> HookedNames(const char* path) {
  std::vector<std::string> names;
  std::ifstream in(path);
  const std::string tag = "TESSERA_CU_HOOK(";
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, tag.size(), tag) != 0) continue;
    const size_t end = line.find(',', tag.size());
    if (end != std::string::npos) names.push_back(line.substr(tag.size(), end - tag.size()));
  }
  return names;
}

std::string BaseName(std::string n) {
  for (const char* suffix : {"_ptsz", "_v2"}) {
    const size_t len = std::strlen(suffix);
    if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0) n.resize(n.size() - len);
  }
  return n;
}

void Record(Tally& t, const char* how, const std::string& name, int version, unsigned long long flags,
            bool found, void* p) {
  if (!found || p == nullptr) {
    ++t.not_found;
    t.unknown.insert(std::string(how) + " " + name + (version != 0 ? "@" + std::to_string(version) : ""));
    return;
  }
  if (InLibrary(p)) {
    ++t.in_library;
    return;
  }
  ++t.elsewhere;
  std::printf("NOT ROUTED: %s(%s, version %d, flags %llu) -> %s\n", how, name.c_str(), version,
              flags, Where(p).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s HOOK_LIST (src/cuda/hook_list.inc)\n", argv[0]);
    return 2;
  }
  std::vector<std::string> hooked = HookedNames(argv[1]);
  if (hooked.empty()) {
    std::fprintf(stderr, "no TESSERA_CU_HOOK names in %s\n", argv[1]);
    return 2;
  }
  std::vector<std::string> bases;
  for (const std::string& n : hooked) {
    const std::string b = BaseName(n);
    bool seen = false;
    for (const std::string& x : bases) seen = seen || x == b;
    if (!seen) bases.push_back(b);
  }
  if (cuInit(0) != CUDA_SUCCESS || cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "cannot initialize CUDA\n");
    return 2;
  }
  int driver = 0;
  cuDriverGetVersion(&driver);

  Tally drv, rt, sym;
  // The v1 entry point as a program that asks for it by name gets it.
  auto v1 = reinterpret_cast<GetProcV1>(dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
  if (v1 == nullptr) {
    std::fprintf(stderr, "dlsym(cuGetProcAddress) returned NULL\n");
    return 2;
  }
  Record(sym, "dlsym", "cuGetProcAddress", 0, 0, true, reinterpret_cast<void*>(v1));

  const int versions[] = {12000, 12090, 13000};
  const cuuint64_t cu_flags[] = {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
  const unsigned long long rt_flags[] = {cudaEnableDefault, cudaEnableLegacyStream,
                                         cudaEnablePerThreadDefaultStream};
  for (const std::string& name : bases) {
    for (int version : versions) {
      for (cuuint64_t f : cu_flags) {
        void* p = nullptr;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = cuGetProcAddress_v2(name.c_str(), &p, version, f, &st);
        Record(drv, "cuGetProcAddress_v2", name, version, f,
               r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS, p);
        p = nullptr;
        r = v1(name.c_str(), &p, version, f);
        Record(drv, "cuGetProcAddress", name, version, f, r == CUDA_SUCCESS, p);
      }
      for (unsigned long long f : rt_flags) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
        cudaError_t e = cudaGetDriverEntryPointByVersion(name.c_str(), &p, version, f, &st);
        cudaGetLastError();
        Record(rt, "cudaGetDriverEntryPointByVersion", name, version, f,
               e == cudaSuccess && st == cudaDriverEntryPointSuccess, p);
      }
    }
    for (unsigned long long f : rt_flags) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      cudaError_t e = cudaGetDriverEntryPoint(name.c_str(), &p, f, &st);
#pragma GCC diagnostic pop
      cudaGetLastError();
      Record(rt, "cudaGetDriverEntryPoint", name, 0, f,
             e == cudaSuccess && st == cudaDriverEntryPointSuccess, p);
    }
  }

  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (libcuda == nullptr) libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  for (const std::string& name : hooked) {
    Record(sym, "dlsym(RTLD_DEFAULT)", name, 0, 0, true, dlsym(RTLD_DEFAULT, name.c_str()));
    Record(sym, "dlsym(RTLD_NEXT)", name, 0, 0, true, dlsym(RTLD_NEXT, name.c_str()));
    if (libcuda != nullptr) {
      Record(sym, "dlsym(libcuda)", name, 0, 0, true, dlsym(libcuda, name.c_str()));
    }
  }

  for (const Tally* t : {&drv, &rt, &sym}) {
    for (const std::string& u : t->unknown) std::printf("not found: %s\n", u.c_str());
  }
  std::printf("driver %d; %zu hooked names (%zu base names)\n", driver, hooked.size(), bases.size());
  std::printf("cuGetProcAddress: %d in library, %d elsewhere, %d not found\n", drv.in_library,
              drv.elsewhere, drv.not_found);
  std::printf("cudaGetDriverEntryPoint*: %d in library, %d elsewhere, %d not found\n", rt.in_library,
              rt.elsewhere, rt.not_found);
  std::printf("dlsym: %d in library, %d elsewhere, %d NULL\n", sym.in_library, sym.elsewhere,
              sym.not_found);
  ResultLine r;
  r.Add("driver_version", driver);
  r.Add("hooked_names", static_cast<double>(hooked.size()));
  r.Add("base_names", static_cast<double>(bases.size()));
  r.Add("getproc_in_library", drv.in_library);
  r.Add("getproc_elsewhere", drv.elsewhere);
  r.Add("getproc_not_found", drv.not_found);
  r.Add("runtime_in_library", rt.in_library);
  r.Add("runtime_elsewhere", rt.elsewhere);
  r.Add("runtime_not_found", rt.not_found);
  r.Add("dlsym_in_library", sym.in_library);
  r.Add("dlsym_elsewhere", sym.elsewhere);
  r.Add("dlsym_null", sym.not_found);
  r.Print();
  const bool routed_any = drv.in_library > 0 && rt.in_library > 0 && sym.in_library > 0;
  if (!routed_any) std::printf("nothing resolved into libtessera-cuda.so: is it preloaded?\n");
  return routed_any && drv.elsewhere + rt.elsewhere + sym.elsewhere == 0 ? 0 : 1;
}
