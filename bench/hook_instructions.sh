#!/usr/bin/env bash
# Instructions per hooked CUDA call, counted by callgrind on the fake driver:
# without libtessera-cuda.so, preloaded with no limit (pass-through), and
# preloaded with a limit (enforcing). Each cell is
#   (Ir with N calls - Ir with 0 calls) / N
# so process start-up and first-call set-up cancel out. Needs valgrind.
#   bench/hook_instructions.sh [BUILD_DIR] [N]
set -euo pipefail
build=${1:-build}
n=${2:-20000}
prog="$build/bench/hook_instructions"
lib="$build/src/cuda/libtessera-cuda.so"
for f in "$prog" "$lib"; do
  [[ -e $f ]] || { echo "missing $f: build the tree first (cmake --build $build)" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "valgrind not found: apt-get install valgrind" >&2; exit 2; }

# Total instructions callgrind collected for one run.
count() {  # env... -- op n
  local out
  out=$(env "$@" 2>&1 >/dev/null | grep -E '^==[0-9]+== Collected : ' | awk '{print $4}')
  [[ -n $out ]] || { echo "callgrind gave no count for: $*" >&2; exit 1; }
  echo "$out"
}
per_call() {  # op env...
  local op=$1; shift
  local base full
  base=$(count "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$op" 0)
  full=$(count "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$op" "$n")
  echo $(( (full - base) / n ))
}

printf '| call | no library | no limit | limit | no limit / none | limit / none |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for op in alloc async launch meminfo; do
  none=$(per_call "$op" LD_PRELOAD=)
  pass=$(per_call "$op" LD_PRELOAD="$lib")
  limit=$(per_call "$op" LD_PRELOAD="$lib" TESSERA_GPU_MEM_LIMIT_MIB_0=1024)
  case $op in
    alloc) name='cuMemAlloc_v2 + cuMemFree_v2' ;;
    async) name='cuMemAllocAsync + cuMemFreeAsync' ;;
    launch) name='cuLaunchKernel via cuGetProcAddress' ;;
    meminfo) name='cuMemGetInfo_v2' ;;
  esac
  awk -v name="$name" -v a="$none" -v b="$pass" -v c="$limit" \
    'BEGIN { printf "| %s | %d | %d | %d | %.2fx | %.2fx |\n", name, a, b, c, (a ? b / a : 0), (a ? c / a : 0) }'
done
