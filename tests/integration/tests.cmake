# Integration suite: the kube client against the real loopback kube-apiserver
# started by the `cluster` fixture (tests/CMakeLists.txt).
tessera_cluster_test(kube_client_integration_test SRCS ${CMAKE_CURRENT_LIST_DIR}/kube_client_test.cc
                     DEPS tessera_kube LABELS integration)
set_tests_properties(kube_client_integration_test PROPERTIES TIMEOUT 300)

# promtool (Debian's `prometheus` package, installed by scripts/setup.sh) on
# the /metrics pages of a running tessera-scheduler and tessera-node, and on
# the Grafana dashboard's queries.
find_program(TESSERA_PROMTOOL promtool)
if(TESSERA_PROMTOOL)
  tessera_cluster_test(metrics_promtool_test SRCS ${CMAKE_CURRENT_LIST_DIR}/metrics_promtool_test.cc
                       DEPS tessera_test_support tessera_node LABELS integration)
  set_tests_properties(metrics_promtool_test PROPERTIES TIMEOUT 300)
  set_property(TEST metrics_promtool_test APPEND PROPERTY ENVIRONMENT "TESSERA_PROMTOOL=${TESSERA_PROMTOOL}"
               "TESSERA_DASHBOARD=${PROJECT_SOURCE_DIR}/deploy/grafana/tessera-dashboard.json")
  add_dependencies(metrics_promtool_test tessera-scheduler tessera-node)
else()
  # Registered all the same, so a machine without promtool fails loudly
  # instead of skipping the check.
  add_test(NAME metrics_promtool_test
           COMMAND sh -c "echo 'metrics_promtool_test: promtool was not found when CMake configured this build; run scripts/setup.sh (it installs Debian'\\''s prometheus package) and configure again' >&2; exit 1")
  set_tests_properties(metrics_promtool_test PROPERTIES LABELS integration)
endif()
