#include "kubectl/cluster_reader.h"

#include "kube/events.h"
#include "kube/paths.h"

namespace tessera::kubectl {

Status ClusterReader::Explain(const Status& status) const {
  if (status.code() != StatusCode::kUnavailable) return status;
  return Status(StatusCode::kUnavailable,
                "cannot reach the Kubernetes API server at " + client_.config().server + ": " + status.message());
}

Result<nlohmann::json> ClusterReader::Nodes() {
  auto list = client_.List("/api/v1/nodes");
  if (!list.ok()) return Explain(list.status());
  return std::move(list.value()["items"]);
}

Result<nlohmann::json> ClusterReader::Pods(const std::string& ns) {
  auto list = client_.List(kube::PodsPath(ns));
  if (!list.ok()) return Explain(list.status());
  return std::move(list.value()["items"]);
}

Result<nlohmann::json> ClusterReader::Pod(const std::string& ns, const std::string& name) {
  auto pod = client_.Get(kube::PodPath(ns, name));
  if (pod.ok()) return pod;
  if (pod.status().code() == StatusCode::kNotFound) {
    return NotFound("pod \"" + name + "\" not found in namespace \"" + ns + "\"");
  }
  return Explain(pod.status());
}

Result<nlohmann::json> ClusterReader::Node(const std::string& name) {
  auto node = client_.Get(kube::NodePath(name));
  if (node.ok()) return node;
  if (node.status().code() == StatusCode::kNotFound) return NotFound("node \"" + name + "\" not found");
  return Explain(node.status());
}

Result<nlohmann::json> ClusterReader::ResourceClaims(const std::string& ns) {
  const std::string api = "/apis/resource.k8s.io/v1";
  auto list = client_.List(ns.empty() ? api + "/resourceclaims" : api + "/namespaces/" + ns + "/resourceclaims");
  if (list.ok()) return std::move(list.value()["items"]);
  if (list.status().code() == StatusCode::kNotFound) return nlohmann::json::array();
  return Explain(list.status());
}

Result<nlohmann::json> ClusterReader::PodEvents(const std::string& ns, const std::string& name) {
  auto list = client_.List(kube::EventsPath(ns), "", "involvedObject.kind=Pod,involvedObject.name=" + name);
  if (!list.ok()) return Explain(list.status());
  return std::move(list.value()["items"]);
}

}  // namespace tessera::kubectl
