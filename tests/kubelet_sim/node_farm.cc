#include "tests/kubelet_sim/node_farm.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "node/inventory.h"
#include "tests/support/http_probe.h"

namespace tessera::testing {

struct NodeFarm::Member {
  SimNode node;
  std::string dir;  // <work>/<i>: dp/, gpus.yaml, regions/
  std::unique_ptr<KubeletSim> kubelet;
  std::vector<std::unique_ptr<KubeletSim>> extra_kubelets;  // one per options.extra_resources
  ChildProcess agent;
  int metrics_port = 0;
};

NodeFarm::NodeFarm(kube::Client client, NodeFarmOptions options, std::string work_dir)
    : client_(std::move(client)), options_(std::move(options)), work_dir_(std::move(work_dir)) {}

NodeFarm::~NodeFarm() {
  for (auto& m : members_) m->agent.Stop(SIGTERM, std::chrono::seconds(5));
  for (auto& m : members_) m->kubelet->Stop();
  for (auto& m : members_) {
    for (auto& k : m->extra_kubelets) k->Stop();
  }
  std::error_code ec;
  std::filesystem::remove_all(work_dir_, ec);
}

Result<std::unique_ptr<NodeFarm>> NodeFarm::Start(const kube::Client& client, std::vector<SimNode> nodes,
                                                  NodeFarmOptions options) {
  // Unix socket paths are limited to 108 bytes: a short folder under the temp dir.
  std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-farm-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Internal("NodeFarm: cannot create a folder under the temp dir");
  std::unique_ptr<NodeFarm> farm(new NodeFarm(client, std::move(options), tmpl));
  if (farm->options_.log_dir.empty()) farm->options_.log_dir = tmpl;
  std::error_code ec;
  std::filesystem::create_directories(farm->options_.log_dir, ec);
  TESSERA_RETURN_IF_ERROR(CreateSimNodes(farm->client_, nodes));

  for (size_t i = 0; i < nodes.size(); ++i) {
    auto m = std::make_unique<Member>();
    m->node = std::move(nodes[i]);
    m->dir = tmpl + "/" + std::to_string(i);
    std::filesystem::create_directories(m->dir + "/dp", ec);
    if (ec) return Internal("NodeFarm: cannot create " + m->dir + "/dp: " + ec.message());
    farm->members_.push_back(std::move(m));
    TESSERA_RETURN_IF_ERROR(farm->WriteGpus(i, farm->members_[i]->node.info.gpus));
    auto& member = *farm->members_[i];
    KubeletSimOptions kubelet_options;
    kubelet_options.node = member.node.info.name;
    kubelet_options.dir = member.dir + "/dp";
    kubelet_options.seed = i + 1;
    kubelet_options.poll = farm->options_.kubelet_poll;
    kubelet_options.pod_resources_socket = member.dir + "/pod-resources.sock";
    member.metrics_port = FreeLoopbackPort();
    if (member.metrics_port == 0) return Internal("NodeFarm: no free loopback port for /metrics");
    member.kubelet = std::make_unique<KubeletSim>(farm->client_, kubelet_options);
    for (size_t k = 0; k < farm->options_.extra_resources.size(); ++k) {
      KubeletSimOptions extra = kubelet_options;
      extra.resource = farm->options_.extra_resources[k];
      extra.serve_registration = false;
      extra.seed = kubelet_options.seed * 100 + k;
      extra.pod_resources_socket = member.dir + "/pod-resources-" + std::to_string(k) + ".sock";
      member.extra_kubelets.push_back(std::make_unique<KubeletSim>(farm->client_, extra));
      TESSERA_RETURN_IF_ERROR(member.extra_kubelets.back()->Start().WithContext(
          "kubelet stand-in of " + member.node.info.name + " for " + extra.resource));
      member.kubelet->Forward(member.extra_kubelets.back().get());
    }
    TESSERA_RETURN_IF_ERROR(member.kubelet->Start().WithContext("kubelet stand-in of " + member.node.info.name));
    TESSERA_RETURN_IF_ERROR(farm->StartAgent(i));
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(farm->options_.ready_timeout);
  for (size_t i = 0; i < farm->size(); ++i) {
    const auto& m = *farm->members_[i];
    if (!farm->WaitForSlots(i, m.node.info.gpus.size() * m.node.slots_per_gpu, ms)) {
      return FailedPrecondition("tessera-node of " + m.node.info.name + " did not register and list its slots within " +
                                std::to_string(farm->options_.ready_timeout.count()) + " s; see " + farm->AgentLog(i));
    }
    for (size_t k = 0; k < m.extra_kubelets.size(); ++k) {
      const bool listed = m.extra_kubelets[k]->WaitForDevices(
          [](const std::vector<SimDevice>& devices) { return !devices.empty(); }, ms);
      if (!listed) {
        return FailedPrecondition("tessera-node of " + m.node.info.name + " did not register " +
                                  farm->options_.extra_resources[k] + " and list its devices within " +
                                  std::to_string(farm->options_.ready_timeout.count()) + " s; see " +
                                  farm->AgentLog(i));
      }
    }
  }
  return farm;
}

size_t NodeFarm::size() const { return members_.size(); }
const SimNode& NodeFarm::node(size_t i) const { return members_.at(i)->node; }
KubeletSim& NodeFarm::Kubelet(size_t i) { return *members_.at(i)->kubelet; }
KubeletSim& NodeFarm::ExtraKubelet(size_t i, size_t k) { return *members_.at(i)->extra_kubelets.at(k); }
std::string NodeFarm::AgentLog(size_t i) const {
  return options_.log_dir + "/tessera-node-" + members_.at(i)->node.info.name + ".log";
}
std::string NodeFarm::RegionRoot(size_t i) const { return members_.at(i)->dir + "/regions"; }

int NodeFarm::MetricsPort(size_t i) const { return members_.at(i)->metrics_port; }

Result<uint64_t> NodeFarm::SumCounter(const std::string& name) {
  uint64_t sum = 0;
  for (size_t i = 0; i < size(); ++i) {
    if (!AgentRunning(i)) continue;
    TESSERA_ASSIGN_OR_RETURN(uint64_t value, ScrapeCounter(MetricsPort(i), name));
    sum += value;
  }
  return sum;
}

void NodeFarm::StopAgent(size_t i, int signal) { members_.at(i)->agent.Stop(signal, std::chrono::seconds(5)); }

bool NodeFarm::AgentRunning(size_t i) { return members_.at(i)->agent.running(); }

Status NodeFarm::StartAgent(size_t i, const std::vector<std::string>& extra_flags) {
  auto& m = *members_.at(i);
  if (m.agent.running()) return Status::Ok();
  std::vector<std::string> argv = {options_.bin_dir + "/tessera-node",
                                   "--node-name", m.node.info.name,
                                   "--kubeconfig", options_.kubeconfig,
                                   "--device-plugin-dir", m.dir + "/dp",
                                   "--slots-per-gpu", std::to_string(m.node.slots_per_gpu),
                                   "--simulated-gpus", m.dir + "/gpus.yaml",
                                   "--library-host-path", m.dir + "/libtessera-cuda.so",
                                   "--preload-host-path", m.dir + "/ld.so.preload",
                                   "--region-root", RegionRoot(i),
                                   "--resync-ms", std::to_string(options_.resync.count()),
                                   "--pod-resources-socket", m.kubelet->PodResourcesSocket(),
                                   "--reconcile-interval-ms", std::to_string(options_.reconcile.count()),
                                   "--metrics-bind-address", "127.0.0.1:" + std::to_string(m.metrics_port)};
  argv.insert(argv.end(), options_.agent_flags.begin(), options_.agent_flags.end());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  const std::string pid_file = options_.pid_dir.empty() ? "" : options_.pid_dir + "/tessera-node-" + m.node.info.name + ".pid";
  TESSERA_ASSIGN_OR_RETURN(m.agent, ChildProcess::Start(argv, AgentLog(i), pid_file));
  return Status::Ok();
}

Status NodeFarm::WriteGpus(size_t i, const std::vector<core::GpuInfo>& gpus) {
  const std::string path = members_.at(i)->dir + "/gpus.yaml";
  {
    std::ofstream out(path + ".tmp");
    out << node::FormatGpuFile(gpus);
    if (!out) return Internal("NodeFarm: cannot write " + path + ".tmp");
  }
  std::error_code ec;
  std::filesystem::rename(path + ".tmp", path, ec);  // atomic: the agent never reads half a file
  if (ec) return Internal("NodeFarm: cannot rename to " + path + ": " + ec.message());
  return Status::Ok();
}

bool NodeFarm::WaitForSlots(size_t i, size_t slots, std::chrono::milliseconds timeout) {
  return Kubelet(i).WaitForDevices(
      [slots](const std::vector<SimDevice>& devices) {
        size_t healthy = 0;
        for (const auto& d : devices) healthy += d.health == "Healthy";
        return devices.size() == slots && healthy == slots;
      },
      timeout);
}

void StopFarm(kube::Client& client, std::unique_ptr<NodeFarm>& farm) {
  if (!farm) return;
  std::vector<SimNode> nodes;
  for (size_t i = 0; i < farm->size(); ++i) nodes.push_back(farm->node(i));
  farm.reset();
  (void)DeleteSimNodes(client, nodes);
}

}  // namespace tessera::testing
