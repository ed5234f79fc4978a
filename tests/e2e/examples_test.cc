// End-to-end for the shipped examples: every Kubernetes manifest under
// examples/ (every *.yaml but examples/cluster/, which is tessera-nodesim's
// node list, not Kubernetes objects, and examples/dra/, whose claims need a
// real kubelet's DRA manager: e2e_real_node_dra_test runs it) is applied to
// the loopback cluster and
// each of its pods must reach Running through the whole hand-over: the real
// kube-scheduler, tessera-scheduler (with the gpushare and HAMi front ends
// on, for examples/compat), and per node of examples/cluster/nodes.yaml a
// real tessera-node in simulated mode with a kubelet stand-in that admits
// pods through Allocate and marks them Running. Images are never pulled and
// containers never run.
//
// Each file is first checked the way `kubectl apply` would see it:
// `kubectl apply --dry-run=server --validate=strict` (the pinned API server
// validates every object, a misspelt field fails), then read with
// `kubectl create --dry-run=client -o json`. What the test adapts, and only
// this:
//  - namespace: the test's own; every pod gets a nodeSelector for this
//    test's nodes (named "<group>-<example node>") and
//    terminationGracePeriodSeconds 0. Resources, annotations, schedulerName
//    and the rest stay as written.
//  - Deployments and Jobs: their pod template gets the same nodeSelector and
//    grace period; the fixture's kube-controller-manager makes the pods
//    (`replicas`, or a Job's `parallelism`, default 1), which the test finds
//    by the Deployment's selector or the Job's job-name label. Rollouts, Job
//    completion and restarts are not tested (the stand-in never ends a pod
//    by itself); a Deployment's availability and a replica's graceful
//    deletion and replacement are (the TF Serving example).
//  - Services are created as they are (nothing routes to the pods here).
//  - schedulerName: tessera-scheduler (the Helm chart's default profile,
//    docs/install.md): the test runs a second kube-scheduler from the
//    fixture's configuration with a profile of that name, as the chart does.
//
// Pods that are meant not to fit (examples/workloads/too-big.yaml) are listed
// in kExpectedPending with the FailedScheduling reason they must get; every
// other pod must run. Running pods are also checked for the environment
// their scripts read: every TESSERA_*, ALIYUN_COM_GPU_MEM_*, CUDA_DEVICE_* or
// NVIDIA_VISIBLE_DEVICES named in a container's command or args must be in
// what Allocate handed that container (or in its own env). Finally no GPU
// may be over-committed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/codec.h"
#include "kube/paths.h"
#include "tests/kubelet_sim/farm_suite.h"
#include "tests/support/cluster_env.h"
#include "tests/support/extender_suite.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

// Pods of examples/ that must stay Pending, and a piece of the reason
// kube-scheduler records from the extender.
const std::map<std::string, std::string> kExpectedPending = {
    {"too-big", "more than any GPU in the cluster has"},
    {"wants-v100", "is not on any node in the cluster"},
};

// The manifests under examples/, sorted; examples/cluster/ holds the node
// list the farm below is built from; examples/dra/ runs on a real node only.
std::vector<std::string> ExampleManifests() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator("examples")) {
    const std::string path = e.path().generic_string();
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".yaml" && ext != ".yml")) continue;
    if (path.rfind("examples/cluster/", 0) == 0 || path.rfind("examples/dra/", 0) == 0) continue;
    out.push_back(path);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `argv` through the shell; its stdout, or an error with its stderr.
Result<std::string> RunCommand(const std::vector<std::string>& argv, const std::string& err_file) {
  std::string cmd;
  for (const auto& a : argv) cmd += Quote(a) + " ";
  cmd += "2>" + Quote(err_file);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Internal("popen failed: " + cmd);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  if (status != 0) {
    std::ifstream err(err_file);
    std::stringstream text;
    text << err.rdbuf();
    return FailedPrecondition(cmd + " failed: " + text.str());
  }
  return out;
}

// The top-level JSON values of `text`, one after another (kubectl prints one
// per object of a multi-document file).
std::vector<std::string> JsonDocuments(const std::string& text) {
  std::vector<std::string> out;
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') {
      if (depth++ == 0) start = i;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      out.push_back(text.substr(start, i - start + 1));
    }
  }
  return out;
}

// TESSERA_CONTROLPLANE_BIN from the fixture's cluster.env (kubectl,
// kube-scheduler), else the setup script's folder.
std::string ControlPlaneBin(const std::string& cluster_dir) {
  std::ifstream in(cluster_dir + "/cluster.env");
  std::string line;
  const std::string key = "export TESSERA_CONTROLPLANE_BIN=";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "tools/controlplane/bin";
}

// The environment variables Tessera (or a front end) sets that `container`'s
// command and args name.
std::set<std::string> EnvNamesRead(const json& container) {
  static const std::regex kName(R"(\b(TESSERA_[A-Z0-9_]+|ALIYUN_COM_GPU_MEM_[A-Z]+|CUDA_DEVICE_[A-Z0-9_]+|NVIDIA_VISIBLE_DEVICES)\b)");
  std::string text;
  for (const char* field : {"command", "args"}) {
    if (!container.contains(field)) continue;
    for (const auto& part : container[field]) text += part.get<std::string>() + "\n";
  }
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), kName), end; it != end; ++it) out.insert((*it)[1].str());
  return out;
}

class ExamplesTest : public FarmSuite {
 protected:
  static void SetUpTestSuite() { StartExtender("e2e-examples", {"--gpushare", "true", "--hami", "true"}); }
  static void TearDownTestSuite() { StopExtender(); }
  void SetUp() override {
    OpenNamespace("examples", 12);
    bin_ = ControlPlaneBin(env_->dir);
    work_ = env_->dir + "/examples-test-" + std::to_string(::getpid());
    std::filesystem::create_directories(work_);
  }
  void TearDown() override {
    scheduler_.Stop(SIGTERM, std::chrono::seconds(5));
    if (!client_) return;
    FarmSuite::TearDown();
    std::filesystem::remove_all(work_);
  }

  // examples/cluster/nodes.yaml, each node renamed "<group>-<name>".
  void StartExampleCluster() {
    auto nodes = LoadSimNodesFile("examples/cluster/nodes.yaml");
    ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
    for (auto& n : *nodes) {
      n.info.name = group_ + "-" + n.info.name;
      for (auto& g : n.info.gpus) g.uuid = SimGpuUuid(n.info.name, g.index);
    }
    StartFarm(std::move(nodes).value());
  }

  // `nodes`, labelled with the group, with both front ends served.
  void StartFarm(std::vector<SimNode> nodes) {
    FarmSuite::StartFarm(std::move(nodes), ClusterFarmOptions({"--gpushare", "true", "--hami", "true"},
                                                              {"aliyun.com/gpu-mem", "nvidia.com/gpu"}));
  }

  // A kube-scheduler with the fixture's configuration (its extender entry)
  // and one profile, tessera-scheduler, the name the Helm chart's own
  // kube-scheduler serves. It serves no HTTPS (--secure-port 0).
  void StartChartProfileScheduler() {
    std::ifstream in(env_->dir + "/scheduler-config.yaml");
    ASSERT_TRUE(in) << "no scheduler-config.yaml in " << env_->dir;
    std::stringstream config;
    config << in.rdbuf();
    ASSERT_EQ(config.str().find("profiles:"), std::string::npos) << "the fixture's configuration has profiles";
    const std::string path = work_ + "/scheduler-config.yaml";
    std::ofstream(path) << config.str() << "profiles:\n- schedulerName: tessera-scheduler\n";
    auto child = ChildProcess::Start({bin_ + "/kube-scheduler", "--config", path, "--secure-port", "0",
                                      "--authentication-skip-lookup", "--authentication-tolerate-lookup-failure",
                                      "--v", "2"},
                                     env_->dir + "/logs/kube-scheduler-examples.log",
                                     env_->dir + "/pids/kube-scheduler-examples.pid");
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    scheduler_ = std::move(child).value();
  }

  Result<std::string> Kubectl(std::vector<std::string> args) {
    args.insert(args.begin(), {bin_ + "/kubectl", "--kubeconfig", env_->kubeconfig});
    return RunCommand(args, work_ + "/kubectl.err");
  }

  // The pod `pod` as this test creates it.
  json Adapt(json pod, const std::string& name) {
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    pod["metadata"]["name"] = name;
    pod["metadata"]["namespace"] = ns_;
    pod["spec"]["nodeSelector"][kGroupLabel] = group_;
    pod["spec"]["terminationGracePeriodSeconds"] = 0;
    return pod;
  }

  // Creates the objects of one manifest; the pods it made, by name.
  Result<std::vector<std::string>> Apply(const std::string& path) {
    TESSERA_RETURN_IF_ERROR(
        Kubectl({"apply", "--dry-run=server", "--validate=strict", "-n", ns_, "-f", path}).status());
    TESSERA_ASSIGN_OR_RETURN(std::string text, Kubectl({"create", "--dry-run=client", "-o", "json", "-f", path}));
    std::vector<json> objects;
    for (const std::string& doc : JsonDocuments(text)) {
      json parsed = json::parse(doc, nullptr, false);
      if (parsed.is_discarded()) return Internal(path + ": kubectl printed something that is not JSON: " + doc);
      if (parsed.value("kind", "") == "List") {
        for (const auto& o : parsed["items"]) objects.push_back(o);
      } else {
        objects.push_back(parsed);
      }
    }
    if (objects.empty()) return Internal(path + ": kubectl printed no object");
    std::vector<std::string> pods;
    for (json& obj : objects) {
      const std::string kind = obj.value("kind", "");
      const std::string name = obj["metadata"].value("name", "");
      obj["metadata"]["namespace"] = ns_;
      if (kind == "Pod") {
        TESSERA_RETURN_IF_ERROR(client_->Create(kube::PodsPath(ns_), Adapt(obj, name)).status());
        pods.push_back(name);
      } else if (kind == "Deployment" || kind == "Job") {
        const bool job = kind == "Job";
        json& pod_spec = obj["spec"]["template"]["spec"];
        pod_spec["nodeSelector"][kGroupLabel] = group_;
        pod_spec["terminationGracePeriodSeconds"] = 0;
        const std::string api = job ? "/apis/batch/v1/namespaces/" : "/apis/apps/v1/namespaces/";
        TESSERA_RETURN_IF_ERROR(client_->Create(api + ns_ + (job ? "/jobs" : "/deployments"), obj).status());
        const json& spec = obj["spec"];
        const int64_t n = job ? spec.value("parallelism", int64_t{1}) : spec.value("replicas", int64_t{1});
        std::string selector = job ? "batch.kubernetes.io/job-name=" + name : "";
        if (!job) {
          for (const auto& [key, value] : spec["selector"]["matchLabels"].items()) {
            selector += (selector.empty() ? "" : ",") + key + "=" + value.get<std::string>();
          }
        }
        TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> made, ControllerPods(kind + " " + name, selector, n));
        pods.insert(pods.end(), made.begin(), made.end());
      } else if (kind == "Service") {
        TESSERA_RETURN_IF_ERROR(client_->Create("/api/v1/namespaces/" + ns_ + "/services", obj).status());
      } else {
        return FailedPrecondition(path + ": kind " + kind + " of " + name +
                             ": examples_test does not apply it; teach it here (tests/e2e/examples_test.cc)");
      }
    }
    return pods;
  }

  // The names of the `n` pods matching `selector` once a controller has made
  // them all (within 60 s); `what` names the owner in the error.
  Result<std::vector<std::string>> ControllerPods(const std::string& what, const std::string& selector, int64_t n) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    size_t seen = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      TESSERA_ASSIGN_OR_RETURN(json list, client_->List(kube::PodsPath(ns_), selector));
      seen = list["items"].size();
      if (static_cast<int64_t>(seen) >= n) {
        std::vector<std::string> names;
        for (const auto& p : list["items"]) names.push_back(p["metadata"].value("name", ""));
        std::sort(names.begin(), names.end());
        return names;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return FailedPrecondition(what + ": kube-controller-manager made " + std::to_string(seen) + " of " +
                              std::to_string(n) + " pods (" + selector + ") in 60 s");
  }

  ChildProcess scheduler_;
  std::string bin_, work_;
};

TEST_F(ExamplesTest, EveryExampleReachesRunning) {
  const std::vector<std::string> files = ExampleManifests();
  for (const char* shipped : {"examples/pytorch/train-job.yaml", "examples/tensorflow/tf-memory-limit.yaml",
                              "examples/tf-serving/half-plus-two.yaml", "examples/compat/gpushare-pod.yaml",
                              "examples/workloads/too-big.yaml"}) {
    ASSERT_NE(std::find(files.begin(), files.end(), shipped), files.end()) << shipped << " not found";
  }
  StartExampleCluster();
  StartChartProfileScheduler();

  std::map<std::string, std::string> source;  // pod -> its manifest
  for (const auto& f : files) {
    auto pods = Apply(f);
    ASSERT_TRUE(pods.ok()) << pods.status().ToString();
    for (const auto& p : *pods) {
      ASSERT_TRUE(source.emplace(p, f).second) << "two examples make a pod named " << p;
    }
  }
  for (const auto& [name, reason] : kExpectedPending) {
    EXPECT_TRUE(source.count(name)) << "kExpectedPending lists " << name << ", which no example makes";
  }

  std::cout << "POD                      EXAMPLE                                   NODE / WHY PENDING\n";
  for (const auto& [name, file] : source) {
    SCOPED_TRACE(name + " from " + file);
    const auto pending = kExpectedPending.find(name);
    if (pending != kExpectedPending.end()) {
      auto says_why = [&pending](const std::string& e) { return e.find(pending->second) != std::string::npos; };
      std::string said;
      for (const auto& e : WaitForEvents(name, "FailedScheduling", seconds(60), says_why)) {
        if (says_why(e)) said = e;
      }
      EXPECT_FALSE(said.empty()) << "no FailedScheduling event saying \"" << pending->second << "\"";
      auto now = client_->Get(kube::PodPath(ns_, name));
      ASSERT_TRUE(now.ok()) << now.status().ToString();
      EXPECT_FALSE(IsBound(*now)) << "an example meant not to fit was bound";
      std::printf("%-24s %-41s pending: %s\n", name.c_str(), file.c_str(), said.substr(0, 110).c_str());
      continue;
    }
    auto pod = Settled(name, seconds(120));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    ASSERT_EQ(Phase(*pod), "Running") << pod->dump();
    auto assignment = core::DecodeAssignment(Annotation(*pod, std::string(core::kAssignmentAnnotation)));
    ASSERT_TRUE(assignment.ok()) << assignment.status().ToString();
    const std::string recorded = Annotation(*pod, kSimAllocationsAnnotation);
    ASSERT_FALSE(recorded.empty()) << "the kubelet stand-in recorded no allocation";
    const json allocations = json::parse(recorded);
    std::string gpus;
    for (const auto& c : assignment->containers) {
      for (const auto& g : c.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g.index);
    }
    for (const auto& c : pod->at("spec").at("containers")) {
      const std::string container = c.value("name", "");
      std::set<std::string> own;
      for (const auto& e : c.value("env", json::array())) own.insert(e.value("name", ""));
      for (const auto& var : EnvNamesRead(c)) {
        const bool handed = allocations.contains(container) && allocations.at(container).contains("envs") &&
                            allocations.at(container).at("envs").contains(var);
        EXPECT_TRUE(handed || own.count(var)) << "container " << container << " reads " << var
                                              << ", which Allocate did not hand it: " << recorded;
      }
    }
    std::printf("%-24s %-41s %s GPU %s\n", name.c_str(), file.c_str(),
                pod->at("spec").value("nodeName", "").c_str(), gpus.c_str());
  }
  EXPECT_EQ(FindOvercommit(*client_), std::vector<std::string>{});
}

// The TF Serving example's point: its three replicas fit on one 16 GB card
// (a T4, 15360 MiB: 3 x 4096 MiB, 3 x 25 %), and run there side by side.
TEST_F(ExamplesTest, TfServingReplicasShareOneGpu) {
  StartFarm(UniformSimNodes(group_ + "-t4", 1, 1, "T4", 15360));
  StartChartProfileScheduler();
  auto pods = Apply("examples/tf-serving/half-plus-two.yaml");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);
  std::set<std::string> gpus;
  for (const auto& name : *pods) {
    auto pod = Settled(name, seconds(120));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    ASSERT_EQ(Phase(*pod), "Running") << pod->dump();
    auto assignment = core::DecodeAssignment(Annotation(*pod, std::string(core::kAssignmentAnnotation)));
    ASSERT_TRUE(assignment.ok()) << assignment.status().ToString();
    for (const auto& c : assignment->containers) {
      for (const auto& g : c.gpus) {
        EXPECT_EQ(g.mem_mib, 4096);
        EXPECT_EQ(g.core_milli, 250);
        gpus.insert(g.uuid);
      }
    }
  }
  EXPECT_EQ(gpus, std::set<std::string>{farm_->node(0).info.gpus.at(0).uuid});
  EXPECT_EQ(FindOvercommit(*client_), std::vector<std::string>{});
}

// What a user of the demo does next with the TF Serving Deployment, which
// used to trap them on simulated nodes: its Deployment reports the replicas
// available (the stand-in reports pods Ready), and a replica deleted with a
// grace period goes (the stand-in finishes the deletion as a kubelet does)
// instead of hanging in Terminating; its ReplicaSet's replacement takes the
// freed share on the one T4, which holds no fourth replica beside three.
TEST_F(ExamplesTest, DeletedTfServingReplicaIsReplacedOnItsShare) {
  StartFarm(UniformSimNodes(group_ + "-t4", 1, 1, "T4", 15360));
  StartChartProfileScheduler();
  auto pods = Apply("examples/tf-serving/half-plus-two.yaml");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);
  for (const auto& name : *pods) {
    auto pod = Settled(name, seconds(120));
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    ASSERT_EQ(Phase(*pod), "Running") << pod->dump();
  }
  const std::string deployment = "/apis/apps/v1/namespaces/" + ns_ + "/deployments/tf-serving";
  auto available = [&](int64_t want) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    json status;
    while (std::chrono::steady_clock::now() < deadline) {
      auto d = client_->Get(deployment);
      if (d.ok()) status = (*d)["status"];
      if (status.value("availableReplicas", int64_t{0}) == want && status.value("readyReplicas", int64_t{0}) == want) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "Deployment tf-serving: not " << want << " available and ready replicas: " << status.dump();
    return false;
  };
  ASSERT_TRUE(available(3));

  // 30 s of grace: only the stand-in can end the pod sooner.
  const std::string victim = pods->front();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(client_->Delete(kube::PodPath(ns_, victim), 30).ok());
  Status gone = Status::Ok();
  while (std::chrono::steady_clock::now() - start < seconds(20)) {
    gone = client_->Get(kube::PodPath(ns_, victim)).status();
    if (gone.code() == StatusCode::kNotFound) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(gone.code(), StatusCode::kNotFound) << victim << " still Terminating 20 s into its 30 s grace period";
  ASSERT_TRUE(available(3));
  auto now = client_->List(kube::PodsPath(ns_), "app=tf-serving");
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  ASSERT_EQ((*now)["items"].size(), 3u) << now->dump();
  for (const auto& p : (*now)["items"]) {
    EXPECT_NE(p["metadata"].value("name", ""), victim);
    EXPECT_EQ(Phase(p), "Running") << p.dump();
  }
  EXPECT_EQ(FindOvercommit(*client_), std::vector<std::string>{});
}

}  // namespace
}  // namespace tessera::testing
