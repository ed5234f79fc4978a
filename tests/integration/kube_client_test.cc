// tessera_kube against a real kube-apiserver (the ctest `cluster` fixture, or
// TESSERA_TEST_KUBECONFIG / TESSERA_TEST_CLUSTER_DIR from cluster-up.sh).
// Each test works in a namespace of its own with a random suffix, so a
// namespace still terminating never blocks the next test's.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <cctype>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "kube/client.h"
#include "kube/informer.h"
#include "kube/leader_elector.h"

namespace tessera::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using json = nlohmann::json;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string RandomSuffix() {
  static std::mt19937_64 rng(std::random_device{}());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 6; ++i) s += kChars[rng() % 36];
  return s;
}

// Polls `done` every 50 ms for up to `timeout`.
bool Eventually(const std::function<bool()>& done, milliseconds timeout = seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return done();
}

json ConfigMap(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}, {"data", {{"k", "v"}}}};
  if (!labels.empty()) cm["metadata"]["labels"] = labels;
  return cm;
}

json Pod(const std::string& name) {
  // No scheduler serves this schedulerName, so only the test binds the pod.
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"app", "kube-it"}}}}},
          {"spec",
           {{"schedulerName", "kube-it-nobody"},
            {"terminationGracePeriodSeconds", 0},
            {"containers", {{{"name", "main"}, {"image", "registry.example/test:1"}}}}}}};
}

std::string RvOf(const json& obj) { return obj["metadata"]["resourceVersion"].get<std::string>(); }

class KubeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string kubeconfig = Env("TESSERA_TEST_KUBECONFIG");
    if (kubeconfig.empty()) GTEST_SKIP() << "TESSERA_TEST_KUBECONFIG not set: run through ctest -L integration";
    auto config = LoadKubeconfig(kubeconfig);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config->qps = 200;
    config->burst = 400;
    client_.emplace(*config);
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string lower;
    for (char c : test) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ns_ = "kube-it-" + lower.substr(0, 30) + "-" + RandomSuffix();
    auto created = client_->Create("/api/v1/namespaces",
                                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }

  void TearDown() override {
    if (!client_ || ns_.empty()) return;
    if (auto pods = client_->List(PodsPath(ns_)); pods.ok()) {
      for (const auto& p : (*pods)["items"]) {
        (void)client_->Delete(PodPath(ns_, p["metadata"]["name"].get<std::string>()), 0);
      }
    }
    for (const auto& node : nodes_) (void)client_->Delete(NodePath(node));
    EXPECT_TRUE(client_->Delete(NamespacePath(ns_)).ok());
  }

  std::string CmPath(const std::string& name = "") const {
    return NamespacePath(ns_) + "/configmaps" + (name.empty() ? "" : "/" + EscapeComponent(name));
  }

  std::optional<Client> client_;
  std::string ns_;
  std::vector<std::string> nodes_;  // cluster-scoped objects to delete
};

TEST_F(KubeIntegrationTest, CreateGetListWithPaginationUpdateDelete) {
  for (int i = 0; i < 30; ++i) {
    auto cm = client_->Create(CmPath(), ConfigMap("cm-" + std::to_string(i), {{"app", "kube-it"}}));
    ASSERT_TRUE(cm.ok()) << cm.status().ToString();
  }
  ASSERT_TRUE(client_->Create(CmPath(), ConfigMap("other")).ok());

  auto labelled = client_->List(CmPath(), "app=kube-it", "", 7);  // 5 pages
  ASSERT_TRUE(labelled.ok()) << labelled.status().ToString();
  EXPECT_EQ((*labelled)["items"].size(), 30u);
  EXPECT_FALSE((*labelled)["resourceVersion"].get<std::string>().empty());
  std::set<std::string> names;
  for (const auto& item : (*labelled)["items"]) names.insert(item["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), 30u);  // no page repeated or lost
  // Not kube-root-ca.crt, which kube-controller-manager's root-ca-cert-publisher
  // puts in every namespace.
  auto unpaged = client_->List(CmPath(), "", "metadata.name!=kube-root-ca.crt", 0);
  ASSERT_TRUE(unpaged.ok());
  EXPECT_EQ((*unpaged)["items"].size(), 31u);
  auto by_field = client_->List(CmPath(), "", "metadata.name=cm-3", 7);
  ASSERT_TRUE(by_field.ok());
  ASSERT_EQ((*by_field)["items"].size(), 1u);

  auto got = client_->Get(CmPath("cm-3"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"]["k"], "v");

  Status dup = client_->Create(CmPath(), ConfigMap("cm-3")).status();
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists) << dup.ToString();
  EXPECT_NE(dup.message().find("POST " + CmPath() + ": 409 AlreadyExists: configmaps \"cm-3\" already exists"),
            std::string::npos)
      << dup.message();

  json updated = *got;
  updated["data"]["k"] = "v2";
  auto put = client_->Update(CmPath("cm-3"), updated);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ((*put)["data"]["k"], "v2");
  Status stale = client_->Update(CmPath("cm-3"), updated).status();  // resourceVersion of `got`: stale now
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition) << stale.ToString();
  EXPECT_NE(stale.message().find("409 Conflict"), std::string::npos) << stale.message();

  ASSERT_TRUE(client_->Delete(CmPath("cm-3")).ok());
  Status gone = client_->Get(CmPath("cm-3")).status();
  EXPECT_EQ(gone.code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.message(), "GET " + CmPath("cm-3") + ": 404 NotFound: configmaps \"cm-3\" not found");
  EXPECT_EQ(client_->Delete(CmPath("cm-3")).code(), StatusCode::kNotFound);
}

TEST_F(KubeIntegrationTest, WatchSeesAddedModifiedDeletedInOrder) {
  auto list = client_->List(CmPath());
  ASSERT_TRUE(list.ok());
  const std::string from = (*list)["resourceVersion"];

  std::vector<WatchEvent> events;
  std::atomic<bool> stop{false};
  Status watch_status;
  std::thread watcher([&] {
    watch_status = client_->Watch(CmPath(), from,
                                  [&](const WatchEvent& e) {
                                    if (e.type == "BOOKMARK") return true;
                                    // kube-controller-manager adds kube-root-ca.crt to every namespace.
                                    if (e.object["metadata"].value("name", "") == "kube-root-ca.crt") return true;
                                    events.push_back(e);
                                    return e.type != "DELETED";
                                  },
                                  &stop, 60);
  });
  auto created = client_->Create(CmPath(), ConfigMap("watched"));
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(client_->Patch(CmPath("watched"), PatchType::kMerge, {{"data", {{"k", "v2"}}}}).ok());
  ASSERT_TRUE(client_->Delete(CmPath("watched")).ok());
  std::thread guard([&] {  // a safety net only: the watch ends at DELETED
    for (int i = 0; i < 300 && !stop; ++i) std::this_thread::sleep_for(milliseconds(100));
    stop = true;
  });
  watcher.join();
  stop = true;
  guard.join();

  ASSERT_TRUE(watch_status.ok()) << watch_status.ToString();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, "ADDED");
  EXPECT_EQ(events[1].type, "MODIFIED");
  EXPECT_EQ(events[1].object["data"]["k"], "v2");
  EXPECT_EQ(events[2].type, "DELETED");
  EXPECT_EQ(RvOf(events[0].object), RvOf(*created));
  EXPECT_LT(std::stoll(RvOf(events[0].object)), std::stoll(RvOf(events[1].object)));
  EXPECT_LT(std::stoll(RvOf(events[1].object)), std::stoll(RvOf(events[2].object)));
}

TEST_F(KubeIntegrationTest, WatchEndsOnStopFlag) {
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(300));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  Status st = client_->Watch(CmPath(), "", [](const WatchEvent&) { return true; }, &stop, 60);
  stopper.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
}

// etcd's client URL, from the cluster fixture's pid file and etcd's command line.
std::optional<std::string> EtcdEndpoint() {
  const std::string dir = Env("TESSERA_TEST_CLUSTER_DIR");
  std::ifstream pid_file(dir + "/pids/etcd.pid");
  std::string pid;
  if (dir.empty() || !(pid_file >> pid)) return std::nullopt;
  std::ifstream cmdline("/proc/" + pid + "/cmdline");
  std::vector<std::string> args;
  for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--listen-client-urls") return args[i + 1].substr(0, args[i + 1].find(','));
  }
  return std::nullopt;
}

// Compacts etcd's history up to its current revision (through etcd's JSON
// gateway, with the same HTTP client), so older resourceVersions are gone.
Status CompactEtcd(const std::string& endpoint) {
  ClientConfig config;
  config.server = endpoint;
  Client etcd(config);
  TESSERA_ASSIGN_OR_RETURN(json range, etcd.Create("/v3/kv/range", {{"key", "AA=="}}));
  const std::string revision = range["header"]["revision"];
  return etcd.Create("/v3/kv/compaction", {{"revision", revision}, {"physical", true}}).status();
}

json Event(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}}},
          {"involvedObject", {{"kind", "ConfigMap"}, {"namespace", ns}, {"name", "x"}}},
          {"reason", "KubeIt"},
          {"message", "integration test"}};
}

// Events are not served from the apiserver's watch cache, so a watch from a
// resourceVersion that etcd has compacted away gets the real 410 path.
TEST_F(KubeIntegrationTest, WatchFromCompactedResourceVersionIsOutOfRange) {
  const auto endpoint = EtcdEndpoint();
  if (!endpoint) GTEST_SKIP() << "etcd endpoint not found under TESSERA_TEST_CLUSTER_DIR";
  const std::string events = NamespacePath(ns_) + "/events";
  auto first = client_->Create(events, Event(ns_, "e1"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(client_->Create(CmPath(), ConfigMap("bump1")).ok());
  ASSERT_TRUE(client_->Create(CmPath(), ConfigMap("bump2")).ok());
  ASSERT_TRUE(CompactEtcd(*endpoint).ok());

  int delivered = 0;
  Status st = client_->Watch(events, RvOf(*first), [&](const WatchEvent&) { return ++delivered > 0; }, nullptr, 10);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find("410"), std::string::npos) << st.message();
  EXPECT_EQ(delivered, 0);
}

TEST_F(KubeIntegrationTest, InformerRelistsAfterCompaction) {
  const auto endpoint = EtcdEndpoint();
  if (!endpoint) GTEST_SKIP() << "etcd endpoint not found under TESSERA_TEST_CLUSTER_DIR";
  const std::string events = NamespacePath(ns_) + "/events";
  auto before = client_->Create(events, Event(ns_, "before"));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  InformerOptions options;
  options.watch_timeout_seconds = 1;  // watches end every second and resume from the last RV
  Informer informer(*client_, events, options);
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(seconds(10)));
  // The informer's RV is now older than these writes; compacting past them
  // makes its next resume a 410, after which it must list again.
  ASSERT_TRUE(client_->Create(CmPath(), ConfigMap("bump1")).ok());
  ASSERT_TRUE(client_->Create(CmPath(), ConfigMap("bump2")).ok());
  ASSERT_TRUE(CompactEtcd(*endpoint).ok());
  // The watch open now ends within a second and resumes from the compacted
  // RV: a 410, then a list. "after" is written only then, since a watch
  // still open when it is written would deliver it and need no list.
  EXPECT_TRUE(Eventually([&] { return informer.ListCount() >= 2; }, seconds(15))) << informer.ListCount();
  ASSERT_TRUE(client_->Create(events, Event(ns_, "after")).ok());
  EXPECT_TRUE(Eventually([&] { return informer.Get(ns_ + "/after").has_value(); }));
  EXPECT_TRUE(informer.Get(ns_ + "/before").has_value());
}

// More requests at once than the client keeps idle handles (96), burst
// after burst, over one Client with TLS sessions shared, while a watch
// streams on a handle of its own attached to the same share: every request
// is answered and reaches the server.
TEST_F(KubeIntegrationTest, ConcurrentRequestsBeyondThePoolWithSharedTlsSessions) {
  constexpr int kMaps = 16, kBursts = 3, kAtOnce = 160;
  ClientConfig config = client_->config();
  config.qps = 0;
  config.share_tls_sessions = true;
  Client client(config);
  for (int i = 0; i < kMaps; ++i) ASSERT_TRUE(client.Create(CmPath(), ConfigMap("cm-" + std::to_string(i))).ok());
  auto list = client.List(CmPath());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  const std::string from = (*list)["resourceVersion"];

  std::atomic<bool> stop{false};
  std::atomic<int> modified{0};
  std::atomic<int> watches{0};
  Status watched;
  // The API server closes a watcher that falls behind (its buffer of events
  // full: "Forcing configmaps watcher close due to unresponsiveness" in its
  // log), which 160 writers on two busy cores can cause; the stream then
  // ends cleanly. As an informer does, the watcher resumes from the last
  // resourceVersion it saw, so no event is missed or counted twice.
  std::thread watcher([&] {
    std::string rv = from;
    while (!stop.load()) {
      ++watches;
      watched = client.Watch(CmPath(), rv, [&](const WatchEvent& e) {
        if (e.type == "MODIFIED") ++modified;
        if (auto v = e.object.find("metadata"); v != e.object.end() && v->is_object()) {
          if (auto r = v->find("resourceVersion"); r != v->end() && r->is_string()) rv = r->get<std::string>();
        }
        return true;
      }, &stop);
      if (!watched.ok()) break;
    }
  });

  std::atomic<int> failed{0};
  std::string first_error;
  std::mutex error_mu;
  for (int b = 0; b < kBursts; ++b) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kAtOnce; ++t) {
      threads.emplace_back([&, b, t] {
        const json patch = {{"metadata",
                             {{"annotations",
                               {{"kube-it.tessera.io/b" + std::to_string(b) + "-t" + std::to_string(t), "x"}}}}}};
        auto done = client.Patch(CmPath("cm-" + std::to_string(t % kMaps)), PatchType::kMerge, patch);
        if (!done.ok()) {
          ++failed;
          std::lock_guard<std::mutex> lock(error_mu);
          if (first_error.empty()) first_error = done.status().ToString();
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  EXPECT_EQ(failed.load(), 0) << first_error;

  for (int i = 0; i < kMaps; ++i) {
    auto cm = client.Get(CmPath("cm-" + std::to_string(i)));
    ASSERT_TRUE(cm.ok()) << cm.status().ToString();
    EXPECT_EQ((*cm)["metadata"]["annotations"].size(), static_cast<size_t>(kBursts * kAtOnce / kMaps)) << i;
  }
  EXPECT_TRUE(Eventually([&] { return modified.load() == kBursts * kAtOnce; }))
      << modified.load() << " over " << watches.load() << " watch(es)";
  stop = true;
  watcher.join();
  EXPECT_TRUE(watched.ok()) << watched.ToString();
  EXPECT_EQ(modified.load(), kBursts * kAtOnce);  // none twice
  // At least the watch's connection and one per handle beyond the first.
  EXPECT_GE(client.connections_opened(), 2);
}

TEST_F(KubeIntegrationTest, MergeStrategicAndJsonPatch) {
  ASSERT_TRUE(client_->Create(CmPath(), ConfigMap("p")).ok());
  auto merged = client_->Patch(CmPath("p"), PatchType::kMerge, {{"metadata", {{"labels", {{"a", "1"}}}}}});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ((*merged)["metadata"]["labels"]["a"], "1");
  EXPECT_EQ((*merged)["data"]["k"], "v");

  auto patched = client_->Patch(CmPath("p"), PatchType::kJson,
                                json::array({{{"op", "add"}, {"path", "/data/j"}, {"value", "x"}},
                                             {{"op", "remove"}, {"path", "/metadata/labels/a"}}}));
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["data"]["j"], "x");
  EXPECT_FALSE((*patched)["metadata"].contains("labels") && (*patched)["metadata"]["labels"].contains("a"));
  Status failed_test = client_->Patch(CmPath("p"), PatchType::kJson,
                                      json::array({{{"op", "test"}, {"path", "/data/k"}, {"value", "nope"}}}))
                           .status();
  EXPECT_EQ(failed_test.code(), StatusCode::kInvalidArgument) << failed_test.ToString();

  // Strategic merge merges containers by name: the image changes, the
  // container keeps everything else.
  json pod = Pod("sp");
  pod["spec"]["containers"][0]["env"] = {{{"name", "A"}, {"value", "1"}}};
  ASSERT_TRUE(client_->Create(PodsPath(ns_), pod).ok());
  auto strategic = client_->Patch(PodPath(ns_, "sp"), PatchType::kStrategicMerge,
                                  {{"spec", {{"containers", {{{"name", "main"}, {"image", "registry.example/test:2"}}}}}}});
  ASSERT_TRUE(strategic.ok()) << strategic.status().ToString();
  ASSERT_EQ((*strategic)["spec"]["containers"].size(), 1u);
  EXPECT_EQ((*strategic)["spec"]["containers"][0]["image"], "registry.example/test:2");
  EXPECT_EQ((*strategic)["spec"]["containers"][0]["env"][0]["name"], "A");
}

TEST_F(KubeIntegrationTest, BindWithAnnotationsAndUidPrecondition) {
  const std::string node = "kube-it-node-" + RandomSuffix();
  auto created_node = client_->Create("/api/v1/nodes", {{"apiVersion", "v1"},
                                                        {"kind", "Node"},
                                                        {"metadata", {{"name", node}}},
                                                        {"spec", {{"unschedulable", true}}}});
  ASSERT_TRUE(created_node.ok()) << created_node.status().ToString();
  nodes_.push_back(node);
  auto pod = client_->Create(PodsPath(ns_), Pod("b"));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  const std::string uid = (*pod)["metadata"]["uid"];

  Status wrong_uid = client_->Bind(ns_, "b", "00000000-0000-0000-0000-000000000000", node, {{"x", "y"}});
  EXPECT_EQ(wrong_uid.code(), StatusCode::kFailedPrecondition) << wrong_uid.ToString();
  EXPECT_NE(wrong_uid.message().find("POST " + PodPath(ns_, "b") + "/binding: 409 Conflict: "), std::string::npos)
      << wrong_uid.message();
  EXPECT_FALSE((*client_->Get(PodPath(ns_, "b")))["spec"].contains("nodeName"));

  ASSERT_TRUE(client_->Bind(ns_, "b", uid, node, {{"tessera.io/assignment", "{\"v\":1}"}, {"tessera.io/x", "1"}}).ok());
  auto bound = client_->Get(PodPath(ns_, "b"));
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ((*bound)["spec"]["nodeName"], node);
  EXPECT_EQ((*bound)["metadata"]["annotations"]["tessera.io/assignment"], "{\"v\":1}");
  EXPECT_EQ((*bound)["metadata"]["annotations"]["tessera.io/x"], "1");

  Status again = client_->Bind(ns_, "b", uid, node, {});
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.ToString();
  EXPECT_NE(again.message().find("is already assigned to node"), std::string::npos) << again.message();
  EXPECT_EQ(client_->Bind(ns_, "missing", "", node, {}).code(), StatusCode::kNotFound);
}

TEST_F(KubeIntegrationTest, LeaderElectionOneLeaderAndFastHandover) {
  struct Candidate {
    std::atomic<int> started{0}, stopped{0};
    std::unique_ptr<LeaderElector> elector;
  };
  Candidate a, b;
  auto make = [&](Candidate& c, const std::string& id) {
    LeaderElectionConfig config;
    config.lease_namespace = ns_;
    config.name = "kube-it";
    config.identity = id;
    config.lease_duration = seconds(4);
    config.renew_deadline = seconds(3);
    config.retry_period = milliseconds(300);
    config.on_started_leading = [&c] { ++c.started; };
    config.on_stopped_leading = [&c] { ++c.stopped; };
    c.elector = std::make_unique<LeaderElector>(*client_, std::move(config));
  };
  make(a, "candidate-a");
  make(b, "candidate-b");
  ASSERT_TRUE(a.elector->Start().ok());
  ASSERT_TRUE(b.elector->Start().ok());
  ASSERT_TRUE(Eventually([&] { return a.elector->IsLeader() || b.elector->IsLeader(); }));

  // For two seconds (several renewals by the leader, attempts by the other)
  // exactly one leads.
  for (int i = 0; i < 40; ++i) {
    ASSERT_NE(a.elector->IsLeader(), b.elector->IsLeader()) << "sample " << i;
    std::this_thread::sleep_for(milliseconds(50));
  }
  Candidate& leader = a.elector->IsLeader() ? a : b;
  Candidate& other = a.elector->IsLeader() ? b : a;
  const std::string leader_id = &leader == &a ? "candidate-a" : "candidate-b";
  auto lease = client_->Get(LeasePath(ns_, "kube-it"));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], leader_id);
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 4);
  // MicroTime: "2026-01-02T03:04:05.000000Z" (digits where the pattern has 9).
  const std::string renew = (*lease)["spec"]["renewTime"].get<std::string>();
  const std::string pattern = "9999-99-99T99:99:99.999999Z";
  bool micro_time = renew.size() == pattern.size();
  for (size_t i = 0; micro_time && i < pattern.size(); ++i) {
    micro_time = pattern[i] == '9' ? std::isdigit(static_cast<unsigned char>(renew[i])) != 0 : renew[i] == pattern[i];
  }
  EXPECT_TRUE(micro_time) << renew;
  EXPECT_EQ(other.elector->LastObservedHolder(), leader_id);

  // Stop releases the lease: the other takes over well before the 4 s lease would run out.
  const auto stopped_at = std::chrono::steady_clock::now();
  leader.elector->Stop();
  EXPECT_FALSE(leader.elector->IsLeader());
  EXPECT_EQ(leader.started.load(), 1);
  EXPECT_EQ(leader.stopped.load(), 1);
  ASSERT_TRUE(Eventually([&] { return other.elector->IsLeader(); }, seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, milliseconds(3500));
  EXPECT_EQ(other.started.load(), 1);
  auto taken = client_->Get(LeasePath(ns_, "kube-it"));
  ASSERT_TRUE(taken.ok());
  EXPECT_NE((*taken)["spec"]["holderIdentity"], leader_id);
  EXPECT_GE((*taken)["spec"]["leaseTransitions"].get<int>(), 1);
  other.elector->Stop();
  EXPECT_EQ(other.stopped.load(), 1);
  auto released = client_->Get(LeasePath(ns_, "kube-it"));
  ASSERT_TRUE(released.ok());
  EXPECT_EQ((*released)["spec"]["holderIdentity"], "");
  EXPECT_EQ((*released)["spec"]["leaseDurationSeconds"], 1);
}

TEST_F(KubeIntegrationTest, InformerConvergesOnPods) {
  std::mutex mu;
  std::vector<std::string> calls;
  EventHandlers handlers;
  handlers.on_add = [&](const json& o) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back("add " + o["metadata"]["name"].get<std::string>());
  };
  handlers.on_update = [&](const json&, const json& n) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back("update " + n["metadata"]["name"].get<std::string>());
  };
  handlers.on_delete = [&](const json& o) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back("delete " + o["metadata"]["name"].get<std::string>());
  };
  ASSERT_TRUE(client_->Create(PodsPath(ns_), Pod("p0")).ok());  // before the informer: comes with the list
  InformerOptions options;
  options.page_size = 2;
  Informer informer(*client_, PodsPath(ns_), options);
  ASSERT_TRUE(informer.AddHandlers(handlers).ok());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(seconds(10)));
  EXPECT_TRUE(informer.Get(ns_ + "/p0").has_value());

  for (const char* name : {"p1", "p2", "p3"}) ASSERT_TRUE(client_->Create(PodsPath(ns_), Pod(name)).ok());
  ASSERT_TRUE(client_->Patch(PodPath(ns_, "p2"), PatchType::kMerge, {{"metadata", {{"labels", {{"v", "2"}}}}}}).ok());
  ASSERT_TRUE(client_->Delete(PodPath(ns_, "p3"), 0).ok());

  // The store converges to the server's list, object for object.
  auto matches_server = [&] {
    auto server = client_->List(PodsPath(ns_));
    if (!server.ok()) return false;
    std::map<std::string, std::string> want, have;
    for (const auto& p : (*server)["items"]) want[Informer::KeyOf(p)] = RvOf(p);
    for (const auto& p : informer.List()) have[Informer::KeyOf(p)] = RvOf(p);
    return want == have;
  };
  ASSERT_TRUE(Eventually(matches_server));
  auto p2 = informer.Get(ns_ + "/p2");
  ASSERT_TRUE(p2.has_value());
  EXPECT_EQ((*p2)["metadata"]["labels"]["v"], "2");
  EXPECT_FALSE(informer.Get(ns_ + "/p3").has_value());
  informer.Stop();

  std::lock_guard<std::mutex> lock(mu);
  auto has = [&](const std::string& c) { return std::find(calls.begin(), calls.end(), c) != calls.end(); };
  for (const char* c : {"add p0", "add p1", "add p2", "add p3", "update p2", "delete p3"}) {
    EXPECT_TRUE(has(c)) << c << " missing from " << ::testing::PrintToString(calls);
  }
  // Order per object: add before update before delete.
  auto pos = [&](const std::string& c) { return std::find(calls.begin(), calls.end(), c) - calls.begin(); };
  EXPECT_LT(pos("add p2"), pos("update p2"));
  EXPECT_LT(pos("add p3"), pos("delete p3"));
}

}  // namespace
}  // namespace tessera::kube
