# Fails when cuda.h exports an allocating or freeing entry point, or one that
# makes or ends a context or loads a module, that hook_list.inc neither hooks
# nor lists below as deliberately not counted.
#   cmake -DLIST=hook_list.inc "-DHEADERS=a/cuda.h;b/cuda.h" -P check_hook_coverage.cmake
# Exported names are the header's declarations plus its version macros
# (cuMemAlloc -> cuMemAlloc_v2) and per-thread-stream variants (_ptsz, _ptds).

cmake_minimum_required(VERSION 3.18)

# name -> why it is not counted
set(NOT_COUNTED
  cuMemAllocHost "pinned host memory"
  cuMemAllocHost_v2 "pinned host memory"
  cuMemFreeHost "pinned host memory"
  cuMemHostAlloc "pinned host memory"
  cuMemHostRegister "registers existing host memory"
  cuMemHostRegister_v2 "registers existing host memory"
  cuMemHostUnregister "registers existing host memory"
  cuMemAddressReserve "address space only"
  cuMemAddressFree "address space only"
  cuMemMapArrayAsync "maps a counted handle into a sparse array (such mappings are not tracked)"
  cuMemMapArrayAsync_ptsz "maps a counted handle into a sparse array (such mappings are not tracked)"
  cuMemImportFromShareableHandle "imported: the exporter owns the memory"
  cuMemExportToShareableHandle "shares a counted handle"
  cuMemPoolImportFromShareableHandle "imported pool: the exporter owns it"
  cuMemPoolExportToShareableHandle "shares a counted pool"
  cuMemPoolImportPointer "imported: the exporter owns the memory"
  cuMemPoolExportPointer "shares counted memory"
  cuIpcOpenMemHandle "IPC: the exporter owns the memory"
  cuIpcOpenMemHandle_v2 "IPC: the exporter owns the memory"
  cuIpcCloseMemHandle "IPC: the exporter owns the memory"
  cuImportExternalMemory "allocated by another API (Vulkan, DirectX)"
  cuDestroyExternalMemory "allocated by another API (Vulkan, DirectX)"
  cuExternalMemoryGetMappedBuffer "allocated by another API (Vulkan, DirectX)"
  cuExternalMemoryGetMappedMipmappedArray "allocated by another API (Vulkan, DirectX)"
  cuGraphAddMemAllocNode "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphAddMemFreeNode "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphMemAllocNodeGetParams "query"
  cuGraphMemFreeNodeGetParams "query"
  cuGraphInstantiate "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphInstantiate_v2 "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphInstantiateWithFlags "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphInstantiateWithParams "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphInstantiateWithParams_ptsz "graph pool: counted by its reserve after cuGraphLaunch"
  cuGraphUpload "graph pool: counted by its reserve at the next launch or query"
  cuGraphUpload_ptsz "graph pool: counted by its reserve at the next launch or query"
  cuGraphExecDestroy "graph pool: counted by its reserve at the next launch or query"
  cuDeviceGetGraphMemAttribute "query"
  cuDeviceSetGraphMemAttribute "resets a high-water mark"
  cuMemPoolSetAttribute "counted by reserve at the next pool operation"
  cuMemPoolGetAttribute "query"
  cuMemGetAllocationGranularity "query"
  cuMemGetAllocationPropertiesFromHandle "query"
  cuMemRangeGetAttribute "query"
  cuMemRangeGetAttributes "query"
  cuMemGetHandleForAddressRange "query"
  cuIpcGetMemHandle "exports counted memory"
  cuIpcGetEventHandle "events, not memory"
  cuIpcOpenEventHandle "events, not memory"
  cuDevicePrimaryCtxReset "a reset primary context stays retained: charged until its last release"
  cuDevicePrimaryCtxReset_v2 "a reset primary context stays retained: charged until its last release"
  cuGreenCtxCreate "green contexts: not charged (docs/interception.md)"
  cuGreenCtxDestroy "green contexts: not charged (docs/interception.md)"
  cuCtxFromGreenCtx "green contexts: not charged (docs/interception.md)"
  cuModuleLoad "module memory: not charged (docs/interception.md)"
  cuModuleLoadData "module memory: not charged (docs/interception.md)"
  cuModuleLoadDataEx "module memory: not charged (docs/interception.md)"
  cuModuleLoadFatBinary "module memory: not charged (docs/interception.md)"
  cuModuleUnload "module memory: not charged (docs/interception.md)"
  cuLibraryLoadData "module memory: not charged (docs/interception.md)"
  cuLibraryLoadFromFile "module memory: not charged (docs/interception.md)"
  cuLibraryUnload "module memory: not charged (docs/interception.md)"
)

function(exported_names header out)
  file(READ "${header}" text)
  string(REGEX MATCHALL "CUresult CUDAAPI cu[A-Za-z0-9_]+\\(" decls "${text}")
  set(names "")
  foreach(d IN LISTS decls)
    string(REGEX REPLACE "CUresult CUDAAPI (cu[A-Za-z0-9_]+)\\(" "\\1" n "${d}")
    list(APPEND names ${n})
  endforeach()
  string(REGEX MATCHALL "#define (cu[A-Za-z0-9_]+) +(cu[A-Za-z0-9_]+|__CUDA_API_PT[SD][ZS]\\(cu[A-Za-z0-9_]+\\))"
         defines "${text}")
  foreach(d IN LISTS defines)
    if(d MATCHES "__CUDA_API_PTSZ\\((cu[A-Za-z0-9_]+)\\)")
      list(APPEND names ${CMAKE_MATCH_1}_ptsz)
    elseif(d MATCHES "__CUDA_API_PTDS\\((cu[A-Za-z0-9_]+)\\)")
      list(APPEND names ${CMAKE_MATCH_1}_ptds)
    elseif(d MATCHES "#define cu[A-Za-z0-9_]+ +(cu[A-Za-z0-9_]+)")
      list(APPEND names ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} ${names} PARENT_SCOPE)
endfunction()

file(STRINGS "${LIST}" hook_lines REGEX "^TESSERA_CU_HOOK\\(")
set(hooked "")
foreach(l IN LISTS hook_lines)
  string(REGEX REPLACE "^TESSERA_CU_HOOK\\(([A-Za-z0-9_]+),.*" "\\1" n "${l}")
  list(APPEND hooked ${n})
endforeach()
set(exempt "")
list(LENGTH NOT_COUNTED n_pairs)
math(EXPR last "${n_pairs} - 1")
foreach(i RANGE 0 ${last} 2)
  list(GET NOT_COUNTED ${i} n)
  list(APPEND exempt ${n})
endforeach()

# Allocating or freeing, by name: memory, arrays, pools, VMM, IPC, graphs' memory.
set(pattern "^cu(Mem|Array|Array3D|MipmappedArray|Ipc|ImportExternalMemory|DestroyExternalMemory|ExternalMemory|Graph[A-Za-z]*(Mem|Instantiate|Upload|ExecDestroy)|DeviceGraphMem|DeviceGetGraphMem|DeviceSetGraphMem)")
set(verbs "(Alloc|Free|Create|Destroy|Release|Retain|Trim|Import|Export|Register|Map|Reserve|Instantiate|Upload|Launch|GraphMem|Attribute|Granularity|Properties|Handle|Open|Close|External)")
# Making or ending contexts (each charged, see context_hooks.cc) and loading
# modules, by name.
set(context_pattern "^cu(Ctx(Create|Destroy)|DevicePrimaryCtx(Retain|Release|Reset)|GreenCtx(Create|Destroy)|CtxFromGreenCtx|Module(Load|Unload)|Library(Load|Unload))")
set(failures "")
set(checked 0)
foreach(header IN LISTS HEADERS)
  if(NOT EXISTS "${header}")
    continue()
  endif()
  exported_names("${header}" names)
  foreach(n IN LISTS names)
    if(n MATCHES "${context_pattern}")
      math(EXPR checked "${checked} + 1")
      if(NOT n IN_LIST hooked AND NOT n IN_LIST exempt)
        list(APPEND failures "${n} (${header})")
      endif()
      continue()
    endif()
    if(NOT n MATCHES "${pattern}" OR NOT n MATCHES "${verbs}")
      continue()
    endif()
    if(n MATCHES "^cuMem(cpy|set|Advise|Prefetch|GetInfo|GetAddressRange|BatchDecompress|HostGet|Discard)"
       OR n MATCHES "^cuGraphMem(cpy|set)" OR n MATCHES "SparseProperties$")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    if(NOT n IN_LIST hooked AND NOT n IN_LIST exempt)
      list(APPEND failures "${n} (${header})")
    endif()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no header read from: ${HEADERS}")
endif()
if(failures)
  list(JOIN failures "\n  " msg)
  message(FATAL_ERROR "allocating/freeing or context/module entry points neither hooked nor listed as not counted:\n  ${msg}")
endif()
message(STATUS "hook coverage: ${checked} allocating/freeing and context/module entry points checked, all hooked or exempt")
