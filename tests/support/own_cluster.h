// A loopback cluster of a benchmark's own (tools/controlplane/cluster-up.sh
// in a folder it names), apart from the ctest fixture's, torn down when the
// handle goes; and the shell helper the benchmarks share.
//
//   TESSERA_ASSIGN_OR_RETURN(auto cluster, OwnCluster::Start(repo, dir, "EXTENDER=0 SCHEDULER=0"));
//   TESSERA_RETURN_IF_ERROR(CreateSimNodes(client, nodes));
//   cluster->ForgetOnExit(nodes);
//   ...  // cluster-down.sh DIR runs when `cluster` goes
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tests/support/sim_nodes.h"

namespace tessera::testing {

// Runs `command` with /bin/sh; its exit status, 1 when it did not exit.
int Sh(const std::string& command);

class OwnCluster {
 public:
  // Stops whatever a cluster-up.sh left running in `dir`, then runs
  // `env` cluster-up.sh DIR from `repo`/tools/controlplane (`env`: variable
  // assignments such as "EXTENDER=0 SCHEDULER=0", or ""). INTERNAL naming
  // the folder when cluster-up.sh fails (its output is discarded).
  static Result<std::unique_ptr<OwnCluster>> Start(const std::string& repo, const std::string& dir,
                                                  const std::string& env);
  // Stops renewing the Leases of the nodes handed to ForgetOnExit (renewals
  // against a stopped API server would retry in the background), then runs
  // cluster-down.sh DIR.
  ~OwnCluster();
  OwnCluster(const OwnCluster&) = delete;
  OwnCluster& operator=(const OwnCluster&) = delete;

  // Nodes whose Leases this process renews (CreateSimNodes made them).
  void ForgetOnExit(const std::vector<SimNode>& nodes);
  const std::string& dir() const { return dir_; }
  // `repo`/tools/controlplane, for its other scripts (scheduler-up.sh).
  const std::string& controlplane() const { return controlplane_; }

 private:
  OwnCluster(std::string controlplane, std::string dir) : controlplane_(std::move(controlplane)), dir_(std::move(dir)) {}

  const std::string controlplane_;
  const std::string dir_;
  std::vector<std::string> nodes_;
};

}  // namespace tessera::testing
