#include "tests/support/own_cluster.h"

#include <sys/wait.h>

#include <cstdlib>

#include "tests/support/node_leases.h"

namespace tessera::testing {

int Sh(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

Result<std::unique_ptr<OwnCluster>> OwnCluster::Start(const std::string& repo, const std::string& dir,
                                                      const std::string& env) {
  const std::string cp = repo + "/tools/controlplane";
  Sh(cp + "/cluster-down.sh " + dir + " >/dev/null 2>&1");
  if (Sh(env + (env.empty() ? "" : " ") + cp + "/cluster-up.sh " + dir + " >/dev/null") != 0) {
    return Internal("cluster-up.sh failed for " + dir);
  }
  return std::unique_ptr<OwnCluster>(new OwnCluster(cp, dir));
}

OwnCluster::~OwnCluster() {
  for (const std::string& name : nodes_) ForgetNode(name);
  Sh(controlplane_ + "/cluster-down.sh " + dir_ + " >/dev/null 2>&1");
}

void OwnCluster::ForgetOnExit(const std::vector<SimNode>& nodes) {
  for (const SimNode& node : nodes) nodes_.push_back(node.info.name);
}

}  // namespace tessera::testing
