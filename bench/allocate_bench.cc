// Allocate latency of a real tessera-node with many pods pending on its node
// (issue 4): p50/p99/max of GetPreferredAllocation, Allocate and the pair,
// with --pods pending at once against a baseline of one pending pod at a
// time, measured in the same run on the same agent.
//
//   build/bench/allocate_bench [--pods 100] [--repeat 3] [--dir out/bench-allocate] [--bin-dir build/bin]
//
// It starts a fresh loopback cluster (no kube-scheduler: the pods are created
// already bound, with tessera.io/assignment and tessera.io/assigned-at), one
// simulated node, a kubelet stand-in kept paused (it only registers the
// plugin and follows ListAndWatch) and a tessera-node in simulated mode. The
// bench then plays the kubelet over the plugin's Unix socket: per pod, oldest
// first, GetPreferredAllocation over every free slot, then Allocate of the
// slots preferred, each timed on the client side. Every answer is checked:
// TESSERA_POD must name the pod expected, or the run fails. Pod creation and
// deletion stay outside the timings, and so does a short settle (300 ms)
// after creating pods, so a watching agent has seen them. For reference it
// also times its own LIST of the node's pods (what tessera-node did on every
// call before its watch cache) in each case. The cluster is torn down on
// every exit.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "core/codec.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kube/paths.h"
#include "node/inventory.h"
#include "tests/kubelet_sim/kubelet_sim.h"
#include "tests/support/cluster_env.h"
#include "tests/support/own_cluster.h"
#include "tests/support/process.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using Clock = std::chrono::steady_clock;
namespace dp = v1beta1;

constexpr const char* kNamespace = "alloc-bench";
constexpr int kListsPerCase = 10;  // reference LISTs per case and repeat, outside the timed calls

struct Options {
  int pods = 100;
  int repeat = 3;
  int gpus = 8;
  std::chrono::milliseconds settle{300};  // after creating pods, before the first call
  std::string dir, repo, bin_dir;
};

// Client-side latencies of one case, in milliseconds.
struct Samples {
  std::vector<double> prefer, allocate, pair;
  std::vector<double> list;  // the bench's own LIST of the node's pods, for reference
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Nearest-rank percentile of `v` (sorted in place); 0 when empty.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// "2026-01-01T02:46:40Z" for `s` seconds after 2026-01-01T00:00:00Z (s < 86400).
std::string AssignedAt(int s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "2026-01-01T%02d:%02d:%02dZ", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

// The node agent and its paused kubelet stand-in, plus this bench's own
// kubelet-side connection to the plugin.
class Rig {
 public:
  static Result<std::unique_ptr<Rig>> Start(kube::Client& client, const Options& opt, const std::string& cluster_dir,
                                            const std::string& kubeconfig) {
    auto rig = std::unique_ptr<Rig>(new Rig(client));
    const int slots = std::max(1, (opt.pods + opt.gpus - 1) / opt.gpus);
    rig->nodes_ = UniformSimNodes("alloc-bench", 1, opt.gpus, "H100", 81920, slots);
    const SimNode& node = rig->nodes_[0];
    TESSERA_RETURN_IF_ERROR(CreateSimNodes(client, rig->nodes_));
    // Unix socket paths are limited to 108 bytes: a short folder under the temp dir.
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-allocbench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Internal("cannot create a folder under the temp dir");
    rig->work_ = tmpl;
    std::filesystem::create_directories(rig->work_ + "/dp");
    {
      std::ofstream out(rig->work_ + "/gpus.yaml");
      out << node::FormatGpuFile(node.info.gpus);
      if (!out) return Internal("cannot write " + rig->work_ + "/gpus.yaml");
    }
    KubeletSimOptions kopt;
    kopt.node = node.info.name;
    kopt.dir = rig->work_ + "/dp";
    kopt.pod_resources_socket = rig->work_ + "/pod-resources.sock";
    rig->kubelet_ = std::make_unique<KubeletSim>(client, kopt);
    rig->kubelet_->SetPaused(true);  // never admits: this bench is the kubelet
    TESSERA_RETURN_IF_ERROR(rig->kubelet_->Start());
    rig->log_ = cluster_dir + "/logs/tessera-node.log";
    TESSERA_ASSIGN_OR_RETURN(
        rig->agent_,
        ChildProcess::Start({opt.bin_dir + "/tessera-node", "--node-name", node.info.name, "--kubeconfig", kubeconfig,
                             "--device-plugin-dir", rig->work_ + "/dp", "--slots-per-gpu", std::to_string(slots),
                             "--simulated-gpus", rig->work_ + "/gpus.yaml", "--library-host-path",
                             rig->work_ + "/libtessera-cuda.so", "--preload-host-path", rig->work_ + "/ld.so.preload",
                             "--region-root", rig->work_ + "/regions", "--resync-ms", "1000",
                             "--pod-resources-socket", rig->kubelet_->PodResourcesSocket(),
                             // Reconciliation lists pods too: keep it out of the timed window.
                             "--reconcile-interval-ms", "3600000", "--metrics-bind-address", ""},
                            rig->log_, cluster_dir + "/pids/tessera-node.pid"));
    const size_t want = static_cast<size_t>(opt.gpus * slots);
    if (!rig->kubelet_->WaitForDevices([want](const std::vector<SimDevice>& d) { return d.size() == want; },
                                       std::chrono::seconds(60))) {
      return FailedPrecondition("tessera-node never registered and listed its slots; see " + rig->log_);
    }
    for (const auto& d : rig->kubelet_->Devices()) rig->slots_.push_back(d.id);
    auto channel = grpc::CreateChannel("unix://" + rig->work_ + "/dp/tessera-gpu.sock",
                                       grpc::InsecureChannelCredentials());
    rig->plugin_ = dp::DevicePlugin::NewStub(channel);
    return rig;
  }

  ~Rig() {
    agent_.Stop(SIGTERM, std::chrono::seconds(5));
    if (kubelet_) kubelet_->Stop();
    (void)DeleteSimNodes(client_, nodes_);
    std::error_code ec;
    if (!work_.empty()) std::filesystem::remove_all(work_, ec);
  }

  const SimNode& node() const { return nodes_[0]; }
  const std::string& log() const { return log_; }

  // Creates pod `name` bound to the node, wanting one slot on GPU `gpu`.
  Status CreatePod(const std::string& name, int gpu, int assigned_at) {
    const core::GpuInfo& g = node().info.gpus[static_cast<size_t>(gpu)];
    TESSERA_ASSIGN_OR_RETURN(std::string assignment,
                             core::EncodeAssignment({node().info.name, {{"main", {{g.index, g.uuid, 1024, 50}}}}}));
    nlohmann::json pod = GpuPod(kNamespace, name, {{"main", 1, 1024, 5}}, {},
                                {{std::string(core::kAssignmentAnnotation), assignment},
                                 {std::string(core::kAssignedAtAnnotation), AssignedAt(assigned_at)}});
    pod["spec"]["nodeName"] = node().info.name;
    return client_.Create(kube::PodsPath(kNamespace), pod).status();
  }

  // Times `count` LISTs of the node's pods, the request tessera-node made per call before its watch cache.
  Status TimeLists(int count, Samples& out) {
    for (int i = 0; i < count; ++i) {
      const auto t0 = Clock::now();
      TESSERA_RETURN_IF_ERROR(client_.List(kube::PodsPath(""), "", "spec.nodeName=" + node().info.name).status());
      out.list.push_back(Ms(Clock::now() - t0));
    }
    return Status::Ok();
  }

  Status DeletePod(const std::string& name) {
    Status s = client_.Delete(kube::PodPath(kNamespace, name), 0);
    return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
  }

  // As the kubelet admitting pod `name`: prefer among the free slots, then
  // allocate the slots preferred; both timed into `out`. The slots taken stay
  // taken until ReleaseAll().
  Status Admit(const std::string& name, Samples& out) {
    dp::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    for (const auto& id : slots_) {
      if (!taken_.count(id)) c->add_available_deviceids(id);
    }
    c->set_allocation_size(1);
    dp::PreferredAllocationResponse presp;
    const auto t0 = Clock::now();
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Status st = plugin_->GetPreferredAllocation(&ctx, preq, &presp);
      if (!st.ok()) return Internal("GetPreferredAllocation for " + name + ": " + st.error_message());
    }
    const auto t1 = Clock::now();
    if (presp.container_responses_size() != 1 || presp.container_responses(0).deviceids_size() != 1) {
      return FailedPrecondition("GetPreferredAllocation for " + name + " stated no preference; see " + log_);
    }
    const std::string id = presp.container_responses(0).deviceids(0);
    dp::AllocateRequest areq;
    areq.add_container_requests()->add_devices_ids(id);
    dp::AllocateResponse aresp;
    const auto t2 = Clock::now();
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Status st = plugin_->Allocate(&ctx, areq, &aresp);
      if (!st.ok()) return Internal("Allocate for " + name + ": " + st.error_message());
    }
    const auto t3 = Clock::now();
    const std::string want = std::string(kNamespace) + "/" + name;
    const auto& envs = aresp.container_responses(0).envs();
    auto who = envs.find("TESSERA_POD");
    if (who == envs.end() || who->second != want) {
      return FailedPrecondition("Allocate of " + id + " answered for " + (who == envs.end() ? "nobody" : who->second) +
                                ", expected " + want);
    }
    taken_.insert(id);
    out.prefer.push_back(Ms(t1 - t0));
    out.allocate.push_back(Ms(t3 - t2));
    out.pair.push_back(Ms(t3 - t0));
    return Status::Ok();
  }

  void ReleaseAll() { taken_.clear(); }

 private:
  explicit Rig(kube::Client& client) : client_(client) {}

  kube::Client client_;
  std::vector<SimNode> nodes_;
  std::string work_, log_;
  std::unique_ptr<KubeletSim> kubelet_;
  ChildProcess agent_;
  std::vector<std::string> slots_;
  std::set<std::string> taken_;
  std::unique_ptr<dp::DevicePlugin::Stub> plugin_;
};

// `count` pods, each alone on the node: created, admitted, deleted.
Status RunOnePending(Rig& rig, const Options& opt, int rep, Samples& out) {
  for (int i = 0; i < opt.pods; ++i) {
    const std::string name = "one-" + std::to_string(rep) + "-" + std::to_string(i);
    TESSERA_RETURN_IF_ERROR(rig.CreatePod(name, i % opt.gpus, rep * 1000 + i));
    std::this_thread::sleep_for(opt.settle);
    if (i < kListsPerCase) TESSERA_RETURN_IF_ERROR(rig.TimeLists(1, out));
    TESSERA_RETURN_IF_ERROR(rig.Admit(name, out));
    TESSERA_RETURN_IF_ERROR(rig.DeletePod(name));
    rig.ReleaseAll();
  }
  return Status::Ok();
}

// `count` pods created first, then admitted oldest first, then deleted.
Status RunManyPending(Rig& rig, const Options& opt, int rep, Samples& out) {
  std::vector<std::string> names;
  for (int i = 0; i < opt.pods; ++i) {
    names.push_back("many-" + std::to_string(rep) + "-" + std::to_string(i));
    TESSERA_RETURN_IF_ERROR(rig.CreatePod(names.back(), i % opt.gpus, 50000 + rep * 1000 + i));
  }
  TESSERA_RETURN_IF_ERROR(rig.TimeLists(kListsPerCase, out));
  std::this_thread::sleep_for(opt.settle);
  for (const auto& name : names) TESSERA_RETURN_IF_ERROR(rig.Admit(name, out));
  for (const auto& name : names) TESSERA_RETURN_IF_ERROR(rig.DeletePod(name));
  rig.ReleaseAll();
  std::this_thread::sleep_for(opt.settle);
  return Status::Ok();
}

struct BenchResult {
  Samples one, many;
};

Result<BenchResult> Run(const Options& opt) {
  const std::string cluster = opt.dir + "/cluster";
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<OwnCluster> own,
                           OwnCluster::Start(opt.repo, cluster, "EXTENDER=0 SCHEDULER=0"));

  TESSERA_ASSIGN_OR_RETURN(kube::ClientConfig config, kube::LoadKubeconfig(cluster + "/kubeconfig"));
  config.qps = 1000;
  config.burst = 2000;
  kube::Client client(config);
  TESSERA_RETURN_IF_ERROR(CreateNamespace(client, kNamespace));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Rig> rig, Rig::Start(client, opt, cluster, cluster + "/kubeconfig"));
  BenchResult result;
  for (int rep = 0; rep < opt.repeat; ++rep) {
    TESSERA_RETURN_IF_ERROR(RunOnePending(*rig, opt, rep, result.one).WithContext("1 pending, repeat " +
                                                                                  std::to_string(rep)));
    TESSERA_RETURN_IF_ERROR(RunManyPending(*rig, opt, rep, result.many)
                                .WithContext(std::to_string(opt.pods) + " pending, repeat " + std::to_string(rep)));
    std::fprintf(stderr, "repeat %d/%d done\n", rep + 1, opt.repeat);
  }
  return result;
}

void PrintRow(const char* label, const char* call, const std::vector<double>& v) {
  std::printf("%-14s %-17s %6zu %9.2f %9.2f %9.2f\n", label, call, v.size(), Percentile(v, 50), Percentile(v, 99),
              *std::max_element(v.begin(), v.end()));
}

void PrintRatio(const char* call, const std::vector<double>& many, const std::vector<double>& one) {
  std::printf("%-14s %-17s %6s %9.2f %9.2f %9.2f\n", "ratio", call, "", Percentile(many, 50) / Percentile(one, 50),
              Percentile(many, 99) / Percentile(one, 99),
              *std::max_element(many.begin(), many.end()) / *std::max_element(one.begin(), one.end()));
}

}  // namespace
}  // namespace tessera::testing

int main(int argc, char** argv) {
  using namespace tessera;
  CLI::App app{"tessera-node Allocate latency with many pods pending vs one"};
  testing::Options opt;
  opt.dir = "out/bench-allocate";
  opt.repo = ".";
  app.add_option("--pods", opt.pods, "pods pending at once in the measured case (and calls per case per repeat)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--repeat", opt.repeat, "rounds of both cases, pooled")->check(CLI::Range(1, 100));
  app.add_option("--gpus", opt.gpus, "GPUs on the simulated node (slots per GPU: pods/gpus, rounded up)")
      ->check(CLI::Range(1, 64));
  app.add_option("--dir", opt.dir, "where the cluster lives (logs stay in <dir>/cluster/logs)");
  app.add_option("--repo", opt.repo, "repository root (for tools/controlplane)");
  app.add_option("--bin-dir", opt.bin_dir, "folder with tessera-node (default: beside this binary's build tree)");
  CLI11_PARSE(app, argc, argv);
  if (opt.bin_dir.empty()) {
    opt.bin_dir = (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "bin").string();
  }
  std::filesystem::create_directories(opt.dir);
  opt.dir = std::filesystem::canonical(opt.dir).string();
  opt.repo = std::filesystem::canonical(opt.repo).string();
  opt.bin_dir = std::filesystem::canonical(opt.bin_dir).string();

  auto result = testing::Run(opt);
  if (!result.ok()) {
    std::fprintf(stderr, "allocate_bench: %s\n", result.status().message().c_str());
    return 1;
  }
  const auto& r = *result;
  std::printf("tessera-node %s/tessera-node, 1 simulated node (%d GPUs), %d repeat(s); client-side ms per call\n",
              opt.bin_dir.c_str(), opt.gpus, opt.repeat);
  const std::string many = std::to_string(opt.pods) + " pending";
  std::printf("%-14s %-17s %6s %9s %9s %9s\n", "case", "call", "calls", "p50", "p99", "max");
  testing::PrintRow("1 pending", "Prefer", r.one.prefer);
  testing::PrintRow("1 pending", "Allocate", r.one.allocate);
  testing::PrintRow("1 pending", "Prefer+Allocate", r.one.pair);
  testing::PrintRow(many.c_str(), "Prefer", r.many.prefer);
  testing::PrintRow(many.c_str(), "Allocate", r.many.allocate);
  testing::PrintRow(many.c_str(), "Prefer+Allocate", r.many.pair);
  testing::PrintRow("1 pending", "LIST (bench)", r.one.list);
  testing::PrintRow(many.c_str(), "LIST (bench)", r.many.list);
  testing::PrintRatio("Prefer", r.many.prefer, r.one.prefer);
  testing::PrintRatio("Allocate", r.many.allocate, r.one.allocate);
  testing::PrintRatio("Prefer+Allocate", r.many.pair, r.one.pair);
  testing::PrintRatio("LIST (bench)", r.many.list, r.one.list);
  return 0;
}
