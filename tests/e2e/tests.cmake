# End-to-end suite: real kube-apiserver + kube-scheduler + tessera-scheduler.
tessera_cluster_test(e2e_scheduling_test SRCS ${CMAKE_CURRENT_LIST_DIR}/scheduling_test.cc
                     DEPS tessera_test_support LABELS e2e)
set_tests_properties(e2e_scheduling_test PROPERTIES TIMEOUT 600)
add_dependencies(e2e_scheduling_test tessera-scheduler)

# DRA claim pods placed through both extenders entries: ResourceSlices
# published by the test for simulated nodes (with tessera-node's builder), claims allocated by the real
# kube-scheduler, the claim pod on the node the extender scores highest, and
# a device-plugin pod kept off the GPU the claims fill.
tessera_cluster_test(e2e_dra_scheduling_test SRCS ${CMAKE_CURRENT_LIST_DIR}/dra_scheduling_test.cc
                     DEPS tessera_test_support tessera_dra LABELS e2e)
set_tests_properties(e2e_dra_scheduling_test PROPERTIES TIMEOUT 300)
add_dependencies(e2e_dra_scheduling_test tessera-scheduler)

# The whole hand-over: the same, plus a real tessera-node and a kubelet
# stand-in per simulated node, for what a real kubelet cannot do: fifty pods
# on five nodes, and faults in the middle of the hand-over (its other cases
# run on a real node in e2e_real_node_path_test, below).
tessera_cluster_test(e2e_node_path_test SRCS ${CMAKE_CURRENT_LIST_DIR}/node_path_test.cc
                     DEPS tessera_kubelet_sim tessera_test_support LABELS e2e)
set_tests_properties(e2e_node_path_test PROPERTIES TIMEOUT 600)
add_dependencies(e2e_node_path_test tessera-scheduler tessera-node)

# MPS isolation: an --mps=on node running the stand-in control daemon of
# tests/fake_mps and an --mps=off node, through the whole hand-over.
tessera_cluster_test(e2e_mps_test SRCS ${CMAKE_CURRENT_LIST_DIR}/mps_test.cc
                     DEPS tessera_kubelet_sim tessera_test_support LABELS e2e)
set_tests_properties(e2e_mps_test PROPERTIES TIMEOUT 300)
add_dependencies(e2e_mps_test tessera-scheduler tessera-node)
target_compile_definitions(e2e_mps_test PRIVATE
  TESSERA_FAKE_MPS_CONTROL="${PROJECT_SOURCE_DIR}/tests/fake_mps/nvidia-cuda-mps-control")

# kubectl-tessera: its inspect output against tessera-scheduler's own books.
tessera_cluster_test(e2e_kubectl_tessera_test SRCS ${CMAKE_CURRENT_LIST_DIR}/kubectl_tessera_test.cc
                     DEPS tessera_scheduler tessera_test_support LABELS e2e)
set_tests_properties(e2e_kubectl_tessera_test PROPERTIES TIMEOUT 300)
add_dependencies(e2e_kubectl_tessera_test tessera-scheduler kubectl-tessera)

# Compatibility front ends: a pod mixing gpushare's and Tessera's names is
# refused naming both (the unchanged manifests run on a real node in
# e2e_real_node_examples_test).
tessera_cluster_test(e2e_compat_test SRCS ${CMAKE_CURRENT_LIST_DIR}/compat_test.cc
                     DEPS tessera_kubelet_sim tessera_test_support yaml-cpp LABELS e2e)
set_tests_properties(e2e_compat_test PROPERTIES TIMEOUT 300)
add_dependencies(e2e_compat_test tessera-scheduler tessera-node)

# The Helm chart (deploy/helm/tessera): linted, rendered, validated by the
# fixture's API server, installed, upgraded and uninstalled as docs/install.md
# says, RBAC checked with `kubectl auth can-i`, and its configuration run: the
# binaries with the rendered args, config files and ServiceAccount tokens
# schedule and allocate a pod. helm comes from scripts/setup.sh
# (tools/controlplane/build-helm.sh).
add_test(NAME e2e_helm_chart_test COMMAND ${CMAKE_CURRENT_LIST_DIR}/helm_chart_test.sh)
set_tests_properties(e2e_helm_chart_test PROPERTIES
  FIXTURES_REQUIRED cluster
  RESOURCE_LOCK cluster
  LABELS e2e
  TIMEOUT 600
  ENVIRONMENT "TESSERA_TEST_KUBECONFIG=${TESSERA_TEST_CLUSTER_DIR}/kubeconfig;TESSERA_TEST_CLUSTER_DIR=${TESSERA_TEST_CLUSTER_DIR};TESSERA_BIN_DIR=${CMAKE_BINARY_DIR}/bin")

# Every example under examples/ (but the node list in examples/cluster/):
# validated by the API server, applied, and each pod Running on simulated
# nodes of examples/cluster/nodes.yaml (Deployments' and Jobs' pods made by
# the fixture's kube-controller-manager), except
# those meant not to fit, which must carry their FailedScheduling reason; and
# the TF Serving example's three replicas on one 16 GB GPU.
tessera_cluster_test(e2e_examples_test SRCS ${CMAKE_CURRENT_LIST_DIR}/examples_test.cc
                     DEPS tessera_kubelet_sim tessera_test_support LABELS e2e)
set_tests_properties(e2e_examples_test PROPERTIES TIMEOUT 400)
add_dependencies(e2e_examples_test tessera-scheduler tessera-node)

# GPU preemption: PriorityClasses, evictions through the Eviction API, Events,
# and the preemptor landing on the freed share.
tessera_cluster_test(e2e_preemption_test SRCS ${CMAKE_CURRENT_LIST_DIR}/preemption_test.cc
                     DEPS tessera_test_support LABELS e2e)
set_tests_properties(e2e_preemption_test PROPERTIES TIMEOUT 300)
add_dependencies(e2e_preemption_test tessera-scheduler)

# Interference-aware placement: tessera-interference learning from the
# tessera.io/usage annotations on pods through the pod watch.
tessera_cluster_test(e2e_interference_test SRCS ${CMAKE_CURRENT_LIST_DIR}/interference_test.cc
                     DEPS tessera_test_support LABELS e2e)
set_tests_properties(e2e_interference_test PROPERTIES TIMEOUT 300)
add_dependencies(e2e_interference_test tessera-scheduler)

# Tests on real nodes (tools/realnode: per node its own netns, mount
# namespace, containerd, kubelet, kube-proxy and CoreDNS) beside the
# fixture's cluster. Shell scripts; they need root (namespaces) and exit 77,
# skipped, without it. With the fake CUDA client (not built under the
# sanitizers) their containers run it under the interception library.
function(tessera_real_node_test name script timeout)
  add_test(NAME ${name} COMMAND ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/${script})
  set_tests_properties(${name} PROPERTIES
    FIXTURES_REQUIRED cluster
    RESOURCE_LOCK cluster
    LABELS e2e
    TIMEOUT ${timeout}
    SKIP_RETURN_CODE 77
    ENVIRONMENT "TESSERA_TEST_KUBECONFIG=${TESSERA_TEST_CLUSTER_DIR}/kubeconfig;TESSERA_TEST_CLUSTER_DIR=${TESSERA_TEST_CLUSTER_DIR};TESSERA_BIN_DIR=${CMAKE_BINARY_DIR}/bin;TESSERA_IMAGES_DIR=${CMAKE_BINARY_DIR}/images")
  if(NOT TESSERA_SANITIZE)
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
      "TESSERA_TEST_CLIENT=$<TARGET_FILE:fake_cuda_client>" "TESSERA_TEST_PRELOAD=$<TARGET_FILE:tessera-cuda>")
  endif()
endfunction()

# One real node: a busybox pod to completion, then tessera-node registered
# with the real kubelet and a sharing pod checked from inside its container.
tessera_real_node_test(e2e_real_node_test real_node_test.sh 300)

# The product path on one real node: Tessera's images (make images) imported
# into the node's containerd and run by the Helm chart as docs/install.md
# installs it; a Deployment of sharing pods through the chart's kube-scheduler,
# the extender's Service and the real kubelet's Allocate; faults. Skipped (77)
# without the image archives, unless TESSERA_REQUIRE_IMAGES=1 (make test).
tessera_real_node_test(e2e_real_node_chart_test real_node_chart_test.sh 600)

# Every example on a real node with the chart and both front ends: each runs
# through the real controllers and kubelet and sees its share from inside, a
# Job's completion frees its share, a rolling update moves shares without
# over-commit, examples/workloads' trainer gets two whole GPUs. Needs the fake
# CUDA client (skipped under the sanitizers).
tessera_real_node_test(e2e_real_node_examples_test real_node_examples_test.sh 600)

# The node path's cases that need no fault injection (they ran against the
# kubelet stand-in in e2e_node_path_test): one real node with the chart,
# reused by each case. Same-size pods on their own GPUs, a 2-GPU container,
# an init container beside two GPU containers, each checked from inside
# against its assignment; a burst pod's loan on /metrics; usage on /metrics,
# the pod's annotation and Events and kubectl tessera top; a deleted pod's
# region folder removed after the grace. Needs the fake CUDA client (skipped
# under the sanitizers).
tessera_real_node_test(e2e_real_node_path_test real_node_path_test.sh 300)

# tessera-node as the DRA driver on one real node with the chart's
# dra.enabled: claims allocated by kube-scheduler's DRA allocator, prepared
# by the real kubelet and handed to containers by containerd's CDI, their
# limits enforced by the library inside; two claims on one GPU, two that
# wait with kube-scheduler's reason, a kubelet and an agent restart, nothing
# left after unprepare; a mixed node: a device-plugin pod and a claim on one
# GPU without over-commit, the slice offering what device-plugin pods leave.
# Needs the fake CUDA client (skipped under the sanitizers).
tessera_real_node_test(e2e_real_node_dra_test real_node_dra_test.sh 420)

# bench/trace_replay on a tiny openb-format trace, in a loopback cluster of
# its own: the simulator's and the real path's figures, every pod placed by
# both (docs/simulator.md, "Through the real path").
add_test(NAME e2e_trace_replay_test COMMAND ${CMAKE_CURRENT_LIST_DIR}/trace_replay_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(e2e_trace_replay_test PROPERTIES RESOURCE_LOCK cluster LABELS e2e TIMEOUT 300)
