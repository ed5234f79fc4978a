#include "node/node_metrics.h"

namespace tessera::node {
namespace {

Result<metrics::Counter*> AddCounter(metrics::Registry& registry, const std::string& node, const char* name,
                                     const char* help) {
  TESSERA_ASSIGN_OR_RETURN(metrics::Family<metrics::Counter> * family, registry.AddCounter(name, help, {"node"}));
  return &family->WithLabels({node});
}

}  // namespace

Result<NodeMetrics> NodeMetrics::Register(metrics::Registry& registry, const std::string& node) {
  NodeMetrics m;
  TESSERA_ASSIGN_OR_RETURN(m.allocations, AddCounter(registry, node, "tessera_node_allocations_total",
                                                     "Allocate calls answered with a container's GPUs."));
  TESSERA_ASSIGN_OR_RETURN(m.allocate_failures, AddCounter(registry, node, "tessera_node_allocate_failures_total",
                                                           "Allocate calls refused; the container got no GPU."));
  TESSERA_ASSIGN_OR_RETURN(
      m.assignments_refused,
      AddCounter(registry, node, "tessera_node_assignments_refused_total",
                 "Allocate calls refused because the pod's assignment is not what it asks for or does not fit "
                 "what the node has handed out (a forged or copied tessera.io/assignment)."));
  TESSERA_ASSIGN_OR_RETURN(
      m.mismatches,
      AddCounter(registry, node, "tessera_node_allocation_mismatches_total",
                 "Containers whose kubelet pod-resources record disagrees with their assignment, each counted once."));
  TESSERA_ASSIGN_OR_RETURN(
      m.reconcile_runs,
      AddCounter(registry, node, "tessera_node_reconcile_runs_total",
                 "Completed passes comparing the kubelet's pod-resources record with the pods' assignments."));
  TESSERA_ASSIGN_OR_RETURN(
      m.region_folders_removed,
      AddCounter(registry, node, "tessera_node_region_folders_removed_total",
                 "Region folders (<region-root>/<pod uid>) removed after their pod left the node."));
  return m;
}

}  // namespace tessera::node
