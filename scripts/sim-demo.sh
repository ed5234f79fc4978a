#!/usr/bin/env bash
# The simulator's demo: replay the small synthetic trace
# shipped in examples/synthetic through every placement policy (FGD protocol,
# 5 seeds), print the comparison and draw the curves; then replay it in time
# mode (pods leave at their deletion time) with tessera and
# tessera-interference (docs/simulator.md).
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
echo
echo "== time mode: tessera vs tessera-interference, seeds 1-5 (modelled utilization and interference)"
PLOT=()
command -v gnuplot >/dev/null && PLOT=(--plot)
"$SIM" time --nodes examples/synthetic/nodes.csv --pods examples/synthetic/pods.csv \
  --policy tessera,tessera-interference,bestfit --seeds 1-5 --out "$OUT/time" --workload synthetic --quiet "${PLOT[@]}"
echo "results: $OUT/time/time.csv, $OUT/time/series.csv${PLOT:+, $OUT/time/time.png}"
