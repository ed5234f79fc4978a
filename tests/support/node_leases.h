// Node heartbeats for simulated nodes: what a kubelet does for its Node, and
// what KWOK's controller does for fake ones. kube-controller-manager's node
// lifecycle controller marks a Node whose Lease in kube-node-lease has not
// been renewed for --node-monitor-grace-period (50 s) Unknown, taints it
// unreachable (NoSchedule, then NoExecute, which evicts its pods). Nodes that
// CreateSimNodes makes have no kubelet, so this process renews their Leases
// every 10 s for as long as it runs, until DeleteSimNodes forgets them or the
// Node is gone.
//
// Each Lease is owned by its Node (ownerReferences with the Node's uid), so
// the garbage collector deletes it with the Node, as it does a kubelet's.
// Thread-safety: every function from any thread. One background thread per
// process, started by the first KeepNodeAlive and joined at exit.
//
//   TESSERA_RETURN_IF_ERROR(KeepNodeAlive(client, "a100-0"));  // after creating the Node
#pragma once

#include <string>

#include "core/status.h"
#include "kube/client.h"

namespace tessera::testing {

// Creates or renews node `name`'s Lease now (the Node must exist: NOT_FOUND
// otherwise), then keeps renewing it in the background through `client`.
Status KeepNodeAlive(const kube::Client& client, const std::string& name);

// Stops renewing node `name`'s Lease (the Lease itself goes with the Node).
void ForgetNode(const std::string& name);

}  // namespace tessera::testing
