#include "node/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace tessera::node {

std::vector<KubeletRecord> RecordsFromResponse(const v1::ListPodResourcesResponse& response,
                                               const std::string& resource) {
  std::vector<KubeletRecord> out;
  for (const auto& pod : response.pod_resources()) {
    for (const auto& container : pod.containers()) {
      KubeletRecord record{pod.namespace_(), pod.name(), container.name(), {}};
      for (const auto& devices : container.devices()) {
        if (devices.resource_name() != resource) continue;
        record.device_ids.insert(record.device_ids.end(), devices.device_ids().begin(), devices.device_ids().end());
      }
      if (!record.device_ids.empty()) out.push_back(std::move(record));
    }
  }
  return out;
}

Result<std::vector<KubeletRecord>> ListKubeletRecords(const std::string& socket, const std::string& resource,
                                                      std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesResponse response;
  grpc::Status st = stub->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!st.ok()) {
    return Status(static_cast<StatusCode>(st.error_code()),
                  "pod-resources List on " + socket + ": " + st.error_message());
  }
  return RecordsFromResponse(response, resource);
}

}  // namespace tessera::node
