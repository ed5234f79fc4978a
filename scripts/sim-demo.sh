#!/usr/bin/env bash
# The simulator's demo: replay the small synthetic trace
# shipped in examples/synthetic through every placement policy (FGD protocol,
# 5 seeds), print the comparison and draw the curves.
# Usage: scripts/sim-demo.sh [BUILD_DIR]   (make sim-demo builds first)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SIM="$BUILD/src/sim/tessera-sim"
OUT=out/demo
[[ -x $SIM ]] || { echo "demo: $SIM not built; run 'make sim-demo'" >&2; exit 1; }

echo "== tessera-sim on examples/synthetic (50 nodes, 208 GPUs), every policy, seeds 1-5"
"$SIM" fgd --nodes examples/synthetic/nodes.csv --pods examples/synthetic/pods.csv \
  --policy all --seeds 1-5 --tune 1.3 --out "$OUT" --workload synthetic --quiet
echo
if command -v gnuplot >/dev/null; then
  "$SIM" plot --in "$OUT" --out "$OUT/alloc.png" --title "synthetic trace: GPU allocation vs arrived load"
fi
echo "results: $OUT/alloc.csv, $OUT/frag.csv, $OUT/frag_ratio.csv"
