#include "node/arbiter_loop.h"

#include <time.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "region/region.h"

namespace tessera::node {
namespace {

uint64_t MonotonicUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

constexpr const char* kRecordSuffix = ".arbiter.json";

std::string PriorityName(core::Priority p) {
  switch (p) {
    case core::Priority::kHigh:
      return "high";
    case core::Priority::kLow:
      return "low";
    default:
      return "normal";
  }
}

}  // namespace

ArbiterLoop::ArbiterLoop(Source source, ArbiterLoopOptions options)
    : source_(std::move(source)), options_(std::move(options)) {
  if (!options_.now_us) options_.now_us = &MonotonicUs;
}

ArbiterLoop::~ArbiterLoop() { Stop(); }

// The demand counters of `t`'s region as they are now: a region first seen
// is not active for what it launched before, but threads waiting at its
// gate count (as a change from none) until they show no sign of life.
void ArbiterLoop::Baseline(Tracked& t) {
  for (size_t i = 0; i < t.last_launches.size(); ++i) {
    const region::ComputeShare& cs = t.region->layout()->compute[i];
    t.last_launches[i] = cs.launches.load(std::memory_order_relaxed);
    t.last_waiting[i] = 0;
    t.last_throttled[i] = cs.throttled_us.load(std::memory_order_relaxed);
  }
}

// Maps t's region when its file exists. Never creates one (OpenExisting, so
// a folder removed under us is not given a new region either); a region of
// another layout is skipped.
void ArbiterLoop::OpenIfThere(Tracked& t) {
  if (auto r = region::Region::OpenExisting(t.spec.region_dir); r.ok()) {
    t.region = std::make_unique<region::Region>(std::move(r).value());
    Baseline(t);
  }
}

void ArbiterLoop::Refresh(uint64_t now) {
  if (refreshed_ && options_.source_refresh_us != 0 && now - refreshed_us_ < options_.source_refresh_us) {
    // Containers listed but not yet started are looked for on every pass.
    for (auto& entry : tracked_) {
      if (entry.second.region == nullptr) OpenIfThere(entry.second);
    }
    return;
  }
  refreshed_ = true;
  refreshed_us_ = now;
  std::map<std::string, Tracked> next;
  for (ArbiterContainer& c : source_()) {
    if (c.slots.size() > static_cast<size_t>(region::kMaxGpus)) c.slots.resize(region::kMaxGpus);
    Tracked t;
    if (auto it = tracked_.find(c.region_dir); it != tracked_.end()) t = std::move(it->second);
    const size_t n = c.slots.size();
    t.spec = std::move(c);
    t.last_launches.resize(n, 0);
    t.last_waiting.resize(n, 0);
    t.last_throttled.resize(n, 0);
    t.last_active_us.resize(n, 0);
    t.held_us.resize(n, 0);
    t.held.resize(n, false);
    if (t.region == nullptr) OpenIfThere(t);
    const std::string dir = t.spec.region_dir;
    next[dir] = std::move(t);
  }
  tracked_ = std::move(next);
}

void ArbiterLoop::Step() {
  const uint64_t now = options_.now_us();
  const uint64_t since_last = last_pass_us_ != 0 && now > last_pass_us_ ? now - last_pass_us_ : 0;
  last_pass_us_ = now;
  Refresh(now);

  // Demand, and the entries of each physical GPU.
  struct Ref {
    Tracked* t;
    size_t slot;
  };
  std::map<int, std::vector<Ref>> by_gpu;
  std::map<int, std::vector<GrantEntry>> entries;
  for (auto& [dir, t] : tracked_) {
    if (t.region == nullptr) continue;
    region::Layout& l = *t.region->layout();
    for (size_t i = 0; i < t.spec.slots.size(); ++i) {
      const region::ComputeShare& cs = l.compute[i];
      // Active: it launched, a thread began or stopped waiting at its gate,
      // or threads still wait there and are alive (a waiting thread adds its
      // wait to throttled_us at every wake, at least every millisecond once
      // an arbiter is seen). A process killed while waiting leaves `waiting`
      // behind but adds nothing more, so it does not count as active for good.
      const uint64_t launches = cs.launches.load(std::memory_order_relaxed);
      const uint32_t waiting = cs.waiting.load(std::memory_order_relaxed);
      const uint64_t throttled = cs.throttled_us.load(std::memory_order_relaxed);
      if (launches != t.last_launches[i] || waiting != t.last_waiting[i] ||
          (waiting > 0 && throttled != t.last_throttled[i])) {
        t.last_active_us[i] = now;
      }
      t.last_launches[i] = launches;
      t.last_waiting[i] = waiting;
      t.last_throttled[i] = throttled;
      GrantEntry e;
      e.share_ppm = t.spec.slots[i].share_ppm;
      e.limit_ppm = t.spec.slots[i].limit_ppm;
      e.policy = t.spec.policy;
      if (cs.policy.load(std::memory_order_relaxed) == region::kPolicyHard) e.policy = CorePolicy::kHard;
      e.priority = t.spec.priority;
      e.active = t.last_active_us[i] != 0 && now - t.last_active_us[i] < options_.idle_after_us;
      by_gpu[t.spec.slots[i].gpu].push_back({&t, i});
      entries[t.spec.slots[i].gpu].push_back(e);
    }
  }

  std::vector<ArbiterStats> stats;
  for (auto& [gpu, refs] : by_gpu) {
    const std::vector<GrantEntry>& e = entries[gpu];
    const std::vector<Grant> grants = ComputeGrants(e, options_.grants);
    for (size_t k = 0; k < refs.size(); ++k) {
      region::ComputeShare& cs = refs[k].t->region->layout()->compute[refs[k].slot];
      cs.priority.store(static_cast<uint32_t>(e[k].priority), std::memory_order_relaxed);
      Tracked& t = *refs[k].t;
      if (t.held[refs[k].slot]) t.held_us[refs[k].slot] += since_last;  // held since the last pass
      t.held[refs[k].slot] = grants[k].held;
      cs.held.store(grants[k].held ? 1 : 0, std::memory_order_relaxed);
      cs.inflight_cap_us.store(grants[k].preemptible ? options_.preemptible_inflight_us : 0,
                               std::memory_order_relaxed);
      cs.grant_ppm.store(grants[k].ppm, std::memory_order_release);
      ArbiterStats s;
      s.key = refs[k].t->spec.key;
      s.slot = static_cast<int>(refs[k].slot);
      s.gpu = gpu;
      s.share_ppm = e[k].share_ppm;
      s.grant_ppm = grants[k].ppm;
      s.active = e[k].active;
      s.held = grants[k].held;
      s.used_us = cs.used_us.load(std::memory_order_relaxed);
      s.throttled_us = cs.throttled_us.load(std::memory_order_relaxed);
      s.launches = cs.launches.load(std::memory_order_relaxed);
      s.held_us = t.held_us[refs[k].slot];
      stats.push_back(std::move(s));
    }
  }
  // The heartbeat last: a gate that sees it sees this pass's grants.
  for (auto& [dir, t] : tracked_) {
    if (t.region == nullptr) continue;
    region::ArbiterState& a = t.region->layout()->arbiter;
    a.lease_us.store(options_.lease_us, std::memory_order_relaxed);
    a.heartbeat_us.store(now, std::memory_order_release);
    a.passes.fetch_add(1, std::memory_order_relaxed);
  }
  MutexLock l(stats_mu_);
  stats_ = std::move(stats);
}

void ArbiterLoop::Start() {
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      const auto next = std::chrono::steady_clock::now() + options_.interval;
      Step();
      std::this_thread::sleep_until(next);
    }
  });
}

void ArbiterLoop::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::vector<ArbiterStats> ArbiterLoop::Snapshot() const {
  MutexLock l(stats_mu_);
  return stats_;
}

Status WriteArbiterRecord(const std::string& region_dir, const ArbiterContainer& c) {
  nlohmann::json slots = nlohmann::json::array();
  for (const ArbiterSlot& s : c.slots) {
    nlohmann::json slot = {{"gpu", s.gpu}, {"share_ppm", s.share_ppm}};
    if (s.limit_ppm != 0) slot["limit_ppm"] = s.limit_ppm;
    slots.push_back(std::move(slot));
  }
  const nlohmann::json j = {{"key", c.key},
                            {"slots", slots},
                            {"policy", c.policy == CorePolicy::kHard ? "hard" : "share"},
                            {"priority", PriorityName(c.priority)}};
  std::string dir = region_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string path = dir + kRecordSuffix;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    if (!out.good()) return Internal("writing " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("renaming " + tmp + ": " + ec.message());
  return Status::Ok();
}

std::unique_ptr<ArbiterLoop> StartArbiter(const std::string& region_root, const ArbiterConfig& config) {
  if (config.interval.count() <= 0) return nullptr;
  ArbiterLoopOptions o;
  o.interval = config.interval;
  o.lease_us = std::max<uint64_t>(300'000, 10 * static_cast<uint64_t>(config.interval.count()) * 1000);
  o.idle_after_us = static_cast<uint64_t>(std::max<int64_t>(config.idle_after.count(), 1)) * 1000;
  o.grants.min_share_percent = std::min<uint32_t>(config.min_share_percent, 100);
  auto loop = std::make_unique<ArbiterLoop>(RegionSource(region_root), std::move(o));
  loop->Start();
  return loop;
}

namespace {

// The records directly in `folder` (a pod uid's folder, or a claim's
// <root>/dra/<claim uid>), appended to `out`; `owner` names the container
// in the key when the record has none.
void ReadRecordsIn(const std::filesystem::path& folder, const std::string& owner,
                   std::vector<ArbiterContainer>& out) {
  namespace fs = std::filesystem;
  const std::string suffix = kRecordSuffix;
  std::error_code ec;
  for (fs::directory_iterator f(folder, ec), end; !ec && f != end; f.increment(ec)) {
    const std::string name = f->path().filename().string();
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), std::string::npos, suffix) != 0) {
      continue;
    }
    std::ifstream in(f->path());
    std::stringstream buf;
    buf << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("slots") || !j["slots"].is_array()) continue;
    const std::string container = name.substr(0, name.size() - suffix.size());
    ArbiterContainer c;
    c.region_dir = (folder / container).string();
    c.key = j.value("key", owner + "/" + container);
    bool ok = true;
    for (const auto& s : j["slots"]) {
      if (!s.is_object() || !s.contains("gpu") || !s["gpu"].is_number_integer()) {
        ok = false;
        break;
      }
      ArbiterSlot slot;
      slot.gpu = s["gpu"].get<int>();
      slot.share_ppm = s.value("share_ppm", 0u);
      slot.limit_ppm = s.value("limit_ppm", 0u);
      c.slots.push_back(slot);
    }
    if (!ok) continue;
    c.policy = j.value("policy", "share") == "hard" ? CorePolicy::kHard : CorePolicy::kShare;
    const std::string p = j.value("priority", "normal");
    c.priority = p == "high" ? core::Priority::kHigh : p == "low" ? core::Priority::kLow : core::Priority::kNormal;
    out.push_back(std::move(c));
  }
}

}  // namespace

ArbiterLoop::Source RegionSource(std::string region_root) {
  return [root = std::move(region_root)] {
    std::vector<ArbiterContainer> out;
    // Folders and records may be removed under us (node/region_gc.h, a
    // claim unprepared): iteration errors end a listing quietly and a record
    // that cannot be read is skipped, never thrown over.
    namespace fs = std::filesystem;
    std::error_code ec;
    for (fs::directory_iterator top(root, ec), end; !ec && top != end; top.increment(ec)) {
      std::error_code ec2;
      if (top->is_symlink(ec2) || !top->is_directory(ec2)) continue;
      const std::string name = top->path().filename().string();
      if (name != kClaimsFolder) {
        ReadRecordsIn(top->path(), name, out);  // a pod uid's folder
        continue;
      }
      // <root>/dra/<claim uid>/claim.arbiter.json: one level further down.
      for (fs::directory_iterator claim(top->path(), ec2); !ec2 && claim != end; claim.increment(ec2)) {
        std::error_code ec3;
        if (claim->is_symlink(ec3) || !claim->is_directory(ec3)) continue;
        ReadRecordsIn(claim->path(), claim->path().filename().string(), out);
      }
    }
    return out;
  };
}

}  // namespace tessera::node
