#!/usr/bin/env bash
# Tessera's main job on its embedded default: a local Kubernetes control plane
# (etcd, kube-apiserver, kube-scheduler), tessera-scheduler as its extender,
# simulated GPU nodes of mixed models (each a real tessera-node in simulated
# mode driven by a kubelet stand-in, all run by tessera-nodesim), and the
# example workloads in examples/workloads: who landed on which GPU, what each
# container was handed by its node, and why the rest did not fit.
# Usage: scripts/demo.sh [BUILD_DIR]   (make demo sets up and builds first)
#   DEMO_KEEP=1 leaves the cluster running and prints how to use and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DIR=out/demo-cluster
BIN="$BUILD/bin"
for b in "$BIN/tessera-scheduler" "$BIN/tessera-node" "$BIN/tessera-nodesim" "$BIN/tessera-dev" \
         tools/controlplane/bin/kubectl; do
  [[ -x $b ]] || { echo "demo: $b not built; run 'make demo'" >&2; exit 1; }
done

tools/controlplane/cluster-down.sh "$DIR" >/dev/null 2>&1 || true
echo "== starting the local control plane (etcd, kube-apiserver, kube-scheduler 1.34) in $DIR"
tools/controlplane/cluster-up.sh "$DIR" | sed 's/^/   /'
# shellcheck disable=SC1091
source "$DIR/cluster.env"
kubectl() { tools/controlplane/bin/kubectl "$@"; }
teardown() {
  if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
    echo
    echo "The cluster is still running. Try:"
    echo "  source $DIR/cluster.env"
    echo "  tools/controlplane/bin/kubectl get pods -o wide"
    echo "  $BIN/tessera-dev report; $BIN/tessera-dev allocations"
    echo "  (the simulated nodes keep running: tessera-nodesim, logs in $DIR/logs)"
    echo "Stop it with: tools/controlplane/cluster-down.sh $DIR"
  else
    tools/controlplane/cluster-down.sh "$DIR" | sed 's/^/   /'
    echo "(DEMO_KEEP=1 make demo leaves the cluster up)"
  fi
}
trap teardown EXIT

echo "== starting tessera-scheduler on 127.0.0.1:$TESSERA_EXTENDER_PORT (policy tessera, leader election on)"
setsid "$BIN/tessera-scheduler" --kubeconfig "$KUBECONFIG" --port "$TESSERA_EXTENDER_PORT" \
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
  --pid-dir "$DIR/pids" --ready-file "$DIR/nodesim.ready" >"$DIR/logs/tessera-nodesim.log" 2>&1 </dev/null &
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
echo "   what the API server now says (model from tessera-node, GPU slots from the kubelet stand-in):"
kubectl get nodes -o custom-columns='NODE:.metadata.name,MODEL:.metadata.labels.tessera\.io/gpu-model,GPU-SLOTS:.status.allocatable.tessera\.io/gpu' | sed 's/^/   /'

echo "== submitting examples/workloads: inference shares, a multi-container pod, a 2-GPU trainer, two that cannot fit"
for f in examples/workloads/*.yaml; do kubectl apply -f "$f" >/dev/null; done
"$BIN/tessera-dev" wait-scheduled --admitted --namespace default --timeout 90
echo
"$BIN/tessera-dev" report --namespace default
echo
echo "== what each container was handed: tessera-node's Allocate answer, as the kubelet stand-in recorded it"
"$BIN/tessera-dev" allocations --namespace default
echo
echo "== what tessera-scheduler decided (from $DIR/logs/tessera-scheduler.log)"
grep -E 'bind |rejected|unschedulable' "$DIR/logs/tessera-scheduler.log" | head -20 | sed 's/^/   /' || true
