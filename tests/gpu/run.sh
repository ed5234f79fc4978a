#!/usr/bin/env bash
# tests/gpu/run.sh OUTDIR    build libtessera-cuda.so and every GPU test
#                            standalone, run them one after another, write
#                            the results to OUTDIR
# tests/gpu/run.sh --check   without a GPU: the test list parses, every
#                            program and script it names exists, the library
#                            configures standalone, the Python compiles (and,
#                            when nvcc is on PATH, the GPU programs build)
#
# Needs a CUDA toolkit (nvcc, found on PATH, in CUDA_HOME or under
# /usr/local/cuda*), CMake, a C++ compiler and ninja or make; Python 3 with
# PyTorch for the torch tests (they are skipped, with the reason, without
# it). No network. Each test runs under `timeout`; the whole run stops
# starting tests once TESSERA_GPU_RUN_BUDGET_S (default 470 s, build
# included) is spent, and every test not run then counts as failed.
#
# OUTDIR gets four files: summary.txt (a table to read, and why each skip
# was skipped), results.json (per test: pass / fail / skip, reason, seconds
# and every number it printed; GPU, driver, CUDA, PyTorch and glibc
# versions), logs.txt (every test's output) and build.txt (configure and
# build). Exit status 0 when nothing failed, 1 otherwise, 2 on bad usage.
#
# Programs print their numbers as one line `RESULT {json}` (result_line.h);
# a skip is exit status 77 with a line `SKIP: reason`.
#
# Knobs: TESSERA_GPU_BUILD_DIR (build there and keep it; default a temporary
# folder), TESSERA_GPU_RUN_BUDGET_S, TESSERA_GPU_ONLY (an extended regex:
# run only the tests whose whole name it matches, e.g. 'compute_.*|mps',
# the diagnostic variants (DIAG_TESTS) included; a partial run is not a
# result to commit), TESSERA_GPU_EXTRA_INCLUDE (a
# folder holding spdlog/ and fmt/ headers, for gpu_mps_supervisor on a GPU
# machine that has none), and for --check TESSERA_GPU_CHECK_NVCC=0
# (do not build with an nvcc found on PATH) and TESSERA_CHECK_JOBS (2).
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUDGET_S=${TESSERA_GPU_RUN_BUDGET_S:-470}
# nvidia-smi where driver containers put it, when it is not on PATH.
for d in /usr/local/nvidia/bin /usr/lib/wsl/lib; do
  if ! command -v nvidia-smi >/dev/null && [ -x "$d/nvidia-smi" ]; then PATH="$PATH:$d"; fi
done

# The tests, in the order they run: name, timeout in seconds, environment
# (KEY=VALUE words), command. In environment and command: @LIB@ the
# library, @BIN@ the built test programs, @SRC@ this folder, @ROOT@ the
# tree, @PY@ python3, @TMP@ an empty folder of the test's own. Commands
# starting with `builtin:` are functions below; `skip:` is a test that this
# tree cannot run, with the reason. Every test also gets
# CUDA_DEVICE_ORDER=PCI_BUS_ID.
MEM="LD_PRELOAD=@LIB@ TESSERA_GPU_MEM_LIMIT_MIB_0=1024"
SHARE="LD_PRELOAD=@LIB@ TESSERA_GPU_CORE_PERCENT_0=50 TESSERA_GPU_CORE_POLICY=hard"
# tessera-node's arbiter as gpu_arbiter (built when nlohmann_json is found;
# the program skips, saying so, without it).
ARB="TESSERA_CUDA_LIB=@LIB@ TESSERA_GPU_ARBITER=@BIN@/gpu_arbiter"
TESTS=$(cat <<EOF
nvml_inventory|30||@BIN@/gpu_nvml_inventory
alloc_linear|30|$MEM|@BIN@/gpu_alloc_paths linear
alloc_pitch|30|$MEM|@BIN@/gpu_alloc_paths pitch
alloc_managed|30|$MEM|@BIN@/gpu_alloc_paths managed
alloc_async|30|$MEM|@BIN@/gpu_alloc_paths async
alloc_pool|30|$MEM|@BIN@/gpu_alloc_paths pool
alloc_vmm|30|$MEM|@BIN@/gpu_alloc_paths vmm
alloc_array|30|$MEM|@BIN@/gpu_alloc_paths array
alloc_mipmap|30|$MEM|@BIN@/gpu_alloc_paths mipmap
alloc_graph|30|$MEM|@BIN@/gpu_alloc_paths graph
alloc_runtime|30|$MEM|@BIN@/gpu_alloc_paths runtime
alloc_runtime_async|30|$MEM|@BIN@/gpu_alloc_paths runtime_async
alloc_meminfo|30|$MEM|@BIN@/gpu_alloc_paths meminfo
static_cudart_linear|30|$MEM|@BIN@/gpu_alloc_paths_static linear
static_cudart_async|30|$MEM|@BIN@/gpu_alloc_paths_static async
static_cudart_graph|30|$MEM|@BIN@/gpu_alloc_paths_static graph
static_cudart_runtime|30|$MEM|@BIN@/gpu_alloc_paths_static runtime
static_cudart_runtime_async|30|$MEM|@BIN@/gpu_alloc_paths_static runtime_async
static_cudart_meminfo|30|$MEM|@BIN@/gpu_alloc_paths_static meminfo
ptds_linear|30|$MEM|@BIN@/gpu_alloc_paths_ptds linear
ptds_async|30|$MEM|@BIN@/gpu_alloc_paths_ptds async
ptds_pool|30|$MEM|@BIN@/gpu_alloc_paths_ptds pool
ptds_graph|30|$MEM|@BIN@/gpu_alloc_paths_ptds graph
ptds_runtime|30|$MEM|@BIN@/gpu_alloc_paths_ptds runtime
ptds_runtime_async|30|$MEM|@BIN@/gpu_alloc_paths_ptds runtime_async
ptds_meminfo|30|$MEM|@BIN@/gpu_alloc_paths_ptds meminfo
routing_probe|60|$MEM|@BIN@/gpu_routing_probe @ROOT@/src/cuda/hook_list.inc
nvidia_smi|30||builtin:nvidia_smi
context_footprint|30||builtin:context_footprint
capture_global_nolib|30||@BIN@/gpu_capture_share global
capture_global|30|$SHARE|@BIN@/gpu_capture_share global
capture_threadlocal|30|$SHARE|@BIN@/gpu_capture_share threadlocal
capture_relaxed|30|$SHARE|@BIN@/gpu_capture_share relaxed
fork_after_init|60|$SHARE TESSERA_GPU_MEM_LIMIT_MIB_0=1024|@BIN@/gpu_processes fork
two_processes|60|$MEM TESSERA_REGION_DIR=@TMP@|@BIN@/gpu_processes two
claim_env|30|CLAIM_ENV_FILE=@SRC@/claim_env.txt CLAIM_DIR=@TMP@|builtin:claim_env
torch_meminfo_default|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py meminfo
torch_meminfo_expandable|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py meminfo expandable_segments:True
torch_meminfo_async|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py meminfo backend:cudaMallocAsync
torch_oom_default|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py oom
torch_oom_expandable|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py oom expandable_segments:True
torch_oom_async|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py oom backend:cudaMallocAsync
torch_two_default|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py two
torch_two_expandable|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py two expandable_segments:True
torch_two_async|60|$MEM TESSERA_REGION_DIR=@TMP@|@PY@ @SRC@/torch_limits.py two backend:cudaMallocAsync
torch_deviceview|60|$MEM TESSERA_REGION_DIR=@TMP@ TESSERA_GPU_MEM_VIEW=device|@PY@ @SRC@/torch_limits.py deviceview
torch_model_memlimit|90|LD_PRELOAD=@LIB@ TESSERA_GPU_MEM_LIMIT_MIB_0=2048|@PY@ @SRC@/torch_model.py train
torch_model_share|90|$SHARE TESSERA_GPU_MEM_LIMIT_MIB_0=2048|@PY@ @SRC@/torch_model.py train
torch_graph_nolib|90||@PY@ @SRC@/torch_model.py graph
torch_graph_share|90|$SHARE|@PY@ @SRC@/torch_model.py graph
compute_caps_kernel|60|TESSERA_CUDA_LIB=@LIB@|@BIN@/gpu_compute_share kernel 4
compute_caps_graph|50|TESSERA_CUDA_LIB=@LIB@|@BIN@/gpu_compute_share graph 3
compute_caps_cooperative|50|TESSERA_CUDA_LIB=@LIB@|@BIN@/gpu_compute_share cooperative 3
compute_ratios|65|TESSERA_CUDA_LIB=@LIB@|@BIN@/gpu_compute_share ratio 3
driver_costs|60||@BIN@/gpu_driver_costs
nvml_process_util|20||builtin:nvml_process_util
launch_overhead|50|TESSERA_CUDA_LIB=@LIB@|@BIN@/gpu_launch_overhead
torch_step_overhead|120|TESSERA_CUDA_LIB=@LIB@|@PY@ @SRC@/torch_model.py overhead
priority_hold|45|$ARB|@BIN@/gpu_arbiter_share priority_hold
burst_lend_reclaim|30|$ARB|@BIN@/gpu_arbiter_share burst_lend_reclaim
mps_supervisor|60||builtin:mps_supervisor
mps|45||builtin:mps
mps_shm|60||builtin:mps_shm
node_arbiter_ratio|35|$ARB|@BIN@/gpu_arbiter_share node_arbiter_ratio
EOF
)
# Diagnostic variants, same format: not part of a full run (their verdicts
# are not claims of their own); run only when TESSERA_GPU_ONLY names them.
# node_arbiter_ratio with one of its two differences from compute_ratios
# changed (the worker's launches per synchronize, the policy): which one
# lets the smaller share run over (tests/gpu/RESULTS.md, 2026-11-27).
DIAG_TESTS=$(cat <<EOF
node_arbiter_ratio_batch20|35|$ARB TESSERA_GPU_BATCH=20|@BIN@/gpu_arbiter_share node_arbiter_ratio
node_arbiter_ratio_hard|35|$ARB TESSERA_GPU_POLICY=hard|@BIN@/gpu_arbiter_share node_arbiter_ratio
EOF
)

die() { echo "run.sh: $*" >&2; exit 2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Builtin: nvidia-smi under the preload must show the limit as the total.
builtin_nvidia_smi() {
  local uuid limit=4096 line total used
  uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0) || return 1
  line=$(env "LD_PRELOAD=$LIB" "TESSERA_GPU_MEM_LIMIT_MIB_0=$limit" "TESSERA_GPU_UUID_0=$uuid" \
    nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader,nounits -i 0) || return 1
  total=$(echo "$line" | cut -d, -f1 | tr -d ' ')
  used=$(echo "$line" | cut -d, -f2 | tr -d ' ')
  echo "nvidia-smi under the preload (limit $limit MiB, $uuid): total $total MiB, used $used MiB"
  echo "RESULT {\"limit_mib\": $limit, \"total_mib\": ${total:-null}, \"used_mib\": ${used:-null}}"
  if [ "$total" != "$limit" ]; then
    echo "FAIL: nvidia-smi shows memory.total $total MiB, not the limit $limit MiB"
    return 1
  fi
}

# What one process's CUDA context really takes on the card (nvidia-smi's
# per-process used memory, while gpu_alloc_paths holds only its context)
# against what the library charges the share for it (TESSERA_GPU_CONTEXT_MIB,
# default 256): fails when the charge is more than the context takes.
builtin_context_footprint() {
  local out pid real charged i
  out=$(mktemp)
  env "LD_PRELOAD=$LIB" "TESSERA_GPU_MEM_LIMIT_MIB_0=4096" "$BIN/gpu_alloc_paths" context >"$out" 2>&1 &
  pid=$!
  for i in $(seq 1 50); do grep -q READY "$out" && break; sleep 0.1; done
  real=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
         awk -F', *' -v p="$pid" '$1 == p { print $2 }')
  wait "$pid"
  cat "$out"
  charged=$(sed -n 's/^context charged to the share: \([0-9]*\) MiB$/\1/p' "$out")
  rm -f "$out"
  echo "context: the driver took ${real:-?} MiB (nvidia-smi), the share was charged ${charged:-?} MiB"
  echo "RESULT {\"context_real_mib\": ${real:-null}, \"context_charged_mib\": ${charged:-null}}"
  [ -n "$real" ] && [ -n "$charged" ] || { echo "FAIL: no reading"; return 1; }
  if [ "$charged" -gt "$real" ]; then
    echo "FAIL: the share is charged more than the context takes: lower TESSERA_GPU_CONTEXT_MIB's default"
    return 1
  fi
}

# Builtin, reports only: whether NVML's per-process utilization tells two
# contexts' time-slices apart (what an arbiter could steer by where event
# timing over-charges): two saturating fixed-work processes, no library,
# and nvmlDeviceGetProcessUtilization's samples of the last second for each.
# Skips (77) without Python's pynvml.
builtin_nvml_process_util() {
  python3 -c 'import pynvml' 2>/dev/null || { echo "SKIP: no pynvml (nvidia-ml-py) for python3"; return 77; }
  local a b
  TESSERA_GPU_CHILD=1 "$BIN/gpu_compute_share" work 4 >/dev/null &
  a=$!
  TESSERA_GPU_CHILD=1 "$BIN/gpu_compute_share" work 4 >/dev/null &
  b=$!
  sleep 3
  python3 - "$a" "$b" <<'PY'
import sys, time, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
pids = [int(p) for p in sys.argv[1:]]
try:
    samples = pynvml.nvmlDeviceGetProcessUtilization(h, int((time.time() - 1.5) * 1e6))
except pynvml.NVMLError as e:
    print(f"nvmlDeviceGetProcessUtilization: {e}")
    print('RESULT {"supported": 0}')
    sys.exit(0)
util = {p: [s.smUtil for s in samples if s.pid == p] for p in pids}
for p in pids:
    v = util[p]
    print(f"pid {p}: {len(v)} samples, sm util {v}")
mean = [sum(util[p]) / len(util[p]) if util[p] else -1 for p in pids]
print(f'RESULT {{"supported": 1, "samples_a": {len(util[pids[0]])}, "samples_b": {len(util[pids[1]])}, '
      f'"sm_util_a": {mean[0]}, "sm_util_b": {mean[1]}}}')
PY
  wait "$a" "$b"
}

# Builtin: MPS as tessera-node sets it up, without tessera-node: a control
# daemon (`nvidia-cuda-mps-control -d`) with its pipe and log folders in a
# temporary folder and GPU 0 visible (as MpsSupervisor starts it; no GPU
# setting is changed), then gpu_arbiter_share mps (its clients get MpsEnv's
# variables). The daemon is always told to quit, on failure and on timeout.
builtin_mps() {
  local control dir uuid rc
  control=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null) || {
    echo "SKIP: nvidia-cuda-mps-control not found (PATH, /usr/local/nvidia/bin)"; return 77; }
  # The daemon starts nvidia-cuda-mps-server from its own folder or PATH.
  PATH="$(dirname "$control"):$PATH"
  dir=$(mktemp -d) || return 1
  export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  MPS_CONTROL=$control MPS_DIR=$dir
  # shellcheck disable=SC2317  # called by the traps
  mps_quit() {
    echo quit | timeout 10 "$MPS_CONTROL" >/dev/null 2>&1
    sleep 1
    echo "MPS control log (tail):"; tail -5 "$MPS_DIR/log/control.log" 2>/dev/null
    echo "MPS server log (tail):"; tail -5 "$MPS_DIR/log/server.log" 2>/dev/null
    rm -rf "$MPS_DIR"
  }
  trap mps_quit EXIT
  trap 'exit 1' TERM INT
  uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 2>/dev/null | tr -d ' ')
  if ! CUDA_VISIBLE_DEVICES=${uuid:-0} timeout 10 "$control" -d; then
    echo "FAIL: $control -d did not start"; return 1
  fi
  echo "MPS control daemon started ($control, GPU ${uuid:-0}, pipe $CUDA_MPS_PIPE_DIRECTORY)"
  # In the background so that a TERM runs the trap at once.
  "$BIN/gpu_arbiter_share" mps &
  wait $!
  rc=$?
  return $rc
}

# Builtin: tessera-node's MPS code (MpsSupervisor, MpsEnv) on this GPU, as
# gpu_mps_supervisor: starts the control daemon as `tessera-node --mps` does,
# serves a client with MpsEnv's variables (refused at its 1024 MiB), stops it.
# Skips when nvidia-cuda-mps-control or the program (no spdlog/fmt headers)
# is missing.
builtin_mps_supervisor() {
  local control uuid
  control=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null) || {
    echo "SKIP: nvidia-cuda-mps-control not found (PATH, /usr/local/nvidia/bin)"; return 77; }
  [ -x "$BIN/gpu_mps_supervisor" ] || {
    echo "SKIP: gpu_mps_supervisor not built (no spdlog/fmt headers; TESSERA_GPU_EXTRA_INCLUDE names a folder with them)"
    return 77; }
  PATH="$(dirname "$control"):$PATH"
  uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ') || return 1
  [ -n "$uuid" ] || { echo "FAIL: no uuid for GPU 0"; return 1; }
  # In the background so that a TERM reaches the program (it quits the daemon).
  "$BIN/gpu_mps_supervisor" "$uuid" "$control" "$BIN/gpu_arbiter_share" &
  wait $!
}

# Builtin: the /dev/shm MPS needs across containers (tessera-node
# --mps-shm, the chart's node.mps.shm), with mount namespaces standing in
# for containers. The control daemon runs in a namespace whose /dev/shm is
# a bind of folder S (as the chart's agent, with S mounted at its /dev/shm);
# then two clients with MpsEnv's 1024 MiB, each in a namespace of its own
# and both with the daemon's pipe folder: one with S at /dev/shm (as
# Allocate mounts it) must be served by MPS (refused within its pinned
# 1024 MiB); one with an empty folder of its own there (a container without
# that mount) is recorded, served or not, as the measure of whether the
# mount is needed. Needs root; the daemon is always told to quit.
builtin_mps_shm() {
  local control dir uuid rc text allocated refused
  control=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null) || {
    echo "SKIP: nvidia-cuda-mps-control not found (PATH, /usr/local/nvidia/bin)"; return 77; }
  [ "$(id -u)" = 0 ] && unshare --mount --propagation private -- sh -c 'mount --bind /tmp /dev/shm' 2>/dev/null || {
    echo "SKIP: needs root allowed to make mount namespaces and bind mounts (they stand in for containers)"; return 77; }
  # By process name (the kernel keeps 15 characters: both MPS programs'),
  # not command line: this function's own shell has the names in its.
  if pgrep -x nvidia-cuda-mps >/dev/null; then
    echo "SKIP: an MPS daemon is already running on this machine"; return 77
  fi
  PATH="$(dirname "$control"):$PATH"
  dir=$(mktemp -d) || return 1
  mkdir -p "$dir/pipe" "$dir/log" "$dir/shm" "$dir/own-shm"
  export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
  MPS_CONTROL=$control MPS_DIR=$dir
  # shellcheck disable=SC2317  # called by the traps
  mps_quit() {
    echo quit | timeout 10 unshare --mount --propagation private -- \
      sh -c 'mount --bind "$0" /dev/shm && exec "$@"' "$MPS_DIR/shm" "$MPS_CONTROL" >/dev/null 2>&1
    sleep 1
    echo "MPS control log (tail):"; tail -5 "$MPS_DIR/log/control.log" 2>/dev/null
    echo "MPS server log (tail):"; tail -8 "$MPS_DIR/log/server.log" 2>/dev/null
    echo "files the server left in S: $(ls "$MPS_DIR/shm" 2>/dev/null | wc -l)"
    rm -rf "$MPS_DIR"
  }
  trap mps_quit EXIT
  trap 'exit 1' TERM INT
  uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 2>/dev/null | tr -d ' ')
  # The daemon, and the servers it starts, keep the namespace (and S as /dev/shm).
  if ! CUDA_VISIBLE_DEVICES=${uuid:-0} timeout 10 unshare --mount --propagation private -- \
       sh -c 'mount --bind "$0" /dev/shm && exec "$@"' "$dir/shm" "$control" -d; then
    echo "FAIL: $control -d did not start in a namespace with S at /dev/shm"; return 1
  fi
  echo "MPS control daemon started with S=$dir/shm as its /dev/shm (GPU ${uuid:-0})"
  # client NAME FOLDER: gpu_arbiter_share mps_mem with FOLDER at /dev/shm;
  # sets rc, allocated, refused.
  client() {
    timeout 30 env TESSERA_GPU_CHILD=1 CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M \
      unshare --mount --propagation private -- sh -c 'mount --bind "$0" /dev/shm && exec "$@"' \
      "$2" "$BIN/gpu_arbiter_share" mps_mem >"$MPS_DIR/$1.out" 2>&1
    rc=$?
    text=$(cat "$MPS_DIR/$1.out")
    allocated=$(echo "$text" | sed -n 's/^allocated_mib //p'); allocated=${allocated:-null}
    refused=$(echo "$text" | sed -n 's/^refused //p'); refused=${refused:-0}
    echo "$1 (/dev/shm = $2): exit $rc, allocated ${allocated} MiB, refused $refused"
    echo "$text" | sed "s/^/  $1: /" | tail -4
  }
  local shared_ok=0 shared_mib own_rc own_mib own_served=0
  client shared "$dir/shm"
  shared_mib=$allocated
  if [ "$rc" = 0 ] && [ "$refused" = 1 ] && [ "$allocated" != null ] && [ "$allocated" -ge 256 ] && [ "$allocated" -le 1024 ]; then
    shared_ok=1
  fi
  client own "$dir/own-shm"
  own_rc=$rc own_mib=$allocated
  if [ "$rc" = 0 ] && [ "$refused" = 1 ] && [ "$allocated" != null ] && [ "$allocated" -le 1024 ]; then own_served=1; fi
  echo "RESULT {\"shared_served\": $shared_ok, \"shared_allocated_mib\": $shared_mib, \"own_shm_exit\": $own_rc, \"own_shm_allocated_mib\": $own_mib, \"own_shm_served\": $own_served}"
  [ "$shared_ok" = 1 ] || { echo "FAIL: a client with the daemon's /dev/shm was not held to its pinned 1024 MiB"; return 1; }
  return 0
}

# Builtin: a container of a DRA claim, as tessera-node's CDI spec sets it up
# (claim_env.txt, which dra_unit_test keeps equal to CdiSpecFor's variables):
# GPU 0's uuid in place of the file's zeros, folders of the test's own as the
# region and the busy boards,
# the library preloaded; gpu_alloc_paths linear must be refused at the
# claim's 1024 MiB and recover, as for the device-plugin path's variables.
builtin_claim_env() {
  local uuid line rc
  local -a vars=()
  uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ') || return 1
  [ -n "$uuid" ] || { echo "FAIL: no uuid for GPU 0"; return 1; }
  mkdir -p "$CLAIM_DIR/region" "$CLAIM_DIR/boards" || return 1
  while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    line=${line//GPU-00000000-0000-0000-0000-000000000000/$uuid}
    line=${line//\/var\/run\/tessera\/region/$CLAIM_DIR\/region}
    line=${line//\/var\/run\/tessera\/boards/$CLAIM_DIR\/boards}
    vars+=("$line")
  done <"$CLAIM_ENV_FILE"
  echo "the claim's environment: ${vars[*]}"
  env "${vars[@]}" "LD_PRELOAD=$LIB" "$BIN/gpu_alloc_paths" linear
  rc=$?
  echo "afterwards, the claim's region folder: $(ls "$CLAIM_DIR/region" | tr '\n' ' '); boards: $(ls "$CLAIM_DIR/boards" | tr '\n' ' ')"
  return $rc
}

# Prints "NAME|TIMEOUT|ENV|COMMAND" lines, checking each has four fields.
# The test list's lines, checked; with `all`, the diagnostic variants after them.
test_lines() {
  local line n=0 list=$TESTS
  [ "${1:-}" = all ] && list=$TESTS$'\n'$DIAG_TESTS
  while IFS= read -r line; do
    [ -z "$line" ] && continue
    n=$((n + 1))
    [ "$(echo "$line" | awk -F'|' '{ print NF }')" = 4 ] || die "test list line $n: not 4 fields: $line"
    echo "$line"
  done <<<"$list"
}

# Where nvcc is: PATH, CUDA_HOME, /usr/local/cuda*, /opt/cuda, else the
# wheel-built one scripts/setup.sh unpacks into third_party (compiles and
# links the GPU programs for --check; nothing built with it runs there).
find_nvcc() {
  local c
  for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" \
           /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc /opt/cuda/bin/nvcc \
           "$ROOT/third_party/cuda/nvcc-13.0/bin/nvcc"; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# ---------------------------------------------------------------- --check
check() {
  local failures=0 tmp name timeout envs cmd prog src first
  tmp=$(mktemp -d) || die "mktemp failed"
  CHECK_TMP=$tmp
  trap 'rm -rf "$CHECK_TMP"' EXIT
  local lines names
  lines=$(test_lines all) || exit 2
  names=$(echo "$lines" | cut -d'|' -f1 | sort)
  if [ -n "$(echo "$names" | uniq -d)" ]; then
    echo "FAIL: duplicate test names: $(echo "$names" | uniq -d | tr '\n' ' ')"
    failures=$((failures + 1))
  fi
  while IFS='|' read -r name timeout envs cmd; do
    case "$timeout" in ''|*[!0-9]*) echo "FAIL: $name: timeout '$timeout'"; failures=$((failures + 1)) ;; esac
    # shellcheck disable=SC2086
    set -- $cmd
    prog=$1
    first=${2:-}
    case "$prog" in
      builtin:*)
        declare -F "builtin_${prog#builtin:}" >/dev/null || { echo "FAIL: $name: no function builtin_${prog#builtin:}"; failures=$((failures + 1)); }
        continue ;;
      skip:*)
        [ -n "${prog#skip:}" ] || { echo "FAIL: $name: a skip without a reason"; failures=$((failures + 1)); }
        continue ;;
      @BIN@/*)
        prog=${prog#@BIN@/}
        # The program is a target of tests/gpu/CMakeLists.txt with its sources here.
        src=$(sed -n "s/^add_executable(${prog} \([^ )]*\).*/\1/p" "$HERE/CMakeLists.txt")
        if [ -z "$src" ] || [ ! -f "$HERE/$src" ]; then
          echo "FAIL: $name: no add_executable($prog ...) with a source in tests/gpu"
          failures=$((failures + 1)); continue
        fi ;;
      @PY@)
        src=${2#@SRC@/}
        first=${3:-}
        [ -f "$HERE/$src" ] || { echo "FAIL: $name: no tests/gpu/$src"; failures=$((failures + 1)); continue; } ;;
      *) echo "FAIL: $name: unknown command $cmd"; failures=$((failures + 1)); continue ;;
    esac
    # The mode it is given is one the program knows (a quoted string in it).
    case "$first" in
      ''|@*|*[!a-z_]*) ;;
      *) grep -q "\"$first\"" "$HERE/$src" || { echo "FAIL: $name: $src knows no mode \"$first\""; failures=$((failures + 1)); } ;;
    esac
  done <<<"$lines"
  # The MPS test gives its clients the variables tessera-node's MpsEnv sets.
  local v
  for v in CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; do
    if ! grep -q "\"$v\"" "$ROOT/src/node/mps.cc" || ! grep -q "$v" "$HERE/arbiter_share.cu" "$HERE/run.sh"; then
      echo "FAIL: $v is not set both by MpsEnv (src/node/mps.cc) and by the mps test"; failures=$((failures + 1))
    fi
  done
  [ -f "$ROOT/src/cuda/hook_list.inc" ] || { echo "FAIL: no src/cuda/hook_list.inc"; failures=$((failures + 1)); }
  grep -q '^TESSERA_GPU_MEM_LIMIT_MIB_0=' "$HERE/claim_env.txt" 2>/dev/null ||
    { echo "FAIL: tests/gpu/claim_env.txt has no TESSERA_GPU_MEM_LIMIT_MIB_0 (the claim_env test)"; failures=$((failures + 1)); }
  bash -n "$HERE/run.sh" || { echo "FAIL: bash -n run.sh"; failures=$((failures + 1)); }
  if command -v shellcheck >/dev/null; then
    if shellcheck "$HERE/run.sh"; then
      echo "shellcheck: clean"
    else
      echo "FAIL: shellcheck run.sh"; failures=$((failures + 1))
    fi
  fi
  echo "test list: $(echo "$lines" | wc -l) tests, $(echo "$lines" | grep -c '|skip:') recorded as skips"

  local py
  for py in "$HERE"/*.py; do
    if PYTHONPYCACHEPREFIX="$tmp/pycache" python3 -m py_compile "$py"; then
      echo "python compiles: ${py#"$ROOT"/}"
    else
      echo "FAIL: $py does not compile"; failures=$((failures + 1))
    fi
  done

  # The report from a one-test manifest parses back.
  mkdir -p "$tmp/report"
  printf 'RESULT {"x": 1.5}\nRESULT {"y": 2}\n' >"$tmp/report/out"
  printf 'probe|pass||0.1|%s\n' "$tmp/report/out" >"$tmp/report/manifest"
  if PYTHONPYCACHEPREFIX="$tmp/pycache" python3 "$HERE/report.py" "$tmp/report/manifest" "$tmp/report" &&
     python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))["tests"][0]; sys.exit(t["numbers"] != {"x": 1.5, "y": 2})' \
       "$tmp/report/results.json" && grep -q '^probe  *pass' "$tmp/report/summary.txt"; then
    echo "report.py writes results.json and summary.txt"
  else
    echo "FAIL: report.py"; failures=$((failures + 1))
  fi

  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  if cmake -S "$ROOT/src/cuda" -B "$tmp/build" "${gen[@]}" >"$tmp/configure.log" 2>&1; then
    echo "library configures standalone: cmake -S src/cuda"
  else
    echo "FAIL: cmake -S src/cuda does not configure:"; tail -20 "$tmp/configure.log"
    failures=$((failures + 1))
  fi

  local nvcc launcher=()
  # The build is from scratch in a temporary folder each time: ccache, where
  # there is one, keeps the next --check from compiling it all again.
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  if nvcc=$(find_nvcc) && [ "${TESSERA_GPU_CHECK_NVCC:-1}" = 1 ]; then
    if CCACHE_BASEDIR="$tmp" CCACHE_NOHASHDIR=1 cmake -S "$ROOT/src/cuda" -B "$tmp/build-gpu" "${gen[@]}" \
         -DTESSERA_GPU_TESTS=ON "${launcher[@]}" \
         -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 >"$tmp/gpu.log" 2>&1 &&
       CCACHE_BASEDIR="$tmp" CCACHE_NOHASHDIR=1 cmake --build "$tmp/build-gpu" -j "${TESSERA_CHECK_JOBS:-2}" >>"$tmp/gpu.log" 2>&1; then
      echo "GPU programs build with $nvcc"
    else
      echo "FAIL: the GPU programs do not build with $nvcc:"; tail -30 "$tmp/gpu.log"
      failures=$((failures + 1))
    fi
  else
    echo "no nvcc: GPU programs not compiled"
  fi
  if [ "$failures" -eq 0 ]; then
    echo "run.sh --check: ok"
    return 0
  fi
  echo "run.sh --check: $failures problem(s)"
  return 1
}

# ---------------------------------------------------------------- the run
# Fills BUILD, LIB, BIN; writes build.txt. Returns non-zero when the library
# did not build (test programs that failed to build fail one by one).
build() {
  local nvcc cuda_home inc arch gen=() jobs
  nvcc=$(find_nvcc) || { echo "no nvcc found (PATH, CUDA_HOME, /usr/local/cuda*)"; return 1; }
  nvcc=$(readlink -f "$nvcc")
  cuda_home=$(cd "$(dirname "$nvcc")/.." && pwd)
  export PATH="$cuda_home/bin:$PATH" CUDACXX="$nvcc"
  # The toolkit's headers; nvml.h beside cuda.h, else from the pinned copy.
  inc="$cuda_home/include"
  if [ ! -f "$inc/nvml.h" ]; then
    local other
    for other in "$cuda_home"/targets/*/include "$ROOT/third_party/cuda/12.9/include" \
                 $(find /usr /opt -name nvml.h -path '*include*' 2>/dev/null | head -1 | xargs -r dirname); do
      if [ -f "$other/nvml.h" ]; then
        mkdir -p "$BUILD/cuda-include"
        ln -sf "$inc"/* "$BUILD/cuda-include/"
        ln -sf "$other/nvml.h" "$BUILD/cuda-include/nvml.h"
        inc="$BUILD/cuda-include"
        echo "nvml.h taken from $other"
        break
      fi
    done
  fi
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | tr -d ' .\r')
  case "$arch" in ''|*[!0-9]*) arch=native ;; esac
  command -v ninja >/dev/null && gen=(-G Ninja)
  jobs=$(nproc 2>/dev/null || echo 4)
  echo "nvcc $nvcc, headers $inc, CUDA architecture $arch"
  # nvcc refuses host compilers newer than it knows unless told.
  export CUDAFLAGS="${CUDAFLAGS:-} -allow-unsupported-compiler"
  if ! cmake -S "$ROOT/src/cuda" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DTESSERA_GPU_TESTS=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
       -DCUDAToolkit_ROOT="$cuda_home" -DTESSERA_CUDA_INCLUDE_DIR="$inc" \
       -DTESSERA_GPU_EXTRA_INCLUDE="${TESSERA_GPU_EXTRA_INCLUDE:-}"; then
    if [ "$arch" != native ]; then return 1; fi
    echo "configure with architecture native failed; again with 90"
    cmake -S "$ROOT/src/cuda" -B "$BUILD" -DCMAKE_CUDA_ARCHITECTURES=90 || return 1
  fi
  # Keep going past a test program that does not compile: its tests fail alone.
  local keep=(-k 0)
  [ ${#gen[@]} -eq 0 ] && keep=(-k)
  cmake --build "$BUILD" -j "$jobs" -- "${keep[@]}"
  LIB=$(find "$BUILD" -maxdepth 2 -name libtessera-cuda.so | head -1)
  BIN="$BUILD/gpu"
  [ -n "$LIB" ]
}

versions() {
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || echo unknown)
  DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null || echo unknown)
  CUDA=$( (nvcc --version 2>/dev/null | sed -n 's/.*release \([^,]*\),.*/\1/p') || true)
  TORCH=$(timeout 60 python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "not installed")
  GLIBC=$(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -1)
}

# Runs one test; appends "name|status|reason|seconds|output file" to MANIFEST.
run_one() {
  local name=$1 timeout=$2 envs=$3 cmd=$4
  local out="$WORK/out.$name" dir="$WORK/tmp.$name" start rc status reason seconds left
  mkdir -p "$dir"
  : >"$out"
  subst() { local s=$1; s=${s//@LIB@/$LIB}; s=${s//@BIN@/$BIN}; s=${s//@SRC@/$HERE}
            s=${s//@ROOT@/$ROOT}; s=${s//@PY@/python3}; s=${s//@TMP@/$dir}; echo "$s"; }
  envs=$(subst "$envs")
  cmd=$(subst "$cmd")
  start=$(now)
  left=$(awk -v s="$RUN_START" -v n="$(now)" -v b="$BUDGET_S" 'BEGIN { printf "%d", b - (n - s) }')
  if [[ $cmd == skip:* ]]; then
    status=skip; reason=${cmd#skip:}; rc=77
    echo "SKIP: $reason" >"$out"
  elif [ "$left" -lt 5 ]; then
    status=fail; reason="not run: the run's ${BUDGET_S} s budget was spent"; rc=-1
  elif [ "$timeout" -gt "$left" ]; then
    timeout=$left
  fi
  if [ -z "${status:-}" ]; then
    local prog=${cmd%% *}
    if [[ $cmd != builtin:* ]] && [[ $prog == /* ]] && [ ! -x "$prog" ]; then
      status=fail; reason="not built (see build.txt)"; rc=-1
    elif [[ $cmd == builtin:* ]]; then
      # shellcheck disable=SC2086,SC2163  # each word of $envs is a KEY=VALUE to export
      (export CUDA_DEVICE_ORDER=PCI_BUS_ID $envs; timeout -k 5 "$timeout" bash -c \
        "$(declare -f "builtin_${cmd#builtin:}"); LIB='$LIB' BIN='$BIN' builtin_${cmd#builtin:}") >"$out" 2>&1
      rc=$?
    else
      # shellcheck disable=SC2086
      (cd "$dir" && timeout -k 5 "$timeout" \
        env CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1 $envs $cmd) >"$out" 2>&1 </dev/null
      rc=$?
    fi
  fi
  seconds=$(elapsed "$start")
  if [ -z "${status:-}" ]; then
    case $rc in
      0) status=pass; reason="" ;;
      77) status=skip; reason=$(sed -n 's/^SKIP: //p' "$out" | head -1)
          [ -n "$reason" ] || { status=fail; reason="skipped without saying why"; } ;;
      124|137) status=fail; reason="timed out after ${timeout} s" ;;
      *) status=fail
         reason=$(grep -m1 -E '^(FAIL|HANG|NOT ROUTED)' "$out" || true)
         [ -n "$reason" ] || reason=$(grep -v '^RESULT ' "$out" | tail -1)
         reason="exit $rc: ${reason:0:200}" ;;
    esac
  fi
  reason=${reason//|/\/}
  printf '%s|%s|%s|%s|%s\n' "$name" "$status" "$reason" "$seconds" "$out" >>"$MANIFEST"
  {
    echo "===== $name: $status (${seconds} s) ${reason}"
    echo "env: $envs"
    echo "cmd: $cmd"
    cat "$out"
  } >>"$OUTDIR/logs.txt"
  printf '%-30s %-5s %7s s  %s\n' "$name" "$status" "$seconds" "$reason"
  unset status
}

# results.json and summary.txt from MANIFEST.
report() {
  if command -v python3 >/dev/null &&
     GPU=$GPU DRIVER=$DRIVER CUDA=$CUDA TORCH=$TORCH GLIBC=$GLIBC TOTAL_S=$(elapsed "$RUN_START") \
     ONLY=${TESSERA_GPU_ONLY:-} \
       python3 "$HERE/report.py" "$MANIFEST" "$OUTDIR" && [ -s "$OUTDIR/results.json" ]; then
    return
  fi
  # No python (or it failed): plain JSON, each test's last RESULT object as its numbers.
  local name status reason seconds out nums first=1 pass=0 fail=0 skip=0
  {
    printf '{"gpu": "%s", "driver": "%s", "cuda": "%s", "torch": "%s", "glibc": "%s", "date": "%s", "tests": [\n' \
      "$GPU" "$DRIVER" "$CUDA" "$TORCH" "$GLIBC" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    while IFS='|' read -r name status reason seconds out; do
      nums=$(sed -n 's/^RESULT //p' "$out" 2>/dev/null | tail -1)
      [ $first = 1 ] || printf ',\n'
      first=0
      printf '{"name": "%s", "status": "%s", "reason": "%s", "seconds": %s, "numbers": %s}' \
        "$name" "$status" "${reason//\"/\'}" "$seconds" "${nums:-{\}}"
    done <"$MANIFEST"
    printf '\n]}\n'
  } >"$OUTDIR/results.json"
  {
    echo "Tessera GPU run, $(date -u), GPU $GPU, driver $DRIVER, CUDA $CUDA, PyTorch $TORCH, $GLIBC"
    while IFS='|' read -r name status reason seconds out; do
      printf '%-30s %-6s %6s  %s\n' "$name" "$status" "$seconds" "$reason"
      case $status in pass) pass=$((pass + 1)) ;; fail) fail=$((fail + 1)) ;; skip) skip=$((skip + 1)) ;; esac
    done <"$MANIFEST"
    echo "$pass passed, $fail failed, $skip skipped (each skip's reason is in its line)"
  } >"$OUTDIR/summary.txt"
}

main_run() {
  OUTDIR=$1
  mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
  OUTDIR=$(cd "$OUTDIR" && pwd)
  rm -f "$OUTDIR/summary.txt" "$OUTDIR/results.json" "$OUTDIR/logs.txt" "$OUTDIR/build.txt"
  RUN_START=$(now)
  WORK=$(mktemp -d) || die "mktemp failed"
  BUILD=${TESSERA_GPU_BUILD_DIR:-$WORK/build}
  MANIFEST=$WORK/manifest
  : >"$MANIFEST"
  local lines
  lines=$(test_lines) || exit 2
  if [ -n "${TESSERA_GPU_ONLY:-}" ]; then
    lines=$(test_lines all) || exit 2
    lines=$(echo "$lines" | awk -F'|' -v re="^(${TESSERA_GPU_ONLY})\$" '$1 ~ re')
    [ -n "$lines" ] || die "TESSERA_GPU_ONLY='$TESSERA_GPU_ONLY' selects no test"
    echo "only the tests TESSERA_GPU_ONLY selects: $(echo "$lines" | cut -d'|' -f1 | tr '\n' ' ')"
  fi
  LIB="" BIN=""
  echo "building into $BUILD (log: $OUTDIR/build.txt)"
  local built=1
  if ! build >"$OUTDIR/build.txt" 2>&1; then
    built=0
    echo "the library did not build; every test fails (tail of build.txt):"
    tail -20 "$OUTDIR/build.txt"
  fi
  echo "built in $(elapsed "$RUN_START") s"
  versions
  echo "GPU $GPU, driver $DRIVER, CUDA $CUDA, PyTorch $TORCH, $GLIBC"
  nvidia-smi >>"$OUTDIR/logs.txt" 2>&1
  local name timeout envs cmd
  while IFS='|' read -r name timeout envs cmd; do
    if [ "$built" = 0 ] && [[ $cmd != skip:* ]]; then
      printf '%s|fail|the library did not build (see build.txt)|0|/dev/null\n' "$name" >>"$MANIFEST"
      continue
    fi
    run_one "$name" "$timeout" "$envs" "$cmd"
  done <<<"$lines"
  report
  cat "$OUTDIR/summary.txt"
  local rc=0
  if grep -q '|fail|' "$MANIFEST" || [ "$built" = 0 ]; then rc=1; fi
  [ -n "${TESSERA_GPU_BUILD_DIR:-}" ] || rm -rf "$WORK"
  return $rc
}

case "${1:-}" in
  --check) check ;;
  ""|-h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d'; exit 2 ;;
  *) main_run "$1" ;;
esac
