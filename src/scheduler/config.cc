#include "scheduler/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "core/policy.h"

namespace tessera::scheduler {
namespace {

Status UnknownKeys(const YAML::Node& map, const std::set<std::string>& known, const std::string& where) {
  for (const auto& kv : map) {
    const auto key = kv.first.as<std::string>();
    if (!known.contains(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument(where + "unknown key \"" + key + "\" (known: " + list + ")");
    }
  }
  return Status::Ok();
}

template <typename T>
Status Read(const YAML::Node& map, const char* key, T& out, const std::string& where) {
  const YAML::Node value = map[key];
  if (!value) return Status::Ok();
  try {
    out = value.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidArgument(where + key + ": \"" + YAML::Dump(value) + "\" is not a valid value");
  }
  return Status::Ok();
}

bool ValidResourceName(const std::string& name) {
  // An extended resource: "domain/name", domain not kubernetes.io.
  const auto slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return false;
  if (name.find('/', slash + 1) != std::string::npos) return false;
  const std::string domain = name.substr(0, slash);
  return domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io");
}

// An RFC 1123 label, as Kubernetes namespace names are.
bool NamespaceName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
}

}  // namespace

Result<SchedulerConfig> ParseConfig(const std::string& yaml_text, const std::string& source) {
  SchedulerConfig config;
  const std::string where = source + ": ";
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(where + "not valid YAML: " + e.what());
  }
  if (!root || root.IsNull()) return config;
  if (!root.IsMap()) return InvalidArgument(where + "expected a mapping at the top level");
  TESSERA_RETURN_IF_ERROR(UnknownKeys(
      root, {"listenAddress", "port", "tls", "kubeconfig", "policy", "resourceNames", "assumeTTLSeconds",
             "admissionWaitMillis", "leaderElection", "logLevel", "seed", "apiQPS", "apiBurst", "frontEnds",
             "preemption", "interference", "filterReturnsBest", "placePodsWithoutGpus", "dra",
             "isolationNoneNamespaces"},
      where));
  TESSERA_RETURN_IF_ERROR(Read(root, "listenAddress", config.listen_address, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "port", config.port, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "kubeconfig", config.kubeconfig, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "policy", config.policy, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "filterReturnsBest", config.filter_returns_best, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "placePodsWithoutGpus", config.place_pods_without_gpus, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "isolationNoneNamespaces", config.isolation_none_namespaces, where));
  for (const std::string& ns : config.isolation_none_namespaces) {
    if (ns.empty()) return InvalidArgument(where + "isolationNoneNamespaces: an empty namespace name");
    if (ns != "*" && !NamespaceName(ns)) {
      return InvalidArgument(where + "isolationNoneNamespaces: \"" + ns +
                             "\" is not a namespace name (lower-case letters, digits and '-', at most 63, starting "
                             "and ending with a letter or digit) nor \"*\"");
    }
  }
  TESSERA_RETURN_IF_ERROR(Read(root, "logLevel", config.log_level, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "seed", config.seed, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "apiQPS", config.api_qps, where));
  TESSERA_RETURN_IF_ERROR(Read(root, "apiBurst", config.api_burst, where));
  int64_t ttl = config.assume_ttl.count();
  TESSERA_RETURN_IF_ERROR(Read(root, "assumeTTLSeconds", ttl, where));
  config.assume_ttl = std::chrono::seconds(ttl);
  int64_t wait_ms = config.admission_wait.count();
  TESSERA_RETURN_IF_ERROR(Read(root, "admissionWaitMillis", wait_ms, where));
  config.admission_wait = std::chrono::milliseconds(wait_ms);
  if (const YAML::Node tls = root["tls"]) {
    if (!tls.IsMap()) return InvalidArgument(where + "tls: expected a mapping with certFile and keyFile");
    TESSERA_RETURN_IF_ERROR(UnknownKeys(tls, {"certFile", "keyFile"}, where + "tls: "));
    TESSERA_RETURN_IF_ERROR(Read(tls, "certFile", config.tls_cert_file, where + "tls."));
    TESSERA_RETURN_IF_ERROR(Read(tls, "keyFile", config.tls_key_file, where + "tls."));
  }
  if (const YAML::Node names = root["resourceNames"]) {
    if (!names.IsMap()) return InvalidArgument(where + "resourceNames: expected a mapping");
    TESSERA_RETURN_IF_ERROR(UnknownKeys(names, {"gpu", "gpuMem", "gpuCore"}, where + "resourceNames: "));
    TESSERA_RETURN_IF_ERROR(Read(names, "gpu", config.resources.gpu, where + "resourceNames."));
    TESSERA_RETURN_IF_ERROR(Read(names, "gpuMem", config.resources.mem, where + "resourceNames."));
    TESSERA_RETURN_IF_ERROR(Read(names, "gpuCore", config.resources.core, where + "resourceNames."));
  }
  if (const YAML::Node fe = root["frontEnds"]) {
    const std::string at = where + "frontEnds: ";
    if (!fe.IsMap()) return InvalidArgument(at + "expected a mapping with gpushare and hami");
    TESSERA_RETURN_IF_ERROR(UnknownKeys(fe, {"gpushare", "hami"}, at));
    if (const YAML::Node g = fe["gpushare"]) {
      if (!g.IsMap()) return InvalidArgument(at + "gpushare: expected a mapping");
      TESSERA_RETURN_IF_ERROR(UnknownKeys(g, {"enabled", "gpuMem"}, at + "gpushare: "));
      auto& names = config.resources.gpushare;
      TESSERA_RETURN_IF_ERROR(Read(g, "enabled", names.enabled, where + "frontEnds.gpushare."));
      TESSERA_RETURN_IF_ERROR(Read(g, "gpuMem", names.mem, where + "frontEnds.gpushare."));
    }
    if (const YAML::Node h = fe["hami"]) {
      if (!h.IsMap()) return InvalidArgument(at + "hami: expected a mapping");
      TESSERA_RETURN_IF_ERROR(
          UnknownKeys(h, {"enabled", "gpu", "gpuMem", "gpuMemPercentage", "gpuCores"}, at + "hami: "));
      auto& names = config.resources.hami;
      const std::string w = where + "frontEnds.hami.";
      TESSERA_RETURN_IF_ERROR(Read(h, "enabled", names.enabled, w));
      TESSERA_RETURN_IF_ERROR(Read(h, "gpu", names.gpu, w));
      TESSERA_RETURN_IF_ERROR(Read(h, "gpuMem", names.mem, w));
      TESSERA_RETURN_IF_ERROR(Read(h, "gpuMemPercentage", names.mem_percent, w));
      TESSERA_RETURN_IF_ERROR(Read(h, "gpuCores", names.core, w));
    }
  }
  if (const YAML::Node dra = root["dra"]) {
    if (!dra.IsMap()) return InvalidArgument(where + "dra: expected a mapping with deviceClasses");
    TESSERA_RETURN_IF_ERROR(UnknownKeys(dra, {"deviceClasses"}, where + "dra: "));
    TESSERA_RETURN_IF_ERROR(Read(dra, "deviceClasses", config.dra_device_classes, where + "dra."));
  }
  if (const YAML::Node pe = root["preemption"]) {
    if (!pe.IsMap()) return InvalidArgument(where + "preemption: expected a mapping");
    TESSERA_RETURN_IF_ERROR(
        UnknownKeys(pe, {"enabled", "nominationTTLSeconds", "maxVictims"}, where + "preemption: "));
    TESSERA_RETURN_IF_ERROR(Read(pe, "enabled", config.preemption.enabled, where + "preemption."));
    int64_t nomination_ttl = config.preemption.nomination_ttl.count();
    TESSERA_RETURN_IF_ERROR(Read(pe, "nominationTTLSeconds", nomination_ttl, where + "preemption."));
    config.preemption.nomination_ttl = std::chrono::seconds(nomination_ttl);
    TESSERA_RETURN_IF_ERROR(Read(pe, "maxVictims", config.preemption.max_victims, where + "preemption."));
  }
  if (const YAML::Node in = root["interference"]) {
    const std::string at = where + "interference.";
    if (!in.IsMap()) return InvalidArgument(where + "interference: expected a mapping");
    TESSERA_RETURN_IF_ERROR(UnknownKeys(in,
                                        {"ceiling", "weight", "defaultFactor", "fadeBelowFree", "learnFromUsage",
                                         "historyAlpha", "historySpread", "historyMaxAgeSeconds",
                                         "historyMaxWorkloads"},
                                        where + "interference: "));
    InterferenceSettings& i = config.interference;
    TESSERA_RETURN_IF_ERROR(Read(in, "ceiling", i.policy.ceiling, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "weight", i.policy.weight, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "defaultFactor", i.policy.default_factor, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "fadeBelowFree", i.policy.fade_below_free, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "learnFromUsage", i.learn_from_usage, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "historyAlpha", i.history.alpha, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "historySpread", i.history.spread_weight, at));
    TESSERA_RETURN_IF_ERROR(Read(in, "historyMaxAgeSeconds", i.history.max_age_s, at));
    int64_t max_keys = static_cast<int64_t>(i.history.max_keys);
    TESSERA_RETURN_IF_ERROR(Read(in, "historyMaxWorkloads", max_keys, at));
    if (max_keys < 1) return InvalidArgument(at + "historyMaxWorkloads: must be at least 1, got " + std::to_string(max_keys));
    i.history.max_keys = static_cast<size_t>(max_keys);
  }
  if (const YAML::Node le = root["leaderElection"]) {
    if (!le.IsMap()) return InvalidArgument(where + "leaderElection: expected a mapping");
    TESSERA_RETURN_IF_ERROR(
        UnknownKeys(le, {"enabled", "namespace", "name", "identity"}, where + "leaderElection: "));
    TESSERA_RETURN_IF_ERROR(Read(le, "enabled", config.leader_election.enabled, where + "leaderElection."));
    TESSERA_RETURN_IF_ERROR(Read(le, "namespace", config.leader_election.namespace_, where + "leaderElection."));
    TESSERA_RETURN_IF_ERROR(Read(le, "name", config.leader_election.name, where + "leaderElection."));
    TESSERA_RETURN_IF_ERROR(Read(le, "identity", config.leader_election.identity, where + "leaderElection."));
  }
  TESSERA_RETURN_IF_ERROR(ValidateConfig(config).WithContext(source));
  return config;
}

Result<SchedulerConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

Status ValidateConfig(const SchedulerConfig& config) {
  if (config.port < 0 || config.port > 65535) {
    return InvalidArgument("port: " + std::to_string(config.port) + " is outside 0..65535");
  }
  if (config.listen_address.empty()) return InvalidArgument("listenAddress: must not be empty");
  if (auto policy = core::MakePolicy(config.policy, core::PolicyConfig{}); !policy.ok()) {
    return InvalidArgument("policy: " + policy.status().message());
  }
  for (const auto* name : {&config.resources.gpu, &config.resources.mem, &config.resources.core}) {
    if (!ValidResourceName(*name)) {
      return InvalidArgument("resourceNames: \"" + *name +
                             "\" is not an extended resource name (want domain/name, e.g. tessera.io/gpu-mem)");
    }
  }
  if (config.resources.gpu == config.resources.mem || config.resources.gpu == config.resources.core ||
      config.resources.mem == config.resources.core) {
    return InvalidArgument("resourceNames: gpu, gpuMem and gpuCore must differ");
  }
  // Every name a pod may use (the enabled front ends' too) must be an
  // extended resource and mean one thing only.
  const std::vector<std::string> all = config.resources.All();
  for (size_t i = 3; i < all.size(); ++i) {
    if (!ValidResourceName(all[i])) {
      return InvalidArgument("frontEnds: \"" + all[i] +
                             "\" is not an extended resource name (want domain/name, e.g. aliyun.com/gpu-mem)");
    }
  }
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (all[i] == all[j]) {
        return InvalidArgument("resourceNames and frontEnds: \"" + all[i] +
                               "\" is used twice; every enabled resource name must differ");
      }
    }
  }
  if (!(config.api_qps > 0) || config.api_burst < 1) {
    return InvalidArgument("apiQPS and apiBurst: must be positive (got " + std::to_string(config.api_qps) + ", " +
                           std::to_string(config.api_burst) + ")");
  }
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return InvalidArgument("tls: certFile and keyFile must be given together");
  }
  if (config.assume_ttl.count() <= 0) {
    return InvalidArgument("assumeTTLSeconds: must be positive, got " + std::to_string(config.assume_ttl.count()));
  }
  if (config.admission_wait.count() < 0 || config.admission_wait.count() > 600'000) {
    return InvalidArgument("admissionWaitMillis: must be in 0..600000, got " +
                           std::to_string(config.admission_wait.count()));
  }
  if (config.preemption.nomination_ttl.count() <= 0 || config.preemption.nomination_ttl.count() > 3600) {
    return InvalidArgument("preemption.nominationTTLSeconds: must be in 1..3600, got " +
                           std::to_string(config.preemption.nomination_ttl.count()));
  }
  if (config.preemption.max_victims < 0) {
    return InvalidArgument("preemption.maxVictims: must be 0 (no limit) or positive, got " +
                           std::to_string(config.preemption.max_victims));
  }
  const InterferenceSettings& in = config.interference;
  auto number = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  if (!(in.policy.ceiling > 0 && in.policy.ceiling <= 1))
    return InvalidArgument("interference.ceiling: must be in (0, 1], got " + number(in.policy.ceiling));
  if (!(in.policy.weight >= 0 && in.policy.weight <= 100))
    return InvalidArgument("interference.weight: must be in 0..100, got " + number(in.policy.weight));
  if (!(in.policy.default_factor >= 0 && in.policy.default_factor <= 1))
    return InvalidArgument("interference.defaultFactor: must be in 0..1, got " + number(in.policy.default_factor));
  if (!(in.policy.fade_below_free >= 0 && in.policy.fade_below_free <= 1))
    return InvalidArgument("interference.fadeBelowFree: must be in 0..1, got " + number(in.policy.fade_below_free));
  if (!(in.history.alpha > 0 && in.history.alpha <= 1))
    return InvalidArgument("interference.historyAlpha: must be in (0, 1], got " + number(in.history.alpha));
  if (!(in.history.spread_weight >= 0 && in.history.spread_weight <= 10))
    return InvalidArgument("interference.historySpread: must be in 0..10, got " + number(in.history.spread_weight));
  if (in.history.max_age_s <= 0)
    return InvalidArgument("interference.historyMaxAgeSeconds: must be positive, got " +
                           std::to_string(in.history.max_age_s));
  if (in.history.max_keys < 1) return InvalidArgument("interference.historyMaxWorkloads: must be at least 1");
  static constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool level_ok = false;
  for (const char* level : kLevels) level_ok = level_ok || config.log_level == level;
  if (!level_ok) {
    return InvalidArgument("logLevel: \"" + config.log_level + "\" is not one of trace, debug, info, warn, error");
  }
  for (const std::string& c : config.dra_device_classes) {
    if (c.empty() || c.size() > 253 || c.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos)
      return InvalidArgument("dra.deviceClasses: \"" + c + "\" is not a DeviceClass name (a DNS subdomain)");
  }
  if (config.leader_election.enabled &&
      (config.leader_election.namespace_.empty() || config.leader_election.name.empty())) {
    return InvalidArgument("leaderElection: namespace and name must be set when enabled");
  }
  return Status::Ok();
}

}  // namespace tessera::scheduler
