#include "kube/leader_elector.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <random>

namespace tessera::kube {
namespace {

std::string SpecString(const nlohmann::json& lease, const char* field) {
  if (!lease.is_object()) return "";
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return "";
  auto v = spec->find(field);
  return v != spec->end() && v->is_string() ? v->get<std::string>() : "";
}

int SpecInt(const nlohmann::json& lease, const char* field, int fallback) {
  if (!lease.is_object()) return fallback;
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return fallback;
  auto v = spec->find(field);
  return v != spec->end() && v->is_number_integer() ? v->get<int>() : fallback;
}

std::string ResourceVersionOf(const nlohmann::json& obj) {
  if (!obj.is_object() || !obj.contains("metadata")) return "";
  return obj["metadata"].value("resourceVersion", std::string());
}

// A write lost to another candidate (create of an existing lease, or an
// update whose resourceVersion is stale): expected, not worth a warning.
bool IsConflict(const Status& s) {
  return s.code() == StatusCode::kAlreadyExists ||
         (s.code() == StatusCode::kFailedPrecondition && s.message().find(": 409 ") != std::string::npos);
}

// Requests of the elector must finish well within the renew deadline.
ClientConfig ElectionClientConfig(ClientConfig c, const LeaderElectionConfig& e) {
  c.timeout = std::min(c.timeout, std::max(std::chrono::milliseconds(1000), e.renew_deadline / 2));
  c.max_retries = std::min(c.max_retries, 1);
  return c;
}

int Seconds(std::chrono::milliseconds d) { return static_cast<int>((d.count() + 999) / 1000); }

}  // namespace

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  long frac = static_cast<long>(micros % 1000000);
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%06ldZ", frac);
  return buf;
}

std::optional<nlohmann::json> NextLease(const nlohmann::json& current, const std::string& ns, const std::string& name,
                                        const std::string& identity, int lease_duration_seconds, bool expired,
                                        std::chrono::system_clock::time_point now) {
  const std::string stamp = FormatMicroTime(now);
  nlohmann::json lease;
  if (current.is_object()) {
    const std::string holder = SpecString(current, "holderIdentity");
    if (holder != identity && !holder.empty() && !expired) return std::nullopt;
    lease = current;
    if (!lease["spec"].is_object()) lease["spec"] = nlohmann::json::object();
    if (holder != identity) {
      lease["spec"]["acquireTime"] = stamp;
      lease["spec"]["leaseTransitions"] = SpecInt(current, "leaseTransitions", 0) + 1;
    }
  } else {
    lease = {{"apiVersion", "coordination.k8s.io/v1"},
             {"kind", "Lease"},
             {"metadata", {{"name", name}, {"namespace", ns}}},
             {"spec", {{"acquireTime", stamp}, {"leaseTransitions", 0}}}};
  }
  lease["spec"]["holderIdentity"] = identity;
  lease["spec"]["leaseDurationSeconds"] = lease_duration_seconds;
  lease["spec"]["renewTime"] = stamp;
  return lease;
}

LeaderElector::LeaderElector(Client client, LeaderElectionConfig config)
    : client_(ElectionClientConfig(client.config(), config)),
      config_(std::move(config)),
      path_(LeasePath(config_.lease_namespace, config_.name)) {}

LeaderElector::~LeaderElector() { Stop(); }

Status LeaderElector::Start() {
  if (config_.lease_namespace.empty() || config_.name.empty() || config_.identity.empty()) {
    return InvalidArgument("leader election: lease namespace, name and identity must be set");
  }
  if (!(config_.retry_period.count() > 0 && config_.retry_period < config_.renew_deadline &&
        config_.renew_deadline < config_.lease_duration)) {
    return InvalidArgument("leader election: need 0 < retry period < renew deadline < lease duration");
  }
  if (thread_.joinable() || stop_.load()) return FailedPrecondition("leader election: already started");
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void LeaderElector::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

std::string LeaderElector::LastObservedHolder() const {
  MutexLock lock(mu_);
  return observed_holder_;
}

void LeaderElector::SleepFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  cv_.WaitFor(mu_, d, [this] { return stop_.load(); });
}

Result<bool> LeaderElector::TryAcquireOrRenew() {
  nlohmann::json current;  // null: no lease yet
  auto got = client_.Get(path_);
  if (got.ok()) {
    current = std::move(got).value();
  } else if (got.status().code() != StatusCode::kNotFound) {
    return got.status();
  }
  const auto now = std::chrono::steady_clock::now();
  bool expired = true;
  if (current.is_object()) {
    const std::string holder = SpecString(current, "holderIdentity");
    const std::string record = ResourceVersionOf(current);
    if (record != observed_record_) {
      observed_record_ = record;
      observed_time_ = now;
    }
    {
      MutexLock lock(mu_);
      observed_holder_ = holder;
    }
    const int duration = SpecInt(current, "leaseDurationSeconds", Seconds(config_.lease_duration));
    expired = holder.empty() || now >= observed_time_ + std::chrono::seconds(duration);
  }
  auto next = NextLease(current, config_.lease_namespace, config_.name, config_.identity,
                        Seconds(config_.lease_duration), expired, std::chrono::system_clock::now());
  if (!next) return false;
  auto written = current.is_object() ? client_.Update(path_, *next) : client_.Create(LeasesPath(config_.lease_namespace), *next);
  if (!written.ok()) {
    if (IsConflict(written.status())) return false;
    return written.status();
  }
  last_lease_ = std::move(written).value();
  observed_record_ = ResourceVersionOf(last_lease_);
  observed_time_ = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    observed_holder_ = config_.identity;
  }
  return true;
}

void LeaderElector::Release() {
  if (!last_lease_.is_object()) return;
  nlohmann::json lease = last_lease_;
  const std::string stamp = FormatMicroTime(std::chrono::system_clock::now());
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = stamp;
  lease["spec"]["acquireTime"] = stamp;
  // Carries the resourceVersion of our last write: if someone took the lease
  // since, this fails and leaves theirs alone.
  if (auto s = client_.Update(path_, lease); !s.ok()) {
    spdlog::warn("leader election {}: release: {}", path_, s.status().message());
  }
}

void LeaderElector::Run() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  auto log_failure = [this](const Status& s) {
    if (IsConflict(s)) {
      spdlog::debug("leader election {}: {}", path_, s.message());
    } else {
      spdlog::warn("leader election {}: {}", path_, s.message());
    }
  };
  while (!stop_.load()) {
    auto acquired = TryAcquireOrRenew();
    if (!acquired.ok()) log_failure(acquired.status());
    if (!acquired.ok() || !acquired.value()) {
      SleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(config_.retry_period * jitter(rng)));
      continue;
    }
    leader_ = true;
    spdlog::info("leader election {}: {} is now the leader", path_, config_.identity);
    if (config_.on_started_leading) config_.on_started_leading();
    auto last_renew = std::chrono::steady_clock::now();
    bool lost = false;
    while (!stop_.load() && !lost) {
      SleepFor(config_.retry_period);
      if (stop_.load()) break;
      auto renewed = TryAcquireOrRenew();
      if (renewed.ok() && renewed.value()) {
        last_renew = std::chrono::steady_clock::now();
        continue;
      }
      if (!renewed.ok()) log_failure(renewed.status());
      // Another holder is proof we lost; errors count against the deadline.
      lost = renewed.ok() || std::chrono::steady_clock::now() - last_renew >= config_.renew_deadline;
    }
    if (!lost) break;  // stopping while leading: released below
    leader_ = false;
    last_lease_ = nullptr;
    spdlog::warn("leader election {}: {} lost the lease", path_, config_.identity);
    if (config_.on_stopped_leading) config_.on_stopped_leading();
  }
  if (leader_.load()) {
    Release();
    leader_ = false;
    spdlog::info("leader election {}: {} released the lease", path_, config_.identity);
    if (config_.on_stopped_leading) config_.on_stopped_leading();
  }
}

}  // namespace tessera::kube
