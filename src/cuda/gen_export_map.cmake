# Writes the linker export map of libtessera-cuda.so from hook_list.inc:
# exactly the hooked CUDA and NVML entry points plus dlsym; all else local.
#   cmake -DLIST=hook_list.inc -DOUT=exports.map -P gen_export_map.cmake
file(STRINGS "${LIST}" lines REGEX "^TESSERA_(CU|NVML)_HOOK\\(")
set(body "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^TESSERA_(CU|NVML)_HOOK\\(([A-Za-z0-9_]+),.*" "\\2" name "${line}")
  string(APPEND body "    ${name};\n")
endforeach()
file(WRITE "${OUT}.tmp" "/* Generated from hook_list.inc by gen_export_map.cmake. */\n{\n  global:\n    dlsym;\n${body}  local:\n    *;\n};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
