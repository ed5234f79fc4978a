# Checks the built libtessera-cuda.so against what it promises:
#  1. it exports exactly dlsym and the hooks of hook_list.inc;
#  2. none of the library's own objects has a static constructor;
#  3. it needs nothing at run time beyond libc, libdl, libpthread, libm and
#     the loader (skipped under sanitizers, whose runtimes it then needs).
#   cmake -DLIB=... -DLIST=hook_list.inc "-DOBJECTS=a.o;b.o" -DCHECK_NEEDED=ON -DCHECK_CTORS=ON
#         -P check_library.cmake
cmake_minimum_required(VERSION 3.18)

file(STRINGS "${LIST}" lines REGEX "^TESSERA_(CU|NVML)_HOOK\\(")
set(expected dlsym)
foreach(l IN LISTS lines)
  string(REGEX REPLACE "^TESSERA_(CU|NVML)_HOOK\\(([A-Za-z0-9_]+),.*" "\\2" n "${l}")
  list(APPEND expected ${n})
endforeach()
list(SORT expected)

execute_process(COMMAND nm -D --defined-only "${LIB}" OUTPUT_VARIABLE nm_out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REGEX MATCHALL "[^\n]+" nm_lines "${nm_out}")
set(exported "")
foreach(l IN LISTS nm_lines)
  if(l MATCHES " [TtWwDdBbVv] ([A-Za-z0-9_@.]+)$")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()
list(SORT exported)
if(NOT exported STREQUAL expected)
  message(FATAL_ERROR "exports differ from hook_list.inc + dlsym:\n  got: ${exported}\n  expected: ${expected}")
endif()

foreach(obj IN LISTS OBJECTS)
  if(NOT CHECK_CTORS)
    break()
  endif()
  execute_process(COMMAND readelf -SW "${obj}" OUTPUT_VARIABLE sections)
  if(sections MATCHES "\\.init_array|\\.ctors")
    message(FATAL_ERROR "${obj} has a static constructor (.init_array)")
  endif()
endforeach()

if(CHECK_NEEDED)
  execute_process(COMMAND readelf -dW "${LIB}" OUTPUT_VARIABLE dyn)
  string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dyn}")
  foreach(n IN LISTS needed)
    if(NOT n MATCHES "\\[(libc\\.so|libdl\\.so|libpthread\\.so|libm\\.so|ld-linux)")
      message(FATAL_ERROR "libtessera-cuda.so needs ${n}: only libc, libdl, pthread, libm allowed")
    endif()
  endforeach()
endif()
list(LENGTH expected n_exports)
list(LENGTH OBJECTS n_objects)
message(STATUS "libtessera-cuda.so: ${n_exports} exports as listed, ${n_objects} objects without static constructors")
