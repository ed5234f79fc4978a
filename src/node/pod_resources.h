// Reads the kubelet's record of which devices each container holds, through
// the pod-resources API (v1.PodResourcesLister/List on a Unix socket), for
// the reconciliation in reconcile.h. Thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(auto records,
//       ListKubeletRecords("/var/lib/kubelet/pod-resources/kubelet.sock", "tessera.io/gpu", 5s));
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"
#include "node/reconcile.h"
#include "podresources/v1/api.pb.h"

namespace tessera::node {

// The containers of `response` holding devices of `resource`, one record per
// container (device IDs of that resource only, in the kubelet's order).
// Containers without such devices are left out.
std::vector<KubeletRecord> RecordsFromResponse(const v1::ListPodResourcesResponse& response,
                                               const std::string& resource);

// Calls List on `socket` with a `timeout` deadline. UNAVAILABLE (or the gRPC
// code) with the socket named when the kubelet does not answer.
Result<std::vector<KubeletRecord>> ListKubeletRecords(const std::string& socket, const std::string& resource,
                                                      std::chrono::milliseconds timeout);

}  // namespace tessera::node
