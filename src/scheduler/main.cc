// tessera-scheduler: the kube-scheduler extender. Watches nodes and pods to
// keep the GPU ledger, answers filter/prioritize/bind over HTTP, and binds
// (and evicts, and advises on ResourceClaims no GPU can take) only while it
// holds the leader Lease.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>

#include "core/codec.h"
#include "core/dra_names.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/leader_elector.h"
#include "scheduler/claim_advisor.h"
#include "scheduler/cluster_state.h"
#include "scheduler/config.h"
#include "scheduler/extender.h"
#include "scheduler/kube_adapters.h"
#include "scheduler/server.h"
#include "scheduler/state_metrics.h"

namespace tessera::scheduler {
namespace {

std::string DefaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + "_" + std::to_string(getpid());
}

int Run(const SchedulerConfig& config) {
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  auto kube_config = kube::ResolveConfig(config.kubeconfig);
  if (!kube_config.ok()) {
    spdlog::critical("cannot find the API server: {}", kube_config.status().message());
    return 1;
  }
  spdlog::info("tessera-scheduler: API server {}, policy {}, resources {} {} {}, assume TTL {}s, filter answers {}, "
               "pods without GPUs {}",
               kube_config->server, config.policy, config.resources.gpu, config.resources.mem,
               config.resources.core, config.assume_ttl.count(),
               config.filter_returns_best ? "the chosen node" : "every fitting node",
               config.place_pods_without_gpus ? "scored by the policy (/dra/prioritize)" : "left to kube-scheduler");
  if (config.resources.gpushare.enabled) {
    spdlog::info("front end gpushare: {} (GiB, one GPU per container)", config.resources.gpushare.mem);
  }
  if (!config.isolation_none_namespaces.empty()) {
    std::string list;
    for (const std::string& ns : config.isolation_none_namespaces) list += (list.empty() ? "" : ", ") + ns;
    spdlog::warn("tessera.io/isolation: none (shares placed, not enforced) is allowed for pods in: {}", list);
  }
  if (config.resources.hami.enabled) {
    const auto& h = config.resources.hami;
    spdlog::info("front end HAMi: {} {} {} {}", h.gpu, h.mem, h.mem_percent, h.core);
  }
  kube_config->qps = config.api_qps;
  kube_config->burst = config.api_burst;
  kube::Client client(kube_config.value());

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const bool scores_load = config.policy == "tessera-interference";
  if (scores_load) {
    const auto& in = config.interference;
    spdlog::info("tessera-interference: ceiling {}, weight {}, default factor {}, fade below free {}, {}",
                 in.policy.ceiling, in.policy.weight, in.policy.default_factor, in.policy.fade_below_free,
                 in.learn_from_usage ? fmt::format("learning from {} (history alpha {}, spread {}, max age {}s)",
                                                   core::kUsageAnnotation, in.history.alpha,
                                                   in.history.spread_weight, in.history.max_age_s)
                                     : std::string("predicting every share from its request"));
  }
  ClusterState state(ClusterStateOptions{
      .resources = config.resources,
      .assume_ttl = config.assume_ttl,
      .admission_wait = config.admission_wait,
      .logger = {},
      // Only tessera-interference reads predicted loads; other policies'
      // cached scores are not invalidated by usage reports.
      .load = {.learn = scores_load && config.interference.learn_from_usage,
               .default_factor = config.interference.policy.default_factor,
               .history = config.interference.history},
      .wall_now = {},
      .dra_driver = core::kDraDriver,
      .dra_classes = {config.dra_device_classes.begin(), config.dra_device_classes.end()}});
  kube::Informer nodes(client, "/api/v1/nodes");
  kube::Informer pods(client, "/api/v1/pods");
  // DRA (docs/notes/dra.md): the driver's slices say which GPU each device
  // is and in what order kube-scheduler's allocator tries them; allocated
  // claims are booked beside the pods' shares.
  kube::InformerOptions slice_options;
  slice_options.field_selector = std::string("spec.driver=") + core::kDraDriver;
  kube::Informer slices(client, "/apis/resource.k8s.io/v1/resourceslices", slice_options);
  kube::Informer claims(client, "/apis/resource.k8s.io/v1/resourceclaims");
  (void)slices.AddHandlers({
      .on_add = [&](const nlohmann::json& s) { state.UpsertSlice(s); },
      .on_update = [&](const nlohmann::json&, const nlohmann::json& s) { state.UpsertSlice(s); },
      .on_delete = [&](const nlohmann::json& s) { state.DeleteSlice(s); },
  });
  // Set once the extender exists (before the informers start).
  Extender* extender_ptr = nullptr;
  // Room appeared (ClusterState::freed_count): pods turned away just before
  // are woken. Called from the pod, claim and node informers' threads.
  std::atomic<uint64_t> freed_seen{0};
  auto after_pod_event = [&] {
    const uint64_t freed = state.freed_count();
    if (freed_seen.exchange(freed) != freed && extender_ptr != nullptr)
      WakeRejected(client, extender_ptr->rejected(), Clock::now(), std::chrono::system_clock::now());
  };
  (void)nodes.AddHandlers({
      .on_add = [&](const nlohmann::json& n) { state.UpsertNode(n); after_pod_event(); },
      .on_update = [&](const nlohmann::json&, const nlohmann::json& n) { state.UpsertNode(n); after_pod_event(); },
      .on_delete = [&](const nlohmann::json& n) { state.DeleteNode(n["metadata"].value("name", std::string())); },
  });
  // Pods asking the DRA driver for what no GPU has get a reason of their
  // own (kube-scheduler's is "cannot allocate all claims" whatever the cause).
  // may_act is set below, with the extender's options.
  std::function<Status()> may_act;
  ClaimAdvisor claim_advisor(client, {.may_act = [&] { return may_act(); }});
  // A pod event is decoded once: the ledger takes the view, and a pod still
  // waiting for a node is offered to the extender, whose filter call for it
  // then skips decoding kube-scheduler's copy.
  auto upsert_pod = [&](const nlohmann::json& p) {
    std::shared_ptr<const core::PodView> view = state.UpsertPod(p);
    if (extender_ptr != nullptr) extender_ptr->RememberPendingPod(std::move(view));
    claim_advisor.Observe(p);
    after_pod_event();
  };
  (void)pods.AddHandlers({
      .on_add = upsert_pod,
      .on_update = [&](const nlohmann::json&, const nlohmann::json& p) { upsert_pod(p); },
      .on_delete = [&](const nlohmann::json& p) { state.DeletePod(p); claim_advisor.Forget(p); after_pod_event(); },
  });

  (void)claims.AddHandlers({
      .on_add = [&](const nlohmann::json& c) { state.UpsertClaim(c); after_pod_event(); },
      .on_update = [&](const nlohmann::json&, const nlohmann::json& c) { state.UpsertClaim(c); after_pod_event(); },
      .on_delete = [&](const nlohmann::json& c) { state.DeleteClaim(c); after_pod_event(); },
  });

  std::unique_ptr<kube::LeaderElector> elector;
  if (config.leader_election.enabled) {
    const std::string identity =
        config.leader_election.identity.empty() ? DefaultIdentity() : config.leader_election.identity;
    elector = std::make_unique<kube::LeaderElector>(
        client, kube::LeaderElectionConfig{
                    .lease_namespace = config.leader_election.namespace_,
                    .name = config.leader_election.name,
                    .identity = identity,
                    .on_started_leading = [identity] { spdlog::info("leader election: {} now leads; binding", identity); },
                    .on_stopped_leading = [identity] { spdlog::warn("leader election: {} stopped leading; not binding", identity); },
                });
  }

  ApiBinder binder(client);
  ApiPreemption preemption_api(client);
  PreemptorOptions preemptor_options;
  preemptor_options.enabled = config.preemption.enabled;
  preemptor_options.nomination_ttl = config.preemption.nomination_ttl;
  preemptor_options.max_victims = config.preemption.max_victims;
  ExtenderOptions extender_options;
  extender_options.policy = config.policy;
  extender_options.filter_returns_best = config.filter_returns_best;
  extender_options.place_pods_without_gpus = config.place_pods_without_gpus;
  extender_options.isolation_none_namespaces = config.isolation_none_namespaces;
  extender_options.seed = config.seed;
  extender_options.interference = config.interference.policy;
  extender_options.may_bind = [&]() -> Status {
    if (!nodes.HasSynced() || !pods.HasSynced()) return Status(StatusCode::kUnavailable, "caches not synced yet");
    if (elector && !elector->IsLeader()) {
      const std::string holder = elector->LastObservedHolder();
      return FailedPrecondition("this replica is not the leader" + (holder.empty() ? "" : " (leader: " + holder + ")"));
    }
    return Status::Ok();
  };
  preemptor_options.may_act = extender_options.may_bind;  // only the leader, with synced caches, evicts
  may_act = extender_options.may_bind;                    // ... and advises on claims
  GpuPreemptor preemptor(state, preemption_api, preemptor_options);
  extender_options.preemptor = &preemptor;
  auto extender = Extender::Create(state, binder, extender_options);
  if (!extender.ok()) {
    spdlog::critical("{}", extender.status().message());
    return 2;
  }

  ServerOptions server_options;
  server_options.tls_cert_file = config.tls_cert_file;
  server_options.tls_key_file = config.tls_key_file;
  server_options.ready = [&]() -> Status {
    if (!nodes.HasSynced()) return Status(StatusCode::kUnavailable, "node cache not synced");
    if (!pods.HasSynced()) return Status(StatusCode::kUnavailable, "pod cache not synced");
    if (elector && !elector->IsLeader()) {
      return Status(StatusCode::kUnavailable, "standby: leader is " + elector->LastObservedHolder());
    }
    return Status::Ok();
  };
  // /metrics: the verbs' latency and decisions (added by the server), the
  // ledger and whether this replica leads.
  metrics::Registry registry;
  if (Status s = RegisterStateMetrics(registry, state, [&] { return !elector || elector->IsLeader(); }); !s.ok()) {
    spdlog::critical("metrics: {}", s.message());
    return 2;
  }
  server_options.metrics = &registry;
  extender_ptr = extender->get();
  ExtenderServer server(**extender, server_options);

  // The DRA informers do not gate readiness or binds: a cluster without
  // resource.k8s.io/v1 (before 1.34) must still schedule device-plugin pods.
  for (kube::Informer* informer : {&nodes, &pods, &slices, &claims}) {
    if (Status s = informer->Start(); !s.ok()) {
      spdlog::critical("{}", s.message());
      return 1;
    }
  }
  if (elector) {
    if (Status s = elector->Start(); !s.ok()) {
      spdlog::critical("leader election: {}", s.message());
      return 2;
    }
  }
  // Serve at once so /healthz answers; /readyz and bind wait for the caches,
  // since a ledger without the live pods would over-commit their GPUs.
  auto port = server.Start(config.listen_address, config.port);
  if (!port.ok()) {
    spdlog::critical("cannot serve on {}:{}: {}", config.listen_address, config.port, port.status().message());
    return 1;
  }
  spdlog::info("serving the extender on {}://{}:{}", config.tls() ? "https" : "http", config.listen_address,
               port.value());
  preemptor.Start();
  claim_advisor.Start();
  spdlog::info("GPU preemption {} (nomination TTL {} s, at most {} victims per node)",
               config.preemption.enabled ? "on" : "off", config.preemption.nomination_ttl.count(),
               config.preemption.max_victims);
  bool synced_logged = false;

  // Housekeeping until a stop signal: expire lost assumptions every second,
  // log the state every minute.
  int ticks = 0;
  while (true) {
    timespec one_second{1, 0};
    const int sig = sigtimedwait(&stop_signals, nullptr, &one_second);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("signal {}: shutting down", sig);
      break;
    }
    if (int expired = state.ExpireAssumed(Clock::now()); expired > 0) {
      spdlog::warn("released {} assumed pods the pod watch never confirmed within {}s", expired,
                   config.assume_ttl.count());
    }
    if (!synced_logged && nodes.HasSynced() && pods.HasSynced()) {
      spdlog::info("caches synced: {}", state.Summary().ToString());
      synced_logged = true;
    }
    if (++ticks % 60 == 0) spdlog::info("state: {}", state.Summary().ToString());
  }
  // Leadership first: the Lease is released at once, so a standby binds
  // within its retry period instead of waiting for this replica's HTTP
  // server, which drains open keep-alive connections (up to their idle
  // timeout) before it returns.
  if (elector) elector->Stop();
  preemptor.Stop();
  claim_advisor.Stop();
  spdlog::info("shutting down: the HTTP server closes its keep-alive connections (at most {} s idle)",
               server_options.keep_alive_seconds);
  server.Stop();
  claims.Stop();
  slices.Stop();
  pods.Stop();
  nodes.Stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace tessera::scheduler

int main(int argc, char** argv) {
  using tessera::scheduler::SchedulerConfig;
  CLI::App app{"tessera-scheduler: kube-scheduler extender that places pods on shares of GPUs"};
  std::string config_file;
  SchedulerConfig flags;
  std::string leader_elect;
  int64_t assume_ttl = 0;
  app.add_option("--config", config_file, "YAML configuration file (deploy/tessera-scheduler.yaml shows every key)");
  auto* o_kubeconfig = app.add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  auto* o_listen = app.add_option("--listen-address", flags.listen_address, "address to serve on");
  auto* o_port = app.add_option("--port", flags.port, "port to serve on");
  auto* o_policy = app.add_option("--policy", flags.policy, "placement policy: random, dotprod, clustering, packing, bestfit, fgd, tessera, tessera-interference");
  std::string filter_returns_best;
  auto* o_best = app.add_option("--filter-returns-best", filter_returns_best,
                                "true|false: filter answers only the node Tessera chooses, so kube-scheduler "
                                "neither scores nor calls prioritize (filterReturnsBest; default true)");
  std::string place_without_gpus;
  auto* o_without = app.add_option("--place-pods-without-gpus", place_without_gpus,
                                   "true|false: the /dra entry's prioritize also scores pods that ask for no GPU, "
                                   "so they strand the least GPU capacity (placePodsWithoutGpus; default true)");
  auto* o_level = app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error");
  auto* o_tls_cert = app.add_option("--tls-cert-file", flags.tls_cert_file, "serve HTTPS with this certificate");
  auto* o_tls_key = app.add_option("--tls-key-file", flags.tls_key_file, "and this key");
  auto* o_leader = app.add_option("--leader-elect", leader_elect, "true|false: bind only while holding the Lease");
  auto* o_lease_ns = app.add_option("--lease-namespace", flags.leader_election.namespace_, "namespace of the Lease");
  auto* o_lease_name = app.add_option("--lease-name", flags.leader_election.name, "name of the Lease");
  auto* o_identity = app.add_option("--identity", flags.leader_election.identity, "this replica's identity (default hostname_pid)");
  auto* o_ttl = app.add_option("--assume-ttl-seconds", assume_ttl, "release an unconfirmed bind after this long");
  int64_t admission_wait_ms = 0;
  auto* o_wait = app.add_option("--admission-wait-ms", admission_wait_ms,
                                "how long a bind waits for its node to admit the pod bound there before "
                                "(nodes with tessera-node; keep below kube-scheduler's extender httpTimeout)");
  auto* o_seed = app.add_option("--seed", flags.seed, "seed for random tie-breaks");
  auto* o_qps = app.add_option("--kube-api-qps", flags.api_qps, "requests per second to the API server");
  auto* o_burst = app.add_option("--kube-api-burst", flags.api_burst, "burst of requests to the API server");
  std::string gpushare, hami;
  auto* o_gpushare = app.add_option("--gpushare", gpushare,
                                    "true|false: accept gpushare's aliyun.com/gpu-mem (GiB) (frontEnds.gpushare)");
  auto* o_hami = app.add_option("--hami", hami,
                                "true|false: accept HAMi's nvidia.com/gpu, gpumem, gpumem-percentage, gpucores "
                                "(frontEnds.hami)");
  auto* o_hami_gpu = app.add_option("--hami-gpu-resource", flags.resources.hami.gpu,
                                    "HAMi's GPU count resource (default nvidia.com/gpu; rename it where NVIDIA's "
                                    "device plugin also runs)");
  std::string preemption;
  int64_t nomination_ttl = 0;
  auto* o_preemption = app.add_option("--preemption", preemption,
                                      "true|false: evict lower-priority pods for a pod's GPU shares (default true)");
  auto* o_nomination_ttl = app.add_option("--nomination-ttl-seconds", nomination_ttl,
                                          "how long a share freed by preemption is held for its pod (default 60)");
  auto* o_max_victims = app.add_option("--preemption-max-victims", flags.preemption.max_victims,
                                       "most pods evicted on one node for one pod; 0: no limit (default 16)");
  o_preemption->check(CLI::IsMember({"true", "false"}));
  o_best->check(CLI::IsMember({"true", "false"}));
  o_without->check(CLI::IsMember({"true", "false"}));
  o_gpushare->check(CLI::IsMember({"true", "false"}));
  o_hami->check(CLI::IsMember({"true", "false"}));
  o_leader->check(CLI::IsMember({"true", "false"}));
  CLI11_PARSE(app, argc, argv);

  SchedulerConfig config;
  if (!config_file.empty()) {
    auto loaded = tessera::scheduler::LoadConfigFile(config_file);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tessera-scheduler: %s\n", loaded.status().message().c_str());
      return 2;
    }
    config = loaded.value();
  }
  // Flags given on the command line win over the file.
  if (o_kubeconfig->count()) config.kubeconfig = flags.kubeconfig;
  if (o_listen->count()) config.listen_address = flags.listen_address;
  if (o_port->count()) config.port = flags.port;
  if (o_policy->count()) config.policy = flags.policy;
  if (o_best->count()) config.filter_returns_best = filter_returns_best == "true";
  if (o_without->count()) config.place_pods_without_gpus = place_without_gpus == "true";
  if (o_level->count()) config.log_level = flags.log_level;
  if (o_tls_cert->count()) config.tls_cert_file = flags.tls_cert_file;
  if (o_tls_key->count()) config.tls_key_file = flags.tls_key_file;
  if (o_leader->count()) config.leader_election.enabled = leader_elect == "true";
  if (o_lease_ns->count()) config.leader_election.namespace_ = flags.leader_election.namespace_;
  if (o_lease_name->count()) config.leader_election.name = flags.leader_election.name;
  if (o_identity->count()) config.leader_election.identity = flags.leader_election.identity;
  if (o_ttl->count()) config.assume_ttl = std::chrono::seconds(assume_ttl);
  if (o_wait->count()) config.admission_wait = std::chrono::milliseconds(admission_wait_ms);
  if (o_seed->count()) config.seed = flags.seed;
  if (o_qps->count()) config.api_qps = flags.api_qps;
  if (o_burst->count()) config.api_burst = flags.api_burst;
  if (o_gpushare->count()) config.resources.gpushare.enabled = gpushare == "true";
  if (o_hami->count()) config.resources.hami.enabled = hami == "true";
  if (o_hami_gpu->count()) config.resources.hami.gpu = flags.resources.hami.gpu;
  if (o_preemption->count()) config.preemption.enabled = preemption == "true";
  if (o_nomination_ttl->count()) config.preemption.nomination_ttl = std::chrono::seconds(nomination_ttl);
  if (o_max_victims->count()) config.preemption.max_victims = flags.preemption.max_victims;
  if (auto s = tessera::scheduler::ValidateConfig(config); !s.ok()) {
    std::fprintf(stderr, "tessera-scheduler: %s\n", s.message().c_str());
    return 2;
  }
  return tessera::scheduler::Run(config);
}
