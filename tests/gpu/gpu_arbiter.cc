// tessera-node's per-GPU compute arbiter (node/arbiter_loop.h, the real
// ArbiterLoop) without Kubernetes, for the GPU tests: the containers come
// from the command line instead of Allocate's records.
//   gpu_arbiter [--seconds S] [--interval-ms N] [--idle-after-ms N]
//               [--min-share-percent N] [--trace] CONTAINER...
//   CONTAINER: key,region_dir,gpu,share%,limit%,policy,priority
//              (limit% 0: no burst ceiling; policy share|hard; priority
//              low|normal|high), e.g. hi,/tmp/x/hi,0,50,0,share,high
// Runs until stdin closes, or for S seconds when --seconds is given (stdin
// is then not read), or until SIGTERM/SIGINT. Prints READY once the loop
// runs, with --trace a line whenever a grant changes ("grant T_MS KEY PPM
// active held"), and at the end one `RESULT {json}` line (result_line.h):
// the slots seen and, per container, its last grant and the ArbiterStats counters.
// Exit status 0, 2 on bad usage. The lease is tessera-node's (StartArbiter):
// 10 intervals, at least 300 ms.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "node/arbiter_loop.h"
#include "result_line.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int Usage(const char* why) {
  std::fprintf(stderr,
               "gpu_arbiter: %s\nusage: gpu_arbiter [--seconds S] [--interval-ms N] [--idle-after-ms N] "
               "[--min-share-percent N] [--trace] key,region_dir,gpu,share%%,limit%%,share|hard,low|normal|high...\n",
               why);
  return 2;
}

bool ParseUint(const std::string& s, unsigned long max, unsigned long* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9) return false;
  *out = std::stoul(s);
  return *out <= max;
}

bool ParseContainer(const std::string& arg, tessera::node::ArbiterContainer* c) {
  std::vector<std::string> f;
  std::stringstream in(arg);
  for (std::string part; std::getline(in, part, ',');) f.push_back(part);
  unsigned long gpu = 0, share = 0, limit = 0;
  if (f.size() != 7 || f[0].empty() || f[1].empty() || !ParseUint(f[2], 63, &gpu) || !ParseUint(f[3], 100, &share) ||
      !ParseUint(f[4], 100, &limit)) {
    return false;
  }
  if (f[5] != "share" && f[5] != "hard") return false;
  if (f[6] != "low" && f[6] != "normal" && f[6] != "high") return false;
  c->key = f[0];
  c->region_dir = f[1];
  c->slots = {{static_cast<int>(gpu), static_cast<uint32_t>(share * 10'000), static_cast<uint32_t>(limit * 10'000)}};
  c->policy = f[5] == "hard" ? tessera::node::CorePolicy::kHard : tessera::node::CorePolicy::kShare;
  c->priority = f[6] == "high"  ? tessera::core::Priority::kHigh
                : f[6] == "low" ? tessera::core::Priority::kLow
                                : tessera::core::Priority::kNormal;
  return true;
}

// A RESULT key from a container key: letters, digits and '_' only.
std::string KeyName(const std::string& key) {
  std::string out = key;
  for (char& ch : out) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = -1;
  unsigned long interval_ms = 10, idle_after_ms = 50, min_share = 0;
  bool trace = false;
  std::vector<tessera::node::ArbiterContainer> containers;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--seconds" && has_value) {
      seconds = std::atof(argv[++i]);
      if (!(seconds > 0)) return Usage("--seconds must be positive");
    } else if (a == "--interval-ms" && has_value) {
      if (!ParseUint(argv[++i], 10'000, &interval_ms) || interval_ms == 0) return Usage("bad --interval-ms");
    } else if (a == "--idle-after-ms" && has_value) {
      if (!ParseUint(argv[++i], 100'000, &idle_after_ms) || idle_after_ms == 0) return Usage("bad --idle-after-ms");
    } else if (a == "--min-share-percent" && has_value) {
      if (!ParseUint(argv[++i], 100, &min_share)) return Usage("bad --min-share-percent");
    } else if (a == "--trace") {
      trace = true;
    } else {
      tessera::node::ArbiterContainer c;
      if (!ParseContainer(a, &c)) return Usage(("bad container: " + a).c_str());
      containers.push_back(std::move(c));
    }
  }
  if (containers.empty()) return Usage("no container given");

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  // tessera-node's settings (StartArbiter), with this command line's values.
  tessera::node::ArbiterLoopOptions o;
  o.interval = std::chrono::milliseconds(interval_ms);
  o.lease_us = std::max<uint64_t>(300'000, 10 * interval_ms * 1000);
  o.idle_after_us = idle_after_ms * 1000;
  o.grants.min_share_percent = static_cast<uint32_t>(min_share);
  tessera::node::ArbiterLoop loop([containers] { return containers; }, std::move(o));
  loop.Start();
  std::printf("READY\n");
  std::fflush(stdout);

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, uint32_t> last_grant;  // by key, for --trace
  while (g_stop == 0) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (seconds > 0 && elapsed >= seconds) break;
    if (seconds > 0) {
      usleep(1000);
    } else {
      // Stdin closed (EOF or error) ends the run.
      pollfd p{0, POLLIN, 0};
      if (poll(&p, 1, 1) > 0) {
        char buf[256];
        if (read(0, buf, sizeof buf) <= 0) break;
      }
    }
    if (!trace) continue;
    for (const tessera::node::ArbiterStats& s : loop.Snapshot()) {
      auto it = last_grant.find(s.key);
      if (it != last_grant.end() && it->second == s.grant_ppm) continue;
      last_grant[s.key] = s.grant_ppm;
      std::printf("grant %.1f %s %u %s %s\n", elapsed * 1000, s.key.c_str(), s.grant_ppm,
                  s.active ? "active" : "idle", s.held ? "held" : "-");
    }
    std::fflush(stdout);
  }
  loop.Stop();

  ResultLine r;
  size_t seen = 0;  // container slots whose region was found
  for (const tessera::node::ArbiterStats& s : loop.Snapshot()) {
    const std::string k = KeyName(s.key);
    r.Add(k + "_grant_ppm", s.grant_ppm);
    r.Add(k + "_used_us", static_cast<double>(s.used_us));
    r.Add(k + "_throttled_us", static_cast<double>(s.throttled_us));
    r.Add(k + "_held_us", static_cast<double>(s.held_us));
    r.Add(k + "_launches", static_cast<double>(s.launches));
    ++seen;
  }
  r.Add("slots_seen", static_cast<double>(seen));
  r.Print();
  return 0;
}
