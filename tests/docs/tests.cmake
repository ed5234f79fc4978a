# The documentation's commands against the code (tests/docs/docs_commands_test.py):
# example files the e2e applies, flags in each binary's --help (and flag tables
# both ways), make targets, ctest names, Helm values. Not in the sanitizer
# build: it checks text, which that build would only repeat.
if(NOT TESSERA_SANITIZE)
add_test(NAME docs_commands_test
         COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/docs_commands_test.py ${PROJECT_SOURCE_DIR}
                 tessera-node=$<TARGET_FILE:tessera-node>
                 tessera-scheduler=$<TARGET_FILE:tessera-scheduler>
                 kubectl-tessera=$<TARGET_FILE:kubectl-tessera>
                 tessera-sim=$<TARGET_FILE:tessera-sim>
                 tessera-nodesim=$<TARGET_FILE:tessera-nodesim>
                 tessera-dev=$<TARGET_FILE:tessera-dev>)
set_tests_properties(docs_commands_test PROPERTIES LABELS unit TIMEOUT 120)
endif()
