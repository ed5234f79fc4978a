# Shared by the e2e tests that install the Helm chart on a real node
# (real_node_chart_test.sh, real_node_examples_test.sh, real_node_path_test.sh);
# sourced, not run.
#
# Before sourcing, the test sets: node (the real node's name), ns (its
# workload namespace), work (a scratch folder). The environment ctest gives:
# TESSERA_TEST_KUBECONFIG, TESSERA_TEST_CLUSTER_DIR, TESSERA_BIN_DIR,
# TESSERA_IMAGES_DIR, and, outside sanitizer builds, TESSERA_TEST_CLIENT and
# TESSERA_TEST_PRELOAD (the fake CUDA client and the interception library).
#
# What it gives: the paths and tools below; step/fail/skip; rn_preflight
# (exit 77 without root or images, unless TESSERA_REQUIRE_IMAGES=1);
# rn_begin (cleanup trap, host state recorded, node up, images imported, node
# labelled); rn_helm_install (the chart as docs/install.md installs it, with
# the test's extra values, until every workload is Ready); allocatable and
# wait_allocatable (the Node's allocatable resources); agent_pod,
# agent_metric, wait_metric (the agent's /metrics, from the node's netns);
# rn_end (helm uninstall, node down, nothing left on the host).
: "${TESSERA_TEST_KUBECONFIG:?}" "${TESSERA_TEST_CLUSTER_DIR:?}" "${TESSERA_BIN_DIR:?}" "${TESSERA_IMAGES_DIR:?}"
: "${node:?}" "${ns:?}" "${work:?}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$TESSERA_TEST_CLUSTER_DIR"
# shellcheck disable=SC1091
source "$dir/cluster.env"
export KUBECONFIG="$TESSERA_TEST_KUBECONFIG"
kubectl="$TESSERA_CONTROLPLANE_BIN/kubectl" helm="$TESSERA_CONTROLPLANE_BIN/helm"
realnode="$src/tools/realnode/realnode.sh"
chart="$src/deploy/helm/tessera"
rel=tessera relns=tessera-system   # as docs/install.md writes them
mib=$((1 << 20))
t_start=$SECONDS

step() { echo; echo "=== [$((SECONDS - t_start)) s] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
skip() {
  [[ "${TESSERA_REQUIRE_IMAGES:-}" == 1 ]] && fail "$*"
  echo "SKIP: $*"; exit 77
}

# rn_preflight [--needs-client]: --needs-client also skips (exit 77, even
# with TESSERA_REQUIRE_IMAGES=1) where the fake CUDA client and the library
# are not built, as in sanitizer builds.
rn_preflight() {
  if [[ "${1:-}" == --needs-client && ( -z "${TESSERA_TEST_CLIENT:-}" || -z "${TESSERA_TEST_PRELOAD:-}" ) ]]; then
    echo "SKIP: needs the fake CUDA client and the library (not in sanitizer builds)"; exit 77
  fi
  [[ $(id -u) == 0 ]] || skip "a real node needs root (network and mount namespaces)"
  local img t
  for img in tessera-node tessera-scheduler; do
    [[ -f "$TESSERA_IMAGES_DIR/$img.tar" ]] || skip "$TESSERA_IMAGES_DIR/$img.tar missing (make images builds it)"
  done
  for t in "$TESSERA_CONTROLPLANE_BIN/kubelet" "$helm"; do
    [[ -x "$t" ]] || fail "$t missing (scripts/setup.sh builds it)"
  done
}

rn_cleanup() {
  local rc=$?
  if ((rc != 0)); then
    "$kubectl" get pods -A -o wide 2>&1 | head -30
    local p f
    for p in $("$kubectl" -n "$relns" get pods -o name 2>/dev/null); do
      echo "--- $p"; "$kubectl" -n "$relns" logs "$p" --all-containers --tail 20 2>&1 || true
    done
    "$kubectl" -n "$relns" get events --sort-by=.lastTimestamp 2>&1 | tail -20
    "$kubectl" -n "$ns" get events --sort-by=.lastTimestamp 2>&1 | tail -20
    for f in kubelet containerd kube-proxy coredns; do
      [[ -f "$dir/nodes/$node/logs/$f.log" ]] && { echo "--- last lines of $f.log"; tail -n 15 "$dir/nodes/$node/logs/$f.log"; }
    done
  fi
  "$kubectl" delete namespace "$ns" --ignore-not-found --wait=false > /dev/null 2>&1 || true
  "$helm" uninstall "$rel" --namespace "$relns" --wait --timeout 60s > /dev/null 2>&1 || true
  "$kubectl" delete namespace "$relns" --ignore-not-found --wait=false > /dev/null 2>&1 || true
  "$realnode" down "$dir" "$node" || rc=1
  exit $rc
}

# Sets workload_image (the fake-CUDA workload image, or busybox when this
# build has no fake client) and starts the node with the images imported.
rn_begin() {
  trap rn_cleanup EXIT
  rm -rf "$work"; mkdir -p "$work"
  before_netns="$(ip netns list | sort)"
  before_mounts="$(sort /proc/self/mounts)"
  before_host="$(ls -d /run/tessera /usr/local/lib/tessera 2>/dev/null || true)"
  local t0=$SECONDS images=() links=() applet
  workload_image=tessera.local/busybox:1
  if [[ -n "${TESSERA_TEST_CLIENT:-}" && -n "${TESSERA_TEST_PRELOAD:-}" ]]; then
    # The workload image: the client, the fake driver (ldd finds it as the
    # client's libcuda.so.1), what the library needs, and busybox for a shell.
    workload_image=tessera.local/fake-cuda-workload:1
    for applet in $(busybox --list); do [[ "$applet" == busybox ]] || links+=(--link "/bin/$applet:busybox"); done
    python3 "$src/tools/realnode/oci_image.py" "$work/workload.tar" "$workload_image" \
      --add-binary "$TESSERA_TEST_CLIENT:/usr/local/bin/fake_cuda_client" --libs-of "$TESSERA_TEST_PRELOAD" \
      --add "$(command -v busybox):/bin/busybox" "${links[@]}" --dir /tmp --env PATH=/usr/local/bin:/bin -- /bin/sh
    images+=("$work/workload.tar")
  fi
  "$realnode" up "$dir" "$node"
  eval "$("$realnode" info "$dir" "$node")"   # slot, netns, node_ip, node_dir, ...
  "$realnode" import "$dir" "$node" "$TESSERA_IMAGES_DIR/tessera-node.tar" "$TESSERA_IMAGES_DIR/tessera-scheduler.tar" "${images[@]}"
  "$kubectl" label node "$node" tessera.io/gpu-node=true > /dev/null
  echo "node up, images imported: $((SECONDS - t0)) s"
}

# rn_helm_install SLOTS GPU_LIST_YAML [--set ...]: helm install with the image
# values, the GPU list (simulated mode) and the test's own flags; returns once
# the agent's DaemonSet pod, the kube-scheduler and the extender's leader are
# Ready and the Node offers SLOTS tessera.io/gpu slots.
rn_helm_install() {
  local slots="$1" gpus="$2"; shift 2
  local k8s_version t0=$SECONDS
  k8s_version="$("$TESSERA_CONTROLPLANE_BIN/kube-scheduler" --version | awk '{print $2}')"
  {
    cat <<EOF
image: {registry: tessera.local, tag: local, pullPolicy: Never}
scheduler:
  image: {repository: tessera.local/kube-scheduler, tag: "$k8s_version", pullPolicy: Never}
  nodeSelector: {kubernetes.io/hostname: $node}
extender:
  nodeSelector: {kubernetes.io/hostname: $node}
node:
  gpuSource: file
  reconcileIntervalMs: 2000
  simulatedGpus: |
EOF
    sed 's/^/    /' <<< "$gpus"
  } > "$work/values.yaml"
  "$helm" install "$rel" "$chart" --namespace "$relns" --create-namespace -f "$work/values.yaml" "$@" > /dev/null
  "$kubectl" -n "$relns" rollout status daemonset/tessera-node --timeout=120s
  "$kubectl" -n "$relns" rollout status deployment/tessera-kube-scheduler --timeout=120s
  # The extender's standby replica is un-Ready by design (docs/install.md).
  for _ in $(seq 300); do
    [[ "$("$kubectl" -n "$relns" get deployment tessera-extender -o 'jsonpath={.status.readyReplicas}')" == 1 ]] && break
    sleep 0.4
  done
  [[ "$("$kubectl" -n "$relns" get deployment tessera-extender -o 'jsonpath={.status.readyReplicas}')" == 1 ]] \
    || fail "no extender replica became Ready (the Lease holder)"
  wait_allocatable tessera.io/gpu "$slots" "after helm install"
  echo "helm install to every workload Ready and $slots slots offered: $((SECONDS - t0)) s"
}

allocatable() {  # RESOURCE: the Node's allocatable amount of it ("" when none)
  "$kubectl" get node "$node" -o "jsonpath={.status.allocatable.${1//./\\.}}"
}
wait_allocatable() {  # RESOURCE VALUE WHAT: until the Node offers VALUE of it ("+": any)
  local v=""
  for _ in $(seq 150); do
    v="$(allocatable "$1")"
    [[ "$v" == "$2" || ( "$2" == + && -n "$v" ) ]] && return 0
    sleep 0.2
  done
  fail "$3: the Node offers $1 '$v', not $2"
}

agent_pod() {  # the agent pod's name once its DaemonSet's pod is Ready
  "$kubectl" -n "$relns" rollout status daemonset/tessera-node --timeout=90s > /dev/null
  "$kubectl" -n "$relns" get pods -l "app.kubernetes.io/name=tessera-node,app.kubernetes.io/instance=$rel" \
    --field-selector status.phase=Running -o 'jsonpath={.items[0].metadata.name}'
}
agent_metrics() {  # the agent's /metrics text now, from the node's netns
  local ip; ip="$("$kubectl" -n "$relns" get pod "$(agent_pod)" -o 'jsonpath={.status.podIP}')"
  ip netns exec "$netns" curl -sf "http://$ip:9410/metrics"
}
agent_metric() {  # METRIC [LABEL_FILTER]: its value(s) on the agent's /metrics now
  agent_metrics | awk -v m="$1" -v f="${2:-}" '$1 ~ "^"m"({|$)" && index($1, f) {print $2}'
}
wait_metric() {  # METRIC VALUE WHAT [LABEL_FILTER]
  local v=""
  for _ in $(seq 100); do v="$(agent_metric "$1" "${4:-}" || true)"; [[ "$v" == "$2" ]] && return 0; sleep 0.3; done
  fail "after $3: $1${4:+ ($4)} is '$v', not $2"
}

rn_end() {
  local t0=$SECONDS
  "$kubectl" delete namespace "$ns" --wait=false > /dev/null
  "$helm" uninstall "$rel" --namespace "$relns" --wait --timeout 90s > /dev/null
  for _ in $(seq 150); do
    [[ -z "$("$kubectl" -n "$relns" get pods -o name 2>/dev/null)" ]] && break
    sleep 0.2
  done
  [[ -z "$("$kubectl" -n "$relns" get pods -o name 2>/dev/null)" ]] || fail "pods of the release are left: $("$kubectl" -n "$relns" get pods -o name)"
  "$kubectl" delete namespace "$relns" --wait=false > /dev/null
  echo "helm uninstall to no pod of the release: $((SECONDS - t0)) s"
  "$realnode" down "$dir" "$node"
  trap - EXIT
  [[ "$(ip netns list | sort)" == "$before_netns" ]] || fail "network namespaces differ after down: $(ip netns list)"
  local added; added="$(comm -13 <(echo "$before_mounts") <(sort /proc/self/mounts))"
  [[ -z "$added" ]] || fail "mounts added and not removed: $added"
  ! compgen -G "/sys/fs/cgroup/*/tessera-rn${slot}" > /dev/null || fail "cgroups of the node are still there"
  [[ "$(ls -d /run/tessera /usr/local/lib/tessera 2>/dev/null || true)" == "$before_host" ]] \
    || fail "/run/tessera or /usr/local/lib/tessera appeared on the host"
  echo "PASS in $((SECONDS - t_start)) s"
}
