#!/usr/bin/env bash
# e2e_real_node_test: one real node (tools/realnode: its own netns, mount
# namespace, containerd and kubelet) joined to the ctest `cluster` fixture.
#
#  1. realnode.sh up: the Node registers and turns Ready (the fixture's
#     kube-controller-manager lifts the not-ready taint).
#  2. A busybox pod runs to completion on it; its log is read back through
#     the API server (apiserver -> kubelet on the node's InternalIP).
#  3. A GPU pod created before the node has a node agent waits (tessera-
#     scheduler turns it away, not kube-scheduler). tessera-node, simulated
#     GPU file, then starts inside the node's mount namespace and registers
#     with the REAL kubelet's device manager
#     (/var/lib/kubelet/device-plugins/kubelet.sock there); the Node's
#     capacity shows tessera.io/gpu slots, and the waiting pod runs without
#     waiting for kube-scheduler's periodic retry (docs/scheduler-extender.md,
#     "A pod that arrives before the slots").
#  4. A pod asking for tessera.io/gpu + gpu-mem + gpu-core goes kube-scheduler
#     -> tessera-scheduler (extender, bind with the assignment) -> kubelet
#     Allocate; inside the running container (kubectl exec) the limits are in
#     the environment, /etc/ld.so.preload is mounted read-only and names the
#     library, which is mounted too.
#  5. A pod whose spec sets TESSERA_GPU_MEM_LIMIT_MIB_0 itself gets no share:
#     the real kubelet fails it with tessera-node's reason, and the pod has
#     the Event TesseraAssignmentRefused (see the finding below).
#  6. realnode.sh down leaves nothing: no netns, veth, cgroup, process or
#     mount of the node.
#
# Finding behind step 5, measured here on 2026-11-26 with kubelet 1.34.4 and
# containerd 1.6.20 before tessera-node refused such pods: the kubelet hands
# the runtime the device plugin's envs first and the pod spec's after them;
# containerd builds the OCI process env with a later duplicate replacing the
# earlier one in place, so the process sees ONE TESSERA_GPU_MEM_LIMIT_MIB_0,
# in Allocate's place among the TESSERA_* variables but with the pod spec's
# value (999999), while TESSERA_GPU_MEM_FRACTION keeps Allocate's. Which
# value glibc's getenv returns first is therefore moot: there is one. The
# interception library takes a GPU's limit from the region when the region
# already has one, else from this variable, and tessera-node does not write
# limits into the region: a pod spec could raise its own memory limit. So
# tessera-node now refuses, at Allocate, any pod whose spec sets a variable
# Allocate gives (src/node/handout.h, IsReservedVariable).
set -euo pipefail
: "${TESSERA_TEST_KUBECONFIG:?}" "${TESSERA_TEST_CLUSTER_DIR:?}" "${TESSERA_BIN_DIR:?}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$TESSERA_TEST_CLUSTER_DIR"
# shellcheck disable=SC1091
source "$dir/cluster.env"
export KUBECONFIG="$TESSERA_TEST_KUBECONFIG"
kubectl="$TESSERA_CONTROLPLANE_BIN/kubectl"
realnode="$src/tools/realnode/realnode.sh"
node=rn-e2e
ns=real-node-e2e
work="$dir/real-node-test"
t_start=$SECONDS
pids=()

step() { echo; echo "=== [$((SECONDS - t_start)) s] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) == 0 ]] || { echo "SKIP: a real node needs root (network and mount namespaces)"; exit 77; }
for t in "$TESSERA_CONTROLPLANE_BIN/kubelet" "$TESSERA_BIN_DIR/tessera-node" "$TESSERA_BIN_DIR/tessera-scheduler"; do
  [[ -x "$t" ]] || fail "$t missing (scripts/setup.sh builds the kubelet; the build builds the rest)"
done

# SIGTERM, SIGKILL after 5 s, to the processes this test started
# (tessera-scheduler waits up to its 5 s keep-alive timeout for kube-scheduler's
# idle connection before it exits).
stop_children() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2> /dev/null || true; wait "$p" 2> /dev/null || true; done
}

cleanup() {
  local rc=$?
  if ((rc != 0)); then
    for f in "$work"/*.log "$dir/nodes/$node/logs/kubelet.log" "$dir/nodes/$node/logs/containerd.log"; do
      [[ -f "$f" ]] && { echo "--- last lines of $f"; tail -n 30 "$f"; }
    done
    "$kubectl" get pods -A -o wide 2>&1 | head -20
  fi
  "$kubectl" delete namespace "$ns" --ignore-not-found --wait=false > /dev/null 2>&1 || true
  stop_children
  rm -f "$dir"/pids/*-realnode-test.pid
  "$realnode" down "$dir" "$node" || rc=1
  exit $rc
}
trap cleanup EXIT

rm -rf "$work"; mkdir -p "$work"
"$kubectl" delete namespace "$ns" --ignore-not-found --wait=true > /dev/null
"$kubectl" create namespace "$ns" > /dev/null
before_netns="$(ip netns list | sort)"
before_mounts="$(sort /proc/self/mounts)"

step "1. realnode.sh up $node"
t0=$SECONDS
"$realnode" up "$dir" "$node"
echo "node up to Ready: $((SECONDS - t0)) s"
eval "$("$realnode" info "$dir" "$node")"   # slot, netns, node_ip, node_dir, ...
[[ "$("$kubectl" get node "$node" -o 'jsonpath={.status.addresses[?(@.type=="InternalIP")].address}')" == "$node_ip" ]] \
  || fail "InternalIP is not $node_ip"

step "2. a busybox pod to completion, its log read back"
t0=$SECONDS
"$kubectl" -n "$ns" apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  nodeSelector: {kubernetes.io/hostname: $node}
  containers:
  - {name: hello, image: tessera.local/busybox:1, imagePullPolicy: Never,
     command: [sh, -c, 'echo "hello from \$(hostname) on \$(cat /proc/sys/kernel/hostname)"']}
EOF
"$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/hello --timeout=60s > /dev/null \
  || fail "pod hello did not succeed: $("$kubectl" -n "$ns" get pod hello -o jsonpath='{.status}')"
log="$("$kubectl" -n "$ns" logs hello)"
echo "log: $log"
[[ "$log" == "hello from hello on hello" ]] || fail "unexpected log of pod hello"
echo "pod created to Succeeded and log read: $((SECONDS - t0)) s"

share_pod() {  # share_pod NAME [ENV_NAME ENV_VALUE]: a pod asking for 4096 MiB and 30 % of one GPU
  local env=""
  (($# == 3)) && env="env: [{name: $2, value: \"$3\"}]"
  "$kubectl" -n "$ns" apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 0
  nodeSelector: {kubernetes.io/hostname: $node}
  containers:
  - name: app
    image: tessera.local/busybox:1
    imagePullPolicy: Never
    command: [sleep, "3600"]
    $env
    resources:
      limits: {tessera.io/gpu: 1, tessera.io/gpu-mem: 4096, tessera.io/gpu-core: 30}
EOF
}
step "3. a GPU pod waits for a node agent; tessera-node registers with the kubelet; the pod runs"
setsid "$TESSERA_BIN_DIR/tessera-scheduler" --kubeconfig "$KUBECONFIG" --listen-address 127.0.0.1 \
  --port "$TESSERA_EXTENDER_PORT" --log-level debug > "$work/tessera-scheduler.log" 2>&1 < /dev/null &
pids+=($!); echo $! > "$dir/pids/tessera-scheduler-realnode-test.pid"
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$TESSERA_EXTENDER_PORT/readyz" > /dev/null && break; sleep 0.2; done
reasons() {  # POD: its FailedScheduling messages, one a line
  "$kubectl" -n "$ns" get events --field-selector "involvedObject.name=$1,reason=FailedScheduling" \
    -o 'jsonpath={range .items[*]}{.message}{"\n"}{end}'
}
share_pod early
for _ in $(seq 150); do [[ -n "$(reasons early)" ]] && break; sleep 0.2; done
[[ -n "$(reasons early)" ]] || fail "pod early was not turned away before the node had a node agent"
echo "early waits: $(reasons early | head -1)"
# The library and the preload file are host files the kubelet mounts into
# containers, as the chart's DaemonSet installs them. busybox is static and
# never loads the library: only the mounts are checked here.
lib="${TESSERA_TEST_PRELOAD:-}"
if [[ -z "$lib" ]]; then lib="$work/libtessera-cuda.so"; echo "placeholder" > "$lib"; fi
echo "/usr/local/lib/tessera/libtessera-cuda.so" > "$work/ld.so.preload"
cat > "$work/gpus.yaml" <<'EOF'
gpus:
- {uuid: GPU-realnode-0, model: A100, memMiB: 40960, sms: 108, numa: 0, healthy: true}
EOF
t0=$SECONDS
setsid "$realnode" enter "$dir" "$node" "$TESSERA_BIN_DIR/tessera-node" --node-name "$node" \
  --kubeconfig "$KUBECONFIG" --simulated-gpus "$work/gpus.yaml" --slots-per-gpu 4 \
  --library-host-path "$lib" --preload-host-path "$work/ld.so.preload" --region-root "$work/regions" \
  --metrics-bind-address "" --resync-ms 500 --log-level debug > "$work/tessera-node.log" 2>&1 < /dev/null &
pids+=($!); echo $! > "$dir/pids/tessera-node-realnode-test.pid"
for _ in $(seq 150); do
  gpu="$("$kubectl" get node "$node" -o 'jsonpath={.status.allocatable.tessera\.io/gpu}')"
  [[ "$gpu" == 4 ]] && break
  sleep 0.2
done
[[ "$gpu" == 4 ]] || fail "the kubelet's Node shows tessera.io/gpu '$gpu', not the 4 slots tessera-node registered"
grep -q "tessera.io/gpu" "$dir/nodes/$node/logs/kubelet.log" || fail "the kubelet logged no tessera.io/gpu registration"
echo "kubelet lists tessera.io/gpu: $gpu ($((SECONDS - t0)) s after tessera-node started)"
"$kubectl" -n "$ns" wait --for=condition=Ready pod/early --timeout=90s > /dev/null \
  || fail "pod early not Ready: $("$kubectl" -n "$ns" get pod early -o jsonpath='{.status}'); turned away: $(reasons early)"
echo "early Ready $((SECONDS - t0)) s after tessera-node started; turned away before:"
reasons early | sort | uniq -c
! reasons early | grep -q "Insufficient tessera.io/gpu" || fail "kube-scheduler itself turned early away for want of slots"
"$kubectl" -n "$ns" delete pod early --wait=true --timeout=60s > /dev/null

step "4. a sharing pod through the extender and the kubelet's Allocate"
t0=$SECONDS
share_pod share
share_pod override TESSERA_GPU_MEM_LIMIT_MIB_0 999999
"$kubectl" -n "$ns" wait --for=condition=Ready pod/share --timeout=90s > /dev/null \
  || fail "pod share not Ready: $("$kubectl" -n "$ns" get pod share -o jsonpath='{.status}')"
echo "sharing pod created to Ready: $((SECONDS - t0)) s"
assignment="$("$kubectl" -n "$ns" get pod share -o 'jsonpath={.metadata.annotations.tessera\.io/assignment}')"
[[ -n "$assignment" ]] || fail "pod share has no tessera.io/assignment"
echo "assignment: $assignment"
env_of() { "$kubectl" -n "$ns" exec "$1" -- env; }
share_env="$(env_of share)"
echo "$share_env" | grep -E '^(TESSERA_|NVIDIA_)' | sort
echo "$share_env" | grep -qx 'TESSERA_GPU_MEM_LIMIT_MIB_0=4096' || fail "TESSERA_GPU_MEM_LIMIT_MIB_0 is not 4096 in the container"
echo "$share_env" | grep -qx 'TESSERA_GPU_CORE_PERCENT_0=30' || fail "TESSERA_GPU_CORE_PERCENT_0 is not 30 in the container"
echo "$share_env" | grep -qx 'NVIDIA_VISIBLE_DEVICES=GPU-realnode-0' || fail "NVIDIA_VISIBLE_DEVICES is not GPU-realnode-0"
preload="$("$kubectl" -n "$ns" exec share -- cat /etc/ld.so.preload)"
[[ "$preload" == "/usr/local/lib/tessera/libtessera-cuda.so" ]] || fail "/etc/ld.so.preload reads '$preload'"
mounts="$("$kubectl" -n "$ns" exec share -- cat /proc/self/mounts)"
echo "$mounts" | grep -E ' /etc/ld.so.preload | /usr/local/lib/tessera/libtessera-cuda.so | /var/run/tessera/region '
echo "$mounts" | grep -qE ' /etc/ld.so.preload [^ ]+ ro[, ]' || fail "/etc/ld.so.preload is not mounted read-only"
echo "$mounts" | grep -qE ' /usr/local/lib/tessera/libtessera-cuda.so [^ ]+ ro[, ]' || fail "the library is not mounted read-only"
echo "$mounts" | grep -qE ' /var/run/tessera/boards [^ ]+ rw[, ]' || fail "the busy boards' folder is not mounted read-write"
"$kubectl" -n "$ns" exec share -- test -f /var/run/tessera/boards/GPU-realnode-0.board || fail "tessera-node made no busy board for GPU-realnode-0"
"$kubectl" -n "$ns" exec share -- test -s /usr/local/lib/tessera/libtessera-cuda.so || fail "the library is empty in the container"
[[ -n "$("$kubectl" -n "$ns" get pod share -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')" ]] \
  || fail "tessera-node did not annotate pod share as allocated"

step "5. a pod spec that sets TESSERA_GPU_MEM_LIMIT_MIB_0=999999 itself gets no share"
for _ in $(seq 300); do
  [[ "$("$kubectl" -n "$ns" get pod override -o jsonpath='{.status.phase}')" == Failed ]] && break
  sleep 0.2
done
status="$("$kubectl" -n "$ns" get pod override -o jsonpath='{.status.phase} {.status.reason}: {.status.message}')"
echo "pod override: $status"
[[ "$status" == "Failed "* && "$status" == *'container "app" sets TESSERA_GPU_MEM_LIMIT_MIB_0 in its spec'* ]] \
  || fail "pod override was not failed with tessera-node's reason: $status"
for _ in $(seq 100); do
  events="$("$kubectl" -n "$ns" get events --field-selector involvedObject.name=override,reason=TesseraAssignmentRefused -o name)"
  [[ -n "$events" ]] && break
  sleep 0.2
done
[[ -n "$events" ]] || fail "no TesseraAssignmentRefused Event on pod override"
echo "refused by the real kubelet's Allocate, with the Event TesseraAssignmentRefused"

step "6. realnode.sh down leaves nothing behind"
"$kubectl" delete namespace "$ns" --wait=false > /dev/null
stop_children
pids=()
rm -f "$dir"/pids/*-realnode-test.pid
t0=$SECONDS
"$realnode" down "$dir" "$node"
echo "node down: $((SECONDS - t0)) s"
trap - EXIT
[[ "$(ip netns list | sort)" == "$before_netns" ]] || fail "network namespaces differ after down: $(ip netns list)"
# Only what appeared counts: other work on the machine may unmount its own.
added="$(comm -13 <(echo "$before_mounts") <(sort /proc/self/mounts))"
[[ -z "$added" ]] || fail "mounts added and not removed: $added"
! ip link show "tsrn${slot}h" > /dev/null 2>&1 || fail "veth tsrn${slot}h is still there"
! compgen -G "/sys/fs/cgroup/*/tessera-rn${slot}" > /dev/null || fail "cgroups of the node are still there"
for pidfile in "$node_dir"/pids/*.pid; do [[ -e "$pidfile" ]] && fail "$pidfile left"; done
if pgrep -f -- "--config $node_dir/" > /dev/null; then fail "a process of the node still runs: $(pgrep -af -- "--config $node_dir/")"; fi
echo "PASS in $((SECONDS - t_start)) s"
