# End-to-end suite: real kube-apiserver + kube-scheduler + tessera-scheduler.
tessera_cluster_test(e2e_scheduling_test SRCS ${CMAKE_CURRENT_LIST_DIR}/scheduling_test.cc
                     DEPS tessera_test_support LABELS e2e)
set_tests_properties(e2e_scheduling_test PROPERTIES TIMEOUT 600)
add_dependencies(e2e_scheduling_test tessera-scheduler)
