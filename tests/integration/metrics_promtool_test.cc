// `promtool check metrics` on what a running tessera-scheduler and
// tessera-node serve on /metrics, against the loopback cluster: the
// scheduler after kube-scheduler has filtered, scored and bound a pod
// through it (and one malformed call), the node agent in simulated mode with
// a share allocated on it. Then the Grafana dashboard (deploy/grafana): every
// query must parse (`promtool check rules`) and name only metrics and labels
// those pages serve. promtool comes from Debian's `prometheus` package
// (scripts/setup.sh); its path arrives in TESSERA_PROMTOOL, the dashboard's
// in TESSERA_DASHBOARD.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/codec.h"
#include "kube/paths.h"
#include "node/inventory.h"
#include "tests/support/cluster_env.h"
#include "tests/support/http_probe.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

struct CheckResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `promtool <args> < file`.
CheckResult Promtool(const std::string& promtool, const std::string& args, const std::string& file) {
  CheckResult r;
  FILE* pipe = ::popen(("'" + promtool + "' " + args + " < '" + file + "' 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `promtool check metrics` on `page`.
CheckResult PromtoolCheck(const std::string& promtool, const std::string& page, const std::string& dir) {
  const std::string file = dir + "/page.txt";
  std::ofstream(file) << page;
  return Promtool(promtool, "check metrics", file);
}

// What a /metrics page serves: family names with their TYPE, and the label
// names seen on each family's samples.
struct Served {
  std::map<std::string, std::string> type;              // family -> counter|gauge|histogram
  std::map<std::string, std::set<std::string>> labels;  // family -> label names

  void Add(const std::string& page) {
    std::istringstream in(page);
    std::string line;
    static const std::regex type_line(R"(# TYPE (\S+) (\S+))");
    static const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? .*)");
    static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)=")");
    while (std::getline(in, line)) {
      std::smatch m;
      if (std::regex_match(line, m, type_line)) {
        type[m[1]] = m[2];
      } else if (!line.empty() && line[0] != '#' && std::regex_match(line, m, sample)) {
        const std::string family = Family(m[1]);
        const std::string inner = m[3];
        for (auto it = std::sregex_iterator(inner.begin(), inner.end(), label); it != std::sregex_iterator(); ++it) {
          labels[family].insert((*it)[1]);
        }
      }
    }
  }
  // The family a sample or query name belongs to ("x_bucket" -> "x" for a histogram x).
  std::string Family(const std::string& name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (name.size() > s.size() && name.ends_with(s)) {
        auto it = type.find(name.substr(0, name.size() - s.size()));
        if (it != type.end() && it->second == "histogram") return it->first;
      }
    }
    return name;
  }
};

// Every PromQL query of a Grafana dashboard: panel targets' "expr" and the
// query variables' queries, with where each was found.
void CollectQueries(const nlohmann::json& node, const std::string& where,
                    std::vector<std::pair<std::string, std::string>>& out) {
  if (node.is_object()) {
    if (node.contains("expr") && node["expr"].is_string()) out.emplace_back(where, node["expr"]);
    if (node.value("type", "") == "query" && node.contains("query")) {
      const nlohmann::json& q = node["query"];
      const std::string text = q.is_string() ? q.get<std::string>() : q.value("query", "");
      out.emplace_back(where + " variable " + node.value("name", "?"), text);
    }
    for (const auto& [key, value] : node.items()) {
      const std::string title = node.contains("title") && node["title"].is_string() ? node["title"] : "";
      CollectQueries(value, title.empty() ? where : "panel \"" + title + "\"", out);
    }
  } else if (node.is_array()) {
    for (const auto& item : node) CollectQueries(item, where, out);
  }
}

// Grafana's variables, replaced by values PromQL parses.
std::string Expand(std::string query) {
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"$__rate_interval", "5m"}, {"$__interval", "1m"}, {"$node", ".*"}, {"$namespace", ".*"}, {"$pod", ".*"}}) {
    for (size_t at = query.find(var); at != std::string::npos; at = query.find(var, at + value.size())) {
      query.replace(at, var.size(), value);
    }
  }
  return query;
}

class MetricsPromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* promtool = std::getenv("TESSERA_PROMTOOL");
    ASSERT_TRUE(promtool != nullptr && *promtool != '\0') << "TESSERA_PROMTOOL is not set; run through ctest";
    promtool_ = promtool;
    auto env = ClusterEnv::FromEnvironment();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_ = env.value();
    auto client = env_.MakeClient();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_.emplace(std::move(client).value());
    static int tests_run = 0;  // each test its own namespace: the last one may still be terminating
    id_ = "promtool-" + std::to_string(::getpid()) + "-" + std::to_string(++tests_run);
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-promtool-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(CreateNamespace(*client_, id_).ok());
    nodes_ = UniformSimNodes(id_, 1, 2, "PromGPU", 24576);
    nodes_[0].labels["tessera.io/e2e-group"] = id_;
    ASSERT_TRUE(CreateSimNodes(*client_, nodes_).ok());
  }
  void TearDown() override {
    if (client_) {
      (void)DeleteNamespace(*client_, id_);
      (void)DeleteSimNodes(*client_, nodes_);
    }
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  void ExpectClean(const std::string& who, const std::string& page) {
    const CheckResult r = PromtoolCheck(promtool_, page, dir_);
    EXPECT_EQ(r.exit_code, 0) << who << ": promtool check metrics failed:\n" << r.output << "\n--- page:\n" << page;
    EXPECT_EQ(r.output, "") << who << ": promtool reported problems:\n" << r.output << "\n--- page:\n" << page;
  }

  // Starts a tessera-node in simulated mode on nodes_[0] (no kubelet: it
  // serves its socket, retries registering, and serves /metrics all the
  // same) with one share allocated on it (a pod created already bound, with
  // its assignment and allocation marked, as the extender and the agent
  // would leave it), and returns its page once the usage pass has published
  // the container's series.
  Result<std::string> StartNodeAgentWithAShare(std::optional<ChildProcess>& agent) {
    const core::GpuInfo& gpu = nodes_[0].info.gpus.at(0);
    core::Assignment assignment;
    assignment.node = nodes_[0].info.name;
    core::ContainerAssignment container;
    container.name = "main";
    core::GpuShare share;
    share.index = gpu.index;
    share.uuid = gpu.uuid;
    share.mem_mib = 4096;
    share.core_milli = 250;
    container.gpus = {share};
    assignment.containers = {container};
    nlohmann::json pod = GpuPod(id_, "held", {{"main", 1, 4096, 25}});
    pod["spec"]["nodeName"] = nodes_[0].info.name;
    TESSERA_ASSIGN_OR_RETURN(std::string encoded, core::EncodeAssignment(assignment));
    pod["metadata"]["annotations"][std::string(core::kAssignmentAnnotation)] = encoded;
    pod["metadata"]["annotations"][std::string(core::kAllocatedAnnotation)] = "main";
    TESSERA_RETURN_IF_ERROR(client_->Create(kube::PodsPath(id_), pod).status());

    const std::string gpu_file = dir_ + "/gpus.yaml";
    std::ofstream(gpu_file) << node::FormatGpuFile(nodes_[0].info.gpus);
    const int port = FreeLoopbackPort();
    if (port == 0) return Status(StatusCode::kUnavailable, "no free port");
    std::filesystem::create_directories(dir_ + "/dp");
    std::filesystem::create_directories(env_.dir + "/logs");
    const std::string log = env_.dir + "/logs/tessera-node-" + id_ + ".log";
    TESSERA_ASSIGN_OR_RETURN(
        ChildProcess started,
        ChildProcess::Start({env_.bin_dir + "/tessera-node", "--node-name", nodes_[0].info.name, "--kubeconfig",
                             env_.kubeconfig, "--device-plugin-dir", dir_ + "/dp", "--simulated-gpus", gpu_file,
                             "--region-root", dir_ + "/regions", "--pod-resources-socket", dir_ + "/absent.sock",
                             "--usage-interval-ms", "200", "--metrics-bind-address",
                             "127.0.0.1:" + std::to_string(port)},
                            log));
    agent.emplace(std::move(started));
    Result<std::string> page = Status(StatusCode::kUnavailable, "not scraped");
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      page = FetchMetrics(port);
      if (page.ok() && page->find("tessera_container_gpu_memory_limit_bytes{") != std::string::npos) return page;
    }
    return Status(StatusCode::kUnavailable, "tessera-node never served the share's series; see " + log +
                                                     (page.ok() ? "\n" + *page : ""));
  }

  std::string promtool_;
  ClusterEnv env_;
  std::optional<kube::Client> client_;
  std::string id_, dir_;
  std::vector<SimNode> nodes_;
};

TEST_F(MetricsPromtoolTest, SchedulerMetricsPassPromtool) {
  auto extender = env_.StartExtender({"--identity", id_});
  ASSERT_TRUE(extender.ok()) << extender.status().ToString();
  // kube-scheduler filters, scores and binds this pod through the extender.
  ASSERT_TRUE(client_->Create("/api/v1/namespaces/" + id_ + "/pods",
                              GpuPod(id_, "p0", {{"main", 1, 4096, 25}}, {{"tessera.io/e2e-group", id_}}))
                  .ok());
  auto pod = WaitForPod(*client_, id_, "p0", IsBound, seconds(60));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  // And one call kube-scheduler would never make, so the error series has a sample.
  httplib::Client http("127.0.0.1", env_.extender_port);
  auto bad = http.Post("/filter", "{not json", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);

  auto page = FetchMetrics(env_.extender_port);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_NE(page->find(R"(tessera_scheduler_decisions_total{verb="bind",outcome="bound"} )"), std::string::npos)
      << *page;
  EXPECT_NE(page->find(R"(tessera_scheduler_decisions_total{verb="filter",outcome="bad_request"} 1)"),
            std::string::npos)
      << *page;
  ExpectClean("tessera-scheduler", *page);
}

TEST_F(MetricsPromtoolTest, NodeMetricsPassPromtool) {
  std::optional<ChildProcess> agent;
  auto page = StartNodeAgentWithAShare(agent);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_NE(page->find("tessera_node_allocations_total{node=\"" + nodes_[0].info.name + "\"} 0\n"), std::string::npos)
      << *page;
  EXPECT_NE(page->find("tessera_container_gpu_memory_limit_bytes{"), std::string::npos) << *page;
  ExpectClean("tessera-node", *page);
  agent->Stop(SIGTERM);
}

TEST_F(MetricsPromtoolTest, DashboardQueriesParseAndNameServedMetrics) {
  const char* path = std::getenv("TESSERA_DASHBOARD");
  ASSERT_TRUE(path != nullptr) << "TESSERA_DASHBOARD is not set; run through ctest";
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  nlohmann::json dashboard;
  try {
    dashboard = nlohmann::json::parse(file);
  } catch (const std::exception& e) {
    FAIL() << path << " is not JSON: " << e.what();
  }
  ASSERT_TRUE(dashboard.contains("panels") && dashboard["panels"].is_array());
  std::set<int> ids;
  for (const auto& panel : dashboard["panels"]) {
    EXPECT_TRUE(ids.insert(panel.value("id", -1)).second) << "duplicate panel id in " << panel.dump();
  }

  // What the binaries serve, with samples on every family that has labels.
  auto extender = env_.StartExtender({"--identity", id_});
  ASSERT_TRUE(extender.ok()) << extender.status().ToString();
  std::optional<ChildProcess> agent;
  auto node_page = StartNodeAgentWithAShare(agent);
  ASSERT_TRUE(node_page.ok()) << node_page.status().ToString();
  auto scheduler_page = FetchMetrics(env_.extender_port);
  ASSERT_TRUE(scheduler_page.ok()) << scheduler_page.status().ToString();
  Served served;
  served.Add(*scheduler_page);
  served.Add(*node_page);

  std::vector<std::pair<std::string, std::string>> queries;
  CollectQueries(dashboard, "dashboard", queries);
  ASSERT_GE(queries.size(), 20u);
  static const std::regex metric(R"(\b(tessera_[a-zA-Z0-9_]+)(\{([^}]*)\})?)");
  static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=))");
  static const std::regex grouping(R"(\b(?:by|without)\s*\(([^)]*)\))");
  const std::set<std::string> added_by_prometheus = {"instance", "job", "le"};
  std::set<std::string> used;
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& [where, query] : queries) {
    const std::string expanded = Expand(query);
    std::set<std::string> labels_here = added_by_prometheus;
    bool names_a_metric = false;
    for (auto it = std::sregex_iterator(expanded.begin(), expanded.end(), metric); it != std::sregex_iterator(); ++it) {
      names_a_metric = true;
      const std::string family = served.Family((*it)[1]);
      used.insert(family);
      if (!served.type.contains(family)) {
        ADD_FAILURE() << where << ": " << (*it)[1] << " is not served by tessera-scheduler or tessera-node\n  " << query;
        continue;
      }
      const std::set<std::string>& known = served.labels[family];
      labels_here.insert(known.begin(), known.end());
      const std::string selector = (*it)[3];
      for (auto l = std::sregex_iterator(selector.begin(), selector.end(), label); l != std::sregex_iterator(); ++l) {
        EXPECT_TRUE(known.contains((*l)[1])) << where << ": " << family << " has no label " << (*l)[1] << "\n  " << query;
      }
    }
    EXPECT_TRUE(names_a_metric) << where << ": names no tessera metric: " << query;
    for (auto g = std::sregex_iterator(expanded.begin(), expanded.end(), grouping); g != std::sregex_iterator(); ++g) {
      std::istringstream names{std::string((*g)[1])};
      std::string name;
      while (std::getline(names, name, ',')) {
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        EXPECT_TRUE(labels_here.contains(name)) << where << ": groups by " << name << ", which no metric has\n  " << query;
      }
    }
    // Grafana's label_values() is not PromQL; everything else must parse.
    if (!query.starts_with("label_values(")) {
      rules.push_back({{"record", "dashboard:query:" + std::to_string(rules.size())}, {"expr", expanded}});
    }
  }
  const std::string rule_file = dir_ + "/dashboard-rules.yaml";
  std::ofstream(rule_file) << nlohmann::json{{"groups", {{{"name", "dashboard"}, {"rules", rules}}}}}.dump(2);
  const CheckResult r = Promtool(promtool_, "check rules " + rule_file, "/dev/null");
  EXPECT_EQ(r.exit_code, 0) << "promtool check rules on the dashboard's queries:\n" << r.output;
  // Each GPU and container family has a panel.
  for (const auto& [family, type] : served.type) {
    if (family.starts_with("tessera_gpu_") || family.starts_with("tessera_container_")) {
      EXPECT_TRUE(used.contains(family)) << family << " is served but no dashboard panel shows it";
    }
  }
  agent->Stop(SIGTERM);
}

}  // namespace
}  // namespace tessera::testing
