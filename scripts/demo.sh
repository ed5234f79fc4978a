#!/usr/bin/env bash
# Tessera's main job on its embedded default: a local Kubernetes control plane
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler with the
# profiles default-scheduler and tessera-scheduler), tessera-scheduler as its
# extender, simulated GPU nodes of mixed models (each a real tessera-node in
# simulated mode driven by a kubelet stand-in, all run by tessera-nodesim),
# one real node (a kubelet and containerd of its own, tools/realnode) where
# tessera-node serves a simulated GPU to real containers, and the example
# workloads in examples/workloads: who landed on which GPU, what each
# container was handed by its node, why the rest did not fit, and, on the
# real node, a container's share seen from inside it (kubectl exec).
#
# Usage: scripts/demo.sh [BUILD_DIR]   (make demo sets up and builds first)
#   DEMO_KEEP=1 leaves the cluster running and prints how to use and stop it.
#   DEMO_FRONT_ENDS=gpushare,hami switches the compatibility front ends on
#     (either or both; docs/migration.md): tessera-scheduler --gpushare/--hami,
#     every tessera-node --gpushare/--hami, a kubelet stand-in per front-end
#     resource on each simulated node, and the examples/compat pods applied.
#   DEMO_REAL_NODE=0 leaves the real node out. It is also left out, with the
#     reason printed, without root (namespaces), the kubelet and containerd
#     (scripts/setup.sh builds them), runc, or the fake CUDA client and
#     interception library (not built under the sanitizers).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DIR=out/demo-cluster
BIN="$BUILD/bin"
REAL=real-a100                  # the real node's name
REAL_NS=real-node               # the namespace of its sharing Deployment
REAL_TAINT=tessera.io/real-node # keeps the examples (images nobody can pull here) off it
for b in "$BIN/tessera-scheduler" "$BIN/tessera-node" "$BIN/tessera-nodesim" "$BIN/tessera-dev" \
         tools/controlplane/bin/kubectl; do
  [[ -x $b ]] || { echo "demo: $b not built; run 'make demo'" >&2; exit 1; }
done

# --- the compatibility front ends ---------------------------------------------
front_ends="${DEMO_FRONT_ENDS:-}"
scheduler_flags=() nodesim_flags=() agent_flags=() compat_examples=()
for fe in ${front_ends//,/ }; do
  case "$fe" in
    gpushare) scheduler_flags+=(--gpushare true) agent_flags+=(--gpushare=true)
              nodesim_flags+=(--agent-flag=--gpushare=true --extra-resource aliyun.com/gpu-mem)
              compat_examples+=(examples/compat/gpushare-pod.yaml) ;;
    hami)     scheduler_flags+=(--hami true) agent_flags+=(--hami=true)
              nodesim_flags+=(--agent-flag=--hami=true --extra-resource nvidia.com/gpu)
              compat_examples+=(examples/compat/hami-pod.yaml) ;;
    *) echo "demo: unknown front end '$fe' in DEMO_FRONT_ENDS (gpushare, hami)" >&2; exit 2 ;;
  esac
done

# --- can a real node run here? --------------------------------------------------
client="$BUILD/tests/fake_cuda/fake_cuda_client" library="$BUILD/src/cuda/libtessera-cuda.so"
real_skip=""
if [[ "${DEMO_REAL_NODE:-1}" == 0 ]]; then real_skip="DEMO_REAL_NODE=0"
elif [[ $(id -u) != 0 ]]; then real_skip="it needs root (a network and a mount namespace of its own)"
elif [[ ! -x tools/controlplane/bin/kubelet ]]; then real_skip="no kubelet in tools/controlplane/bin (scripts/setup.sh builds it)"
elif [[ ! -x tools/controlplane/bin/containerd ]]; then
  real_skip="no containerd in tools/controlplane/bin (scripts/setup.sh builds it)"
elif ! command -v runc > /dev/null; then
  real_skip="no runc (scripts/setup.sh installs it)"
elif [[ ! -x $client || ! -f $library ]]; then
  real_skip="no $client or $library in this build (sanitizer builds leave them out)"
fi

tools/controlplane/cluster-down.sh "$DIR" >/dev/null 2>&1 || true
k8s_version="$(tools/controlplane/bin/kube-scheduler --version 2>/dev/null | awk '{print $2}')" || true
echo "== starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler ${k8s_version:-?}) in $DIR"
# Profiles default-scheduler and tessera-scheduler, both with the extender:
# pods that name the Helm chart's scheduler (examples/pytorch, ...) run too.
SCHEDULER_NAMES="default-scheduler tessera-scheduler" tools/controlplane/cluster-up.sh "$DIR" | sed 's/^/   /'
# shellcheck disable=SC1091
source "$DIR/cluster.env"
kubectl() { tools/controlplane/bin/kubectl "$@"; }
teardown() {
  if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
    echo
    echo "The cluster is still running. Try:"
    echo "  source $DIR/cluster.env"
    echo "  tools/controlplane/bin/kubectl get pods -A -o wide"
    echo "  $BIN/tessera-dev report; $BIN/tessera-dev allocations"
    echo "  tools/controlplane/bin/kubectl apply -f examples/pytorch/train-job.yaml   # a Job, schedulerName tessera-scheduler"
    echo "  (the simulated nodes keep running: tessera-nodesim, logs in $DIR/logs)"
    if [[ -z "$real_skip" ]]; then
      echo "  tools/controlplane/bin/kubectl -n $REAL_NS exec deploy/share -- fake_cuda_client info   # on the real node $REAL"
      echo "  (the real node's own logs: $DIR/nodes/$REAL/logs)"
    fi
    echo "Stop it with: tools/controlplane/cluster-down.sh $DIR   (brings the real node down too)"
  else
    tools/controlplane/cluster-down.sh "$DIR" | sed 's/^/   /'
    echo "(DEMO_KEEP=1 make demo leaves the cluster up)"
  fi
}
trap teardown EXIT

echo "== starting tessera-scheduler on 127.0.0.1:$TESSERA_EXTENDER_PORT (policy tessera, leader election on${front_ends:+, front ends $front_ends})"
setsid "$BIN/tessera-scheduler" --kubeconfig "$KUBECONFIG" --port "$TESSERA_EXTENDER_PORT" "${scheduler_flags[@]}" \
  >"$DIR/logs/tessera-scheduler.log" 2>&1 </dev/null &
echo $! > "$DIR/pids/tessera-scheduler.pid"
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$TESSERA_EXTENDER_PORT/readyz" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$TESSERA_EXTENDER_PORT/readyz" >/dev/null || {
  echo "demo: tessera-scheduler did not become ready; its log:" >&2; tail -20 "$DIR/logs/tessera-scheduler.log" >&2; exit 1; }

echo "== simulated GPU nodes (examples/cluster/nodes.yaml): a tessera-node and a kubelet stand-in each"
rm -f "$DIR/nodesim.ready"
setsid "$BIN/tessera-nodesim" examples/cluster/nodes.yaml --kubeconfig "$KUBECONFIG" --log-dir "$DIR/logs" \
  --pid-dir "$DIR/pids" --ready-file "$DIR/nodesim.ready" "${nodesim_flags[@]}" \
  >"$DIR/logs/tessera-nodesim.log" 2>&1 </dev/null &
echo $! > "$DIR/pids/tessera-nodesim.pid"
for _ in $(seq 600); do
  [[ -e $DIR/nodesim.ready ]] && break
  kill -0 "$(cat "$DIR/pids/tessera-nodesim.pid")" 2>/dev/null || break
  sleep 0.2
done
[[ -e $DIR/nodesim.ready ]] || {
  echo "demo: the simulated nodes did not become ready; tessera-nodesim's log:" >&2
  tail -20 "$DIR/logs/tessera-nodesim.log" >&2; exit 1; }
sed 's/^/   /' "$DIR/nodesim.ready"

# --- the real node ----------------------------------------------------------------
# realnode.sh up: its own netns, mount namespace, containerd and kubelet, plus
# kube-proxy and CoreDNS. tessera-node runs inside its mount namespace (so it
# finds the kubelet's device-plugin socket) with one simulated 40 GiB A100;
# the library and /etc/ld.so.preload are installed into the node's
# /usr/local/lib/tessera, as the Helm chart's init step does. The workload
# image holds the fake CUDA driver and a small CUDA client.
gpu_uuid=GPU-de300000-0000-4000-8000-0000000000a1
# Runs as an `if` condition, where errexit is off: every step says `|| return 1`.
start_real_node() {
  local rdir="$PWD/$DIR/real-node" abs_bin port
  rm -rf "$rdir"; mkdir -p "$rdir"
  tools/realnode/realnode.sh up "$DIR" "$REAL" 2>&1 | sed 's/^/   /'
  ((PIPESTATUS[0] == 0)) || return 1
  kubectl taint node "$REAL" "$REAL_TAINT=demo:NoSchedule" > /dev/null || return 1
  eval "$(tools/realnode/realnode.sh info "$DIR" "$REAL")" || return 1   # node_dir, netns, ...
  install -m 0644 "$library" "$node_dir/host/usr-local-lib-tessera/libtessera-cuda.so" || return 1
  echo /usr/local/lib/tessera/libtessera-cuda.so > "$node_dir/host/usr-local-lib-tessera/ld.so.preload" || return 1
  printf 'gpus:\n- {uuid: %s, model: A100, memMiB: 40960, sms: 108, numa: 0, healthy: true}\n' \
    "$gpu_uuid" > "$rdir/gpus.yaml" || return 1
  local links=()
  for applet in $(busybox --list); do [[ "$applet" == busybox ]] || links+=(--link "/bin/$applet:busybox"); done
  python3 tools/realnode/oci_image.py "$rdir/workload.tar" tessera.local/fake-cuda-workload:1 \
    --add-binary "$client:/usr/local/bin/fake_cuda_client" --libs-of "$library" \
    --add "$(command -v busybox):/bin/busybox" "${links[@]}" --dir /tmp --env PATH=/usr/local/bin:/bin -- /bin/sh \
    || return 1
  tools/realnode/realnode.sh import "$DIR" "$REAL" "$rdir/workload.tar" > /dev/null || return 1
  abs_bin="$(cd "$BIN" && pwd)" || return 1
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  setsid tools/realnode/realnode.sh enter "$DIR" "$REAL" "$abs_bin/tessera-node" --node-name "$REAL" \
    --kubeconfig "$KUBECONFIG" --simulated-gpus "$rdir/gpus.yaml" --slots-per-gpu 8 \
    --metrics-bind-address "127.0.0.1:$port" "${agent_flags[@]}" \
    > "$DIR/logs/tessera-node-$REAL.log" 2>&1 < /dev/null &
  echo $! > "$DIR/pids/tessera-node-$REAL.pid"
  local slots=""
  for _ in $(seq 150); do
    slots="$(kubectl get node "$REAL" -o 'jsonpath={.status.allocatable.tessera\.io/gpu}')"
    [[ "$slots" == 8 ]] && break
    sleep 0.2
  done
  [[ "$slots" == 8 ]] || { echo "demo: tessera-node on $REAL did not register its 8 slots with the kubelet; its log:" >&2
                           tail -20 "$DIR/logs/tessera-node-$REAL.log" >&2; return 1; }
  printf '   %s  1 x A100   40960 MiB    8 slots  metrics 127.0.0.1:%-5s  log %s\n' \
    "$REAL" "$port" "$DIR/logs/tessera-node-$REAL.log"
  echo "   (tainted $REAL_TAINT:NoSchedule: the examples' images cannot be pulled here; the demo's own pods tolerate it)"
}
if [[ -n "$real_skip" ]]; then
  echo "== no real node: $real_skip; simulated nodes only"
else
  echo "== a real node (tools/realnode): kubelet, containerd, kube-proxy, CoreDNS; tessera-node registered with the kubelet"
  if ! start_real_node; then
    echo "   the real node did not come up (see above); going on with the simulated nodes only"
    tools/realnode/realnode.sh down "$DIR" "$REAL" > /dev/null 2>&1 || true
    real_skip="it did not come up"
  fi
fi
echo "   what the API server now says (model from tessera-node, GPU slots from the kubelet or its stand-in):"
kubectl get nodes -o custom-columns='NODE:.metadata.name,MODEL:.metadata.labels.tessera\.io/gpu-model,GPU-SLOTS:.status.allocatable.tessera\.io/gpu,READY:.status.conditions[?(@.type=="Ready")].status' | sed 's/^/   /'

echo "== submitting examples/workloads: inference shares, a multi-container pod, a 2-GPU trainer, two that cannot fit"
for f in examples/workloads/*.yaml "${compat_examples[@]}"; do kubectl apply -f "$f" >/dev/null; done
((${#compat_examples[@]} == 0)) || echo "   and for the front ends on: ${compat_examples[*]}"
"$BIN/tessera-dev" wait-scheduled --admitted --namespace default --timeout 90
echo
"$BIN/tessera-dev" report --namespace default
echo
echo "== what each container was handed: tessera-node's Allocate answer, as the kubelet stand-in recorded it"
"$BIN/tessera-dev" allocations --namespace default
echo
echo "== what tessera-scheduler decided (from $DIR/logs/tessera-scheduler.log)"
grep -E 'bind |rejected|unschedulable' "$DIR/logs/tessera-scheduler.log" | head -20 | sed 's/^/   /' || true

[[ -z "$real_skip" ]] || exit 0
echo
echo "== on the real node: a Deployment of 2 pods, 4096 MiB and 30 % of its 40 GiB GPU each (schedulerName tessera-scheduler)"
kubectl create namespace "$REAL_NS" > /dev/null
kubectl -n "$REAL_NS" apply -f - > /dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: share}
spec:
  replicas: 2
  selector: {matchLabels: {app: share}}
  template:
    metadata: {labels: {app: share}}
    spec:
      schedulerName: tessera-scheduler
      nodeSelector: {kubernetes.io/hostname: $REAL}
      tolerations: [{key: $REAL_TAINT, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: tessera.local/fake-cuda-workload:1
        imagePullPolicy: Never
        # Holds 1024 MiB of device memory until stopped.
        command: [fake_cuda_client, alloc, "1024", term]
        # The fake driver's device: the node's 40 GiB GPU.
        env: [{name: FAKE_CUDA_MEM_MIB, value: "40960"}]
        resources:
          limits: {tessera.io/gpu: 1, tessera.io/gpu-mem: 4096, tessera.io/gpu-core: 30}
EOF
if ! kubectl -n "$REAL_NS" rollout status deployment/share --timeout=120s > /dev/null; then
  echo "demo: the sharing pods did not become Ready on $REAL:" >&2
  kubectl -n "$REAL_NS" get pods -o wide >&2
  kubectl -n "$REAL_NS" get events --sort-by=.lastTimestamp 2>&1 | tail -10 >&2
  exit 1
fi
echo "   \$ kubectl -n $REAL_NS get pods -o wide"
kubectl -n "$REAL_NS" get pods -o wide | sed 's/^/     /'
pod="$(kubectl -n "$REAL_NS" get pods -l app=share -o 'jsonpath={.items[0].metadata.name}')"
for _ in $(seq 50); do kubectl -n "$REAL_NS" logs "$pod" 2>/dev/null | grep -qx ready && break; sleep 0.2; done
mib() { awk '{printf "free %d MiB, total %d MiB\n", $1 / 1048576, $2 / 1048576}'; }
x() { echo "   \$ kubectl -n $REAL_NS exec $pod -- $*"; kubectl -n "$REAL_NS" exec "$pod" -- "$@" 2>&1 | sed 's/^/     /'; }
echo "   inside $pod, a real container the kubelet started with tessera-node's Allocate answer:"
echo "   \$ kubectl -n $REAL_NS exec $pod -- env | grep -E '^(TESSERA|NVIDIA)_' | sort"
kubectl -n "$REAL_NS" exec "$pod" -- env | grep -E '^(TESSERA|NVIDIA)_' | sort | sed 's/^/     /'
x cat /etc/ld.so.preload
echo "   \$ kubectl -n $REAL_NS exec $pod -- fake_cuda_client info   # cuMemGetInfo: the share is the GPU's total"
kubectl -n "$REAL_NS" exec "$pod" -- fake_cuda_client info | mib | sed 's/^/     /'
echo "     (the main process holds 1024 MiB; each process's context is charged 256 MiB)"
echo "   \$ kubectl -n $REAL_NS exec $pod -- fake_cuda_client fill 512   # 512 MiB blocks until refused"
kubectl -n "$REAL_NS" exec "$pod" -- fake_cuda_client fill 512 | sed 's/^/     /; s/$/ blocks of 512 MiB, then CUDA_ERROR_OUT_OF_MEMORY/'
echo "   \$ kubectl -n $REAL_NS exec $pod -- fake_cuda_client alloc 3000 exit   # more than the share has left"
rc=0; kubectl -n "$REAL_NS" exec "$pod" -- fake_cuda_client alloc 3000 exit > /dev/null 2>&1 || rc=$?
echo "     exit $rc$( ((rc == 7)) && echo ': refused, CUDA_ERROR_OUT_OF_MEMORY; nothing was killed')"
