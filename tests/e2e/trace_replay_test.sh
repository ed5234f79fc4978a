#!/usr/bin/env bash
# e2e_trace_replay_test: bench/trace_replay end to end on a tiny trace in the
# openb format (four GPU nodes, 40 pods: shares, whole GPUs, pods without
# GPUs, a model constraint), in a loopback cluster of its own: it must finish,
# report the simulator's and the real path's figures, and place on the real
# path what the simulator places (nothing here depends on the order of
# placements: every pod fits, so both place them all).
#
#   trace_replay_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: trace_replay_test.sh BUILD_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/openb_node_list_gpu_node.csv" <<CSV
sn,cpu_milli,memory_mib,gpu,model
tiny-node-0,32000,131072,2,V100M32
tiny-node-1,32000,131072,2,V100M32
tiny-node-2,32000,131072,4,T4
tiny-node-3,16000,65536,1,T4
CSV
{
  echo "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"
  for i in $(seq 0 39); do
    case $((i % 5)) in
      0) echo "tiny-pod-$i,1000,2048,1,250," ;;
      1) if ((i % 10 == 1)); then echo "tiny-pod-$i,2000,4096,1,1000,"; else echo "tiny-pod-$i,500,1024,0,0,"; fi ;;
      2) echo "tiny-pod-$i,500,1024,0,0," ;;
      3) echo "tiny-pod-$i,1000,2048,1,100,T4" ;;
      4) echo "tiny-pod-$i,1000,1024,1,50," ;;
    esac
  done
} > "$work/openb_pod_list_tiny.csv"

# --tune 0 keeps the trace as it is (GPU demand: 4 x 1000 + 8 x 250 + 8 x 100
# + 8 x 50 milli of the 9 GPUs' 9000), so every pod fits.
out=$("$build/bench/trace_replay" --repo "$repo" --data "$work" --trace tiny --tune 0 --settle 6 --dir "$work/cluster")
echo "$out"
sim=$(awk '$1 == "simulator" {print $2}' <<<"$out")
real=$(awk '/^kube-scheduler \+ extender/ {print $4}' <<<"$out")
if [[ "$sim" != 40 || "$real" != 40 ]]; then
  echo "FAIL: expected all 40 pods placed by both, got simulator=$sim real=$real" >&2
  exit 1
fi
echo "PASS"
