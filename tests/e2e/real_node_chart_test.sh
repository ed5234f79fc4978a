#!/usr/bin/env bash
# e2e_real_node_chart_test: the product path on a real node. Tessera's own
# images (make images: deploy/images/Dockerfile, built without a registry or
# a Docker daemon) imported into the node's containerd and run by the Helm
# chart, installed as docs/install.md says.
#
#  1. realnode.sh up (kubelet, containerd, kube-proxy, CoreDNS); the images
#     tessera-node and tessera-scheduler imported; the node labelled
#     tessera.io/gpu-node=true as docs/install.md says.
#  2. helm install tessera deploy/helm/tessera --namespace tessera-system
#     --create-namespace, with values that say where the images are (the
#     local names, pullPolicy Never: nothing is pulled) and one simulated
#     GPU (no NVML here). Controllers make every pod: tessera-node's
#     DaemonSet pod (its init step installs the library into the node's
#     /usr/local/lib/tessera), the extender's Deployment (2 replicas, one
#     leader), the chart's kube-scheduler Deployment. All turn Ready; the
#     agent, in its container, registers tessera.io/gpu with the real kubelet.
#  3. A Deployment of 2 sharing pods (schedulerName tessera-scheduler):
#     the chart's kube-scheduler reaches the extender through its Service
#     name (CoreDNS, kube-proxy), the extender binds each with an assignment
#     on the one GPU, the real kubelet's device manager calls the agent's
#     Allocate, and inside each container (kubectl exec) the share's limits
#     are in the environment and /etc/ld.so.preload names the library the
#     init step installed.
#  4. The agent's /metrics (its pod's address, from the node) counts both
#     containers on the GPU.
#  5. helm uninstall: the release's pods go, the sharing pods' Deployment
#     is deleted; realnode.sh down leaves nothing of the node.
#
# Adapted from docs/install.md, and only these: the image values above, the
# simulated GPU list, and a nodeSelector keeping the extender and
# kube-scheduler pods on this node (the fixture's cluster may hold other
# tests' simulated nodes, where no kubelet would start them).
#
# Exit 77 (skipped) without root or without the image archives, unless
# TESSERA_REQUIRE_IMAGES=1 (make test), which makes a missing archive a failure.
set -euo pipefail
: "${TESSERA_TEST_KUBECONFIG:?}" "${TESSERA_TEST_CLUSTER_DIR:?}" "${TESSERA_BIN_DIR:?}" "${TESSERA_IMAGES_DIR:?}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$TESSERA_TEST_CLUSTER_DIR"
# shellcheck disable=SC1091
source "$dir/cluster.env"
export KUBECONFIG="$TESSERA_TEST_KUBECONFIG"
kubectl="$TESSERA_CONTROLPLANE_BIN/kubectl" helm="$TESSERA_CONTROLPLANE_BIN/helm"
realnode="$src/tools/realnode/realnode.sh"
chart="$src/deploy/helm/tessera"
node=rn-chart
rel=tessera relns=tessera-system   # as docs/install.md writes them
ns=real-node-chart-e2e             # the sharing workload's
work="$dir/real-node-chart-test"
t_start=$SECONDS

step() { echo; echo "=== [$((SECONDS - t_start)) s] $*"; }
fail() { echo "FAIL: $*"; exit 1; }
skip() {
  [[ "${TESSERA_REQUIRE_IMAGES:-}" == 1 ]] && fail "$*"
  echo "SKIP: $*"; exit 77
}
[[ $(id -u) == 0 ]] || skip "a real node needs root (network and mount namespaces)"
for img in tessera-node tessera-scheduler; do
  [[ -f "$TESSERA_IMAGES_DIR/$img.tar" ]] || skip "$TESSERA_IMAGES_DIR/$img.tar missing (make images builds it)"
done
for t in "$TESSERA_CONTROLPLANE_BIN/kubelet" "$helm"; do
  [[ -x "$t" ]] || fail "$t missing (scripts/setup.sh builds it)"
done

cleanup() {
  local rc=$?
  if ((rc != 0)); then
    "$kubectl" get pods -A -o wide 2>&1 | head -30
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
trap cleanup EXIT

rm -rf "$work"; mkdir -p "$work"
before_netns="$(ip netns list | sort)"
before_mounts="$(sort /proc/self/mounts)"
before_host="$(ls -d /run/tessera /usr/local/lib/tessera 2>/dev/null || true)"

step "1. a real node, Tessera's images imported, labelled for the agent"
t0=$SECONDS
"$realnode" up "$dir" "$node"
eval "$("$realnode" info "$dir" "$node")"   # slot, netns, node_ip, node_dir, ...
"$realnode" import "$dir" "$node" "$TESSERA_IMAGES_DIR/tessera-node.tar" "$TESSERA_IMAGES_DIR/tessera-scheduler.tar"
"$kubectl" label node "$node" tessera.io/gpu-node=true > /dev/null
echo "node up, images imported: $((SECONDS - t0)) s"
k8s_version="$("$TESSERA_CONTROLPLANE_BIN/kube-scheduler" --version | awk '{print $2}')"

step "2. helm install as docs/install.md says; every pod made by a controller and Ready"
cat > "$work/values.yaml" <<EOF
image: {registry: tessera.local, tag: local, pullPolicy: Never}
scheduler:
  image: {repository: tessera.local/kube-scheduler, tag: "$k8s_version", pullPolicy: Never}
  nodeSelector: {kubernetes.io/hostname: $node}
extender:
  nodeSelector: {kubernetes.io/hostname: $node}
node:
  gpuSource: file
  simulatedGpus: |
    gpus:
    - {uuid: GPU-chart-0, model: A100, memMiB: 40960, sms: 108, numa: 0, healthy: true}
EOF
t0=$SECONDS
"$helm" install "$rel" "$chart" --namespace "$relns" --create-namespace -f "$work/values.yaml" > /dev/null
for w in daemonset/tessera-node deployment/tessera-extender deployment/tessera-kube-scheduler; do
  # The extender's standby replica is un-Ready by design (docs/install.md):
  # its Deployment is complete when the leader is.
  "$kubectl" -n "$relns" get "$w" > /dev/null || fail "helm install made no $w"
done
"$kubectl" -n "$relns" rollout status daemonset/tessera-node --timeout=120s
"$kubectl" -n "$relns" rollout status deployment/tessera-kube-scheduler --timeout=120s
for _ in $(seq 300); do
  [[ "$("$kubectl" -n "$relns" get deployment tessera-extender -o 'jsonpath={.status.readyReplicas}')" == 1 ]] && break
  sleep 0.4
done
[[ "$("$kubectl" -n "$relns" get deployment tessera-extender -o 'jsonpath={.status.readyReplicas}')" == 1 ]] \
  || fail "no extender replica became Ready (the Lease holder)"
echo "helm install to every workload Ready: $((SECONDS - t0)) s"
"$kubectl" -n "$relns" get pods -o wide
agent="$("$kubectl" -n "$relns" get pods -l app.kubernetes.io/name=tessera-node,app.kubernetes.io/instance=$rel -o 'jsonpath={.items[0].metadata.name}')"
[[ "$("$kubectl" -n "$relns" get pod "$agent" -o 'jsonpath={.spec.nodeName}')" == "$node" ]] || fail "the agent pod is not on $node"
for _ in $(seq 150); do
  gpu="$("$kubectl" get node "$node" -o 'jsonpath={.status.allocatable.tessera\.io/gpu}')"
  [[ "$gpu" == 8 ]] && break
  sleep 0.2
done
[[ "$gpu" == 8 ]] || fail "the Node shows tessera.io/gpu '$gpu', not the chart's 8 slots for one GPU"
echo "the agent's DaemonSet pod registered with the real kubelet: tessera.io/gpu $gpu"
installed="$node_dir/host/usr-local-lib-tessera"
[[ -s "$installed/libtessera-cuda.so" && "$(cat "$installed/ld.so.preload")" == /usr/local/lib/tessera/libtessera-cuda.so ]] \
  || fail "the init step did not install the library and ld.so.preload in the node's /usr/local/lib/tessera"
echo "the init step installed: $(ls "$installed" | tr '\n' ' ')"

step "3. a Deployment of 2 sharing pods: chart's kube-scheduler -> extender Service -> bind -> real Allocate"
"$kubectl" create namespace "$ns" > /dev/null
t0=$SECONDS
"$kubectl" -n "$ns" apply -f - > /dev/null <<EOF
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
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: tessera.local/busybox:1
        imagePullPolicy: Never
        command: [sleep, "3600"]
        resources:
          limits: {tessera.io/gpu: 1, tessera.io/gpu-mem: 4096, tessera.io/gpu-core: 30}
EOF
"$kubectl" -n "$ns" rollout status deployment/share --timeout=120s
echo "sharing Deployment created to 2 Ready pods: $((SECONDS - t0)) s"
mapfile -t share_pods < <("$kubectl" -n "$ns" get pods -l app=share -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}')
((${#share_pods[@]} == 2)) || fail "expected 2 sharing pods, got ${#share_pods[@]}"
for p in "${share_pods[@]}"; do
  a="$("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.metadata.annotations.tessera\.io/assignment}')"
  [[ -n "$a" ]] || fail "pod $p has no tessera.io/assignment"
  [[ -n "$("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')" ]] \
    || fail "the agent did not annotate pod $p as allocated"
  env="$("$kubectl" -n "$ns" exec "$p" -- env)"
  echo "$p: assignment $a; $(echo "$env" | grep -E '^(TESSERA_GPU_MEM_LIMIT_MIB_0|TESSERA_GPU_CORE_PERCENT_0|NVIDIA_VISIBLE_DEVICES)=' | sort | tr '\n' ' ')"
  echo "$env" | grep -qx 'TESSERA_GPU_MEM_LIMIT_MIB_0=4096' || fail "TESSERA_GPU_MEM_LIMIT_MIB_0 is not 4096 in $p"
  echo "$env" | grep -qx 'TESSERA_GPU_CORE_PERCENT_0=30' || fail "TESSERA_GPU_CORE_PERCENT_0 is not 30 in $p"
  echo "$env" | grep -qx 'NVIDIA_VISIBLE_DEVICES=GPU-chart-0' || fail "NVIDIA_VISIBLE_DEVICES is not GPU-chart-0 in $p"
  [[ "$("$kubectl" -n "$ns" exec "$p" -- cat /etc/ld.so.preload)" == /usr/local/lib/tessera/libtessera-cuda.so ]] \
    || fail "/etc/ld.so.preload in $p does not name the library"
  "$kubectl" -n "$ns" exec -i "$p" -- cmp -s /usr/local/lib/tessera/libtessera-cuda.so /proc/self/fd/0 \
    < "$installed/libtessera-cuda.so" || fail "the library in $p is not the one the init step installed"
done

step "4. the agent's /metrics counts both containers"
agent_ip="$("$kubectl" -n "$relns" get pod "$agent" -o 'jsonpath={.status.podIP}')"
metrics=""
for _ in $(seq 100); do
  metrics="$(ip netns exec "$netns" curl -sf "http://$agent_ip:9410/metrics" || true)"
  grep -qE '^tessera_gpu_containers\{[^}]*\} 2$' <<< "$metrics" && break
  sleep 0.3
done
grep -E '^tessera_gpu_(containers|memory_allocated_bytes|core_allocated_ratio)\{' <<< "$metrics" || true
grep -qE '^tessera_gpu_containers\{[^}]*\} 2$' <<< "$metrics" || fail "the agent's /metrics does not count 2 containers on the GPU"

step "5. helm uninstall; realnode.sh down leaves nothing"
"$kubectl" delete namespace "$ns" --wait=false > /dev/null
t0=$SECONDS
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
added="$(comm -13 <(echo "$before_mounts") <(sort /proc/self/mounts))"
[[ -z "$added" ]] || fail "mounts added and not removed: $added"
! compgen -G "/sys/fs/cgroup/*/tessera-rn${slot}" > /dev/null || fail "cgroups of the node are still there"
[[ "$(ls -d /run/tessera /usr/local/lib/tessera 2>/dev/null || true)" == "$before_host" ]] \
  || fail "/run/tessera or /usr/local/lib/tessera appeared on the host"
echo "PASS in $((SECONDS - t_start)) s"
