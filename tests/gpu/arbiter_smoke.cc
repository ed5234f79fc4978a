// gpu_arbiter without a GPU (CTest unit): two regions as the library would
// leave them, 30 % and 70 % shares; container a launches (its `launches`
// counter moves), b does not. gpu_arbiter must write a heartbeat into both,
// grant a the whole GPU (work conservation, no ceiling) and b nothing, then
// stop when its stdin closes and print its RESULT line.
//   gpu_arbiter_smoke PATH_OF_GPU_ARBITER
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "region/region.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpu_arbiter_smoke PATH_OF_GPU_ARBITER\n");
    return 2;
  }
  char tmpl[] = "/tmp/tessera-gpu-arbiter-smoke.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 2;
  const std::string root = tmpl, a = root + "/a", b = root + "/b";
  std::filesystem::create_directories(a);
  std::filesystem::create_directories(b);
  auto ra = tessera::region::Region::OpenDir(a);
  auto rb = tessera::region::Region::OpenDir(b);
  if (!ra.ok() || !rb.ok()) {
    std::fprintf(stderr, "FAIL: cannot create the regions\n");
    return 1;
  }
  tessera::region::Layout& la = *ra.value().layout();
  tessera::region::Layout& lb = *rb.value().layout();
  const std::string cmd = std::string("exec ") + argv[1] + " --interval-ms 5 --trace a," + a +
                          ",0,30,0,share,normal b," + b + ",0,70,0,share,normal > " + root + "/out";
  FILE* arbiter = popen(cmd.c_str(), "w");  // its stdin: closing it stops it
  if (arbiter == nullptr) return 2;
  bool granted = false;
  for (int i = 0; i < 1000 && !granted; ++i) {  // at most ~2 s
    la.compute[0].launches.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    granted = la.arbiter.heartbeat_us.load() != 0 && lb.arbiter.heartbeat_us.load() != 0 &&
              la.compute[0].grant_ppm.load() == 1'000'000 && lb.compute[0].grant_ppm.load() == 0;
  }
  const int rc = pclose(arbiter);
  std::string out;
  if (FILE* f = std::fopen((root + "/out").c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
    std::fclose(f);
  }
  std::printf("%s", out.c_str());
  std::filesystem::remove_all(root);
  if (!granted) {
    std::printf("FAIL: no heartbeat, or grants a=%u b=%u (want 1000000 and 0)\n", la.compute[0].grant_ppm.load(),
                lb.compute[0].grant_ppm.load());
    return 1;
  }
  if (rc != 0 || out.find("READY") == std::string::npos || out.find("RESULT {\"a_grant_ppm\"") == std::string::npos ||
      out.find("\"slots_seen\": 2") == std::string::npos) {
    std::printf("FAIL: gpu_arbiter exited %d without READY and its RESULT line\n", rc);
    return 1;
  }
  std::printf("ok: a granted the whole GPU, b nothing, heartbeats written, RESULT printed\n");
  return 0;
}
