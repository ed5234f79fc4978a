#include "scheduler/config.h"

#include <gtest/gtest.h>

namespace tessera::scheduler {
namespace {

TEST(ConfigTest, EmptyFileGivesDefaults) {
  auto config = ParseConfig("", "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->policy, "tessera");
  EXPECT_EQ(config->resources.mem, "tessera.io/gpu-mem");
  EXPECT_TRUE(config->leader_election.enabled);
  EXPECT_FALSE(config->tls());
}

TEST(ConfigTest, ReadsEveryField) {
  auto config = ParseConfig(R"(
listenAddress: 0.0.0.0
port: 9443
tls: {certFile: /c.pem, keyFile: /k.pem}
kubeconfig: /kc
policy: fgd
resourceNames: {gpu: example.com/gpu, gpuMem: example.com/mem, gpuCore: example.com/core}
assumeTTLSeconds: 30
admissionWaitMillis: 2500
leaderElection: {enabled: false, namespace: tessera, name: ext, identity: me}
logLevel: debug
seed: 7
apiQPS: 500
apiBurst: 800
)",
                            "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen_address, "0.0.0.0");
  EXPECT_EQ(config->port, 9443);
  EXPECT_TRUE(config->tls());
  EXPECT_EQ(config->policy, "fgd");
  EXPECT_EQ(config->resources.core, "example.com/core");
  EXPECT_EQ(config->assume_ttl.count(), 30);
  EXPECT_EQ(config->admission_wait.count(), 2500);
  EXPECT_FALSE(config->leader_election.enabled);
  EXPECT_EQ(config->leader_election.identity, "me");
  EXPECT_EQ(config->seed, 7u);
  EXPECT_EQ(config->api_qps, 500);
  EXPECT_EQ(config->api_burst, 800);
}

void ExpectError(const std::string& yaml, const std::string& fragment) {
  auto config = ParseConfig(yaml, "c.yaml");
  ASSERT_FALSE(config.ok()) << yaml;
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(fragment), std::string::npos) << config.status().message();
  EXPECT_NE(config.status().message().find("c.yaml"), std::string::npos) << config.status().message();
}

TEST(ConfigTest, RejectsMistakesWithTheFieldName) {
  ExpectError("polcy: fgd", "unknown key \"polcy\"");
  ExpectError("policy: bin-pack", "policy:");
  ExpectError("port: 70000", "port: 70000");
  ExpectError("port: abc", "port");
  ExpectError("tls: {certFile: /c.pem}", "together");
  ExpectError("resourceNames: {gpuMem: gpu-mem}", "not an extended resource name");
  ExpectError("resourceNames: {gpuMem: kubernetes.io/gpu-mem}", "not an extended resource name");
  ExpectError("resourceNames: {gpuMem: tessera.io/gpu}", "must differ");
  ExpectError("assumeTTLSeconds: 0", "positive");
  ExpectError("admissionWaitMillis: -1", "0..600000");
  ExpectError("logLevel: loud", "logLevel");
  ExpectError("apiQPS: 0", "apiQPS");
  ExpectError("leaderElection: {name: \"\"}", "leaderElection");
  ExpectError("[1, 2]", "mapping");
  ExpectError("policy: [unclosed", "YAML");
}

TEST(ConfigTest, DraDeviceClasses) {
  auto config = ParseConfig("dra: {deviceClasses: [gpu.tessera.io, gpu-small.example.com]}", "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->dra_device_classes, (std::vector<std::string>{"gpu.tessera.io", "gpu-small.example.com"}));
  EXPECT_EQ(SchedulerConfig{}.dra_device_classes, std::vector<std::string>{"gpu.tessera.io"});
  ExpectError("dra: {deviceClasses: [Bad_Name]}", "dra.deviceClasses: \"Bad_Name\"");
  ExpectError("dra: {classes: [x]}", "unknown key \"classes\"");
  ExpectError("dra: {deviceClasses: gpu}", "dra.deviceClasses");
}

TEST(ConfigTest, FrontEndsAreOffByDefaultAndConfigurable) {
  auto defaults = ParseConfig("", "c.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->resources.gpushare.enabled);
  EXPECT_FALSE(defaults->resources.hami.enabled);
  auto config = ParseConfig(R"(
frontEnds:
  gpushare: {enabled: true, gpuMem: aliyun.com/gpu-mem}
  hami: {enabled: true, gpu: hami.io/vgpu, gpuMem: nvidia.com/gpumem,
         gpuMemPercentage: nvidia.com/gpumem-percentage, gpuCores: nvidia.com/gpucores}
)",
                            "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->resources.gpushare.enabled);
  EXPECT_TRUE(config->resources.hami.enabled);
  EXPECT_EQ(config->resources.hami.gpu, "hami.io/vgpu");
  EXPECT_EQ(config->resources.All().size(), 8u);
}

TEST(ConfigTest, FrontEndMistakes) {
  ExpectError("frontEnds: {gpushare: {enable: true}}", "unknown key \"enable\"");
  ExpectError("frontEnds: {volcano: {}}", "unknown key \"volcano\"");
  ExpectError("frontEnds: {hami: {enabled: maybe}}", "frontEnds.hami.enabled");
  ExpectError("frontEnds: {hami: {enabled: true, gpu: vgpu}}", "\"vgpu\" is not an extended resource name");
  ExpectError("frontEnds: {hami: {enabled: true, gpu: tessera.io/gpu}}", "\"tessera.io/gpu\" is used twice");
  ExpectError("frontEnds: {gpushare: {enabled: true, gpuMem: nvidia.com/gpumem}, hami: {enabled: true}}",
              "used twice");
  // A disabled front end's names are not checked: nothing reads them.
  EXPECT_TRUE(ParseConfig("frontEnds: {hami: {gpu: tessera.io/gpu}}", "c.yaml").ok());
}

TEST(ConfigTest, MissingFileIsNotFound) {
  auto config = LoadConfigFile("no/such/config.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace {

TEST(ConfigTest, ShippedExampleParsesToTheDefaults) {
  auto config = LoadConfigFile("deploy/tessera-scheduler.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const SchedulerConfig defaults;
  EXPECT_EQ(config->port, defaults.port);
  EXPECT_EQ(config->policy, defaults.policy);
  EXPECT_EQ(config->filter_returns_best, defaults.filter_returns_best);
  EXPECT_EQ(config->assume_ttl, defaults.assume_ttl);
  EXPECT_EQ(config->leader_election.name, defaults.leader_election.name);
  EXPECT_EQ(config->preemption.enabled, defaults.preemption.enabled);
  EXPECT_EQ(config->dra_device_classes, defaults.dra_device_classes);
  EXPECT_EQ(config->preemption.nomination_ttl, defaults.preemption.nomination_ttl);
  EXPECT_EQ(config->preemption.max_victims, defaults.preemption.max_victims);
  EXPECT_EQ(config->interference.policy.ceiling, defaults.interference.policy.ceiling);
  EXPECT_EQ(config->interference.policy.weight, defaults.interference.policy.weight);
  EXPECT_EQ(config->interference.policy.default_factor, defaults.interference.policy.default_factor);
  EXPECT_EQ(config->interference.policy.fade_below_free, defaults.interference.policy.fade_below_free);
  EXPECT_EQ(config->interference.learn_from_usage, defaults.interference.learn_from_usage);
  EXPECT_EQ(config->interference.history.alpha, defaults.interference.history.alpha);
  EXPECT_EQ(config->interference.history.spread_weight, defaults.interference.history.spread_weight);
  EXPECT_EQ(config->interference.history.max_age_s, defaults.interference.history.max_age_s);
  EXPECT_EQ(config->interference.history.max_keys, defaults.interference.history.max_keys);
}

TEST(ConfigTest, InterferenceSettings) {
  const SchedulerConfig defaults;
  EXPECT_DOUBLE_EQ(defaults.interference.policy.ceiling, 0.70);
  EXPECT_TRUE(defaults.interference.learn_from_usage);
  auto config = ParseConfig(
      "policy: tessera-interference\n"
      "interference: {ceiling: 0.6, weight: 2, defaultFactor: 0.5, fadeBelowFree: 0.3, learnFromUsage: false,\n"
      "               historyAlpha: 0.5,\n"
      "               historySpread: 0, historyMaxAgeSeconds: 3600, historyMaxWorkloads: 50}\n",
      "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_DOUBLE_EQ(config->interference.policy.ceiling, 0.6);
  EXPECT_DOUBLE_EQ(config->interference.policy.weight, 2);
  EXPECT_DOUBLE_EQ(config->interference.policy.default_factor, 0.5);
  EXPECT_DOUBLE_EQ(config->interference.policy.fade_below_free, 0.3);
  EXPECT_FALSE(config->interference.learn_from_usage);
  EXPECT_DOUBLE_EQ(config->interference.history.alpha, 0.5);
  EXPECT_DOUBLE_EQ(config->interference.history.spread_weight, 0);
  EXPECT_EQ(config->interference.history.max_age_s, 3600);
  EXPECT_EQ(config->interference.history.max_keys, 50u);
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"interference: {ceiling: 0}", "interference.ceiling: must be in (0, 1], got 0"},
           {"interference: {ceiling: 1.5}", "interference.ceiling"},
           {"interference: {weight: -1}", "interference.weight"},
           {"interference: {defaultFactor: 2}", "interference.defaultFactor"},
           {"interference: {fadeBelowFree: 1.5}", "interference.fadeBelowFree"},
           {"interference: {historyAlpha: 0}", "interference.historyAlpha"},
           {"interference: {historySpread: -1}", "interference.historySpread"},
           {"interference: {historyMaxAgeSeconds: 0}", "interference.historyMaxAgeSeconds"},
           {"interference: {historyMaxWorkloads: 0}", "interference.historyMaxWorkloads"},
           {"interference: {ceilling: 0.5}", "unknown key \"ceilling\""},
           {"interference: {ceiling: high}", "interference.ceiling"},
           {"interference: 0.7", "interference: expected a mapping"}}) {
    auto bad = ParseConfig(text + "\n", "c.yaml");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(field), std::string::npos) << text << ": " << bad.status().message();
  }
}

TEST(ConfigTest, FilterReturnsBest) {
  EXPECT_TRUE(SchedulerConfig{}.filter_returns_best);
  auto config = ParseConfig("filterReturnsBest: false\n", "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->filter_returns_best);
  config = ParseConfig("filterReturnsBest: sometimes\n", "c.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("filterReturnsBest"), std::string::npos) << config.status().message();
}

TEST(ConfigTest, PlacePodsWithoutGpus) {
  EXPECT_TRUE(SchedulerConfig{}.place_pods_without_gpus);
  auto config = ParseConfig("placePodsWithoutGpus: false\n", "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->place_pods_without_gpus);
  config = ParseConfig("placePodsWithoutGpus: 3\n", "c.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("placePodsWithoutGpus"), std::string::npos) << config.status().message();
}

TEST(ConfigTest, PreemptionSettings) {
  const SchedulerConfig defaults;
  EXPECT_TRUE(defaults.preemption.enabled);
  EXPECT_EQ(defaults.preemption.nomination_ttl, std::chrono::seconds(60));
  EXPECT_EQ(defaults.preemption.max_victims, 16);
  auto config = ParseConfig("preemption: {enabled: false, nominationTTLSeconds: 30, maxVictims: 0}\n", "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->preemption.enabled);
  EXPECT_EQ(config->preemption.nomination_ttl, std::chrono::seconds(30));
  EXPECT_EQ(config->preemption.max_victims, 0);
  auto bad = ParseConfig("preemption: {nominationTTLSeconds: 0}\n", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nominationTTLSeconds"), std::string::npos) << bad.status().message();
  bad = ParseConfig("preemption: {maxVictim: 3}\n", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("maxVictims"), std::string::npos) << bad.status().message();
}

// tessera.io/isolation: none is the operator's to allow, per namespace.
TEST(ConfigTest, IsolationNoneNamespacesDefaultToNone) {
  auto config = ParseConfig("", "c.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->isolation_none_namespaces.empty());
  config = ParseConfig("isolationNoneNamespaces: [trusted, \"*\"]\n", "c.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->isolation_none_namespaces, (std::vector<std::string>{"trusted", "*"}));
  config = ParseConfig("isolationNoneNamespaces: trusted\n", "c.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("isolationNoneNamespaces"), std::string::npos) << config.status().message();
  config = ParseConfig("isolationNoneNamespaces: [\"\"]\n", "c.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "c.yaml: isolationNoneNamespaces: an empty namespace name");
  // A name no namespace can have would never match: said at start, not ignored.
  for (const char* bad : {"Team-A", "team_a", "-team", "team*"}) {
    config = ParseConfig(std::string("isolationNoneNamespaces: [\"") + bad + "\"]\n", "c.yaml");
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find(std::string("\"") + bad + "\" is not a namespace name"),
              std::string::npos)
        << config.status().message();
  }
}

}  // namespace
}  // namespace tessera::scheduler
