// The few reads kubectl-tessera makes from the API server, with errors worded
// for a person at a terminal: an unreachable server is named, a missing pod
// or node says which. Thread-safety: as kube::Client (any thread).
//
//   ClusterReader reader(kube::Client(config));
//   TESSERA_ASSIGN_OR_RETURN(nlohmann::json nodes, reader.Nodes());
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "kube/client.h"

namespace tessera::kubectl {

class ClusterReader {
 public:
  explicit ClusterReader(kube::Client client) : client_(std::move(client)) {}

  // Items of the Node list.
  Result<nlohmann::json> Nodes();
  // Items of the Pod list of `ns` ("" for every namespace).
  Result<nlohmann::json> Pods(const std::string& ns);
  // One pod; NOT_FOUND `pod "x" not found in namespace "ns"`.
  Result<nlohmann::json> Pod(const std::string& ns, const std::string& name);
  // One node; NOT_FOUND `node "x" not found`.
  Result<nlohmann::json> Node(const std::string& name);
  // Items of the ResourceClaim list (resource.k8s.io/v1) of `ns` ("" for
  // every namespace); an empty array where the API server does not serve
  // that API (a cluster without DRA v1).
  Result<nlohmann::json> ResourceClaims(const std::string& ns);
  // Items of the Events about pod ns/name.
  Result<nlohmann::json> PodEvents(const std::string& ns, const std::string& name);

 private:
  // Rewords transport errors and 5xx as "cannot reach the Kubernetes API server at URL: ...".
  Status Explain(const Status& status) const;

  kube::Client client_;
};

}  // namespace tessera::kubectl
