# Integration suite: the kube client against the real loopback kube-apiserver
# started by the `cluster` fixture (tests/CMakeLists.txt).
tessera_cluster_test(kube_client_integration_test SRCS ${CMAKE_CURRENT_LIST_DIR}/kube_client_test.cc
                     DEPS tessera_kube LABELS integration)
set_tests_properties(kube_client_integration_test PROPERTIES TIMEOUT 300)
