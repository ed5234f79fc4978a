# Build helpers shared by every module: warnings, sanitizers, and the two
# declarations each CMakeLists uses, tessera_library() and tessera_test().

set(TESSERA_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
if(TESSERA_WERROR)
  list(APPEND TESSERA_WARNINGS -Werror)
endif()
# Clang checks the lock annotations of src/core/thread_annotations.h;
# TESSERA_THREAD_SAFETY (make check-thread-safety) makes its findings errors
# even without TESSERA_WERROR, and adds the beta checks.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  list(APPEND TESSERA_WARNINGS -Wthread-safety)
  if(TESSERA_THREAD_SAFETY)
    list(APPEND TESSERA_WARNINGS -Wthread-safety-beta -Werror=thread-safety -Werror=thread-safety-beta)
  endif()
elseif(TESSERA_THREAD_SAFETY)
  message(FATAL_ERROR "TESSERA_THREAD_SAFETY needs clang; configure with CXX=clang++-14")
endif()

if(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# tessera_library(NAME SRCS a.cc b.cc DEPS other_lib)
function(tessera_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# tessera_test(NAME SRCS a_test.cc DEPS lib LABELS unit [ARGS ...])
# Every test is registered with ctest and carries at least one label.
function(tessera_test name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;LABELS;ARGS" ${ARGN})
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "tessera_test(${name}) needs LABELS")
  endif()
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
endfunction()
