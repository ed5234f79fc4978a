#!/usr/bin/env bash
# Captures `kubectl tessera inspect`, `inspect -d`, `inspect pod` and `top`
# (and, at 200 columns, `inspect -o wide`) on a demo-like cluster
# (examples/cluster/nodes.yaml, examples/workloads) inside tmux at 80 and 200
# columns, into docs/kubectl-tessera-80cols.txt and -200cols.txt, so a person
# can check that the columns stay aligned at both widths. The plugin runs on
# a real terminal there: TIOCGWINSZ sets its width, and colour is on (the
# captures keep only the text).
# Usage: scripts/kubectl-tessera-captures.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN="$BUILD/bin"
DIR=out/kubectl-captures
SOCKET=tessera-captures
for b in "$BIN/tessera-scheduler" "$BIN/tessera-dev" "$BIN/kubectl-tessera" tools/controlplane/bin/kubectl; do
  [[ -x $b ]] || { echo "captures: $b not built" >&2; exit 1; }
done
command -v tmux >/dev/null || { echo "captures: tmux not installed (scripts/setup.sh installs it)" >&2; exit 1; }

tools/controlplane/cluster-down.sh "$DIR" >/dev/null 2>&1 || true
tools/controlplane/cluster-up.sh "$DIR" >/dev/null
teardown() {
  tmux -L "$SOCKET" kill-server 2>/dev/null || true
  tools/controlplane/cluster-down.sh "$DIR" >/dev/null
}
trap teardown EXIT
# shellcheck disable=SC1091
source "$DIR/cluster.env"
setsid "$BIN/tessera-scheduler" --kubeconfig "$KUBECONFIG" --port "$TESSERA_EXTENDER_PORT" \
  >"$DIR/logs/tessera-scheduler.log" 2>&1 </dev/null &
echo $! > "$DIR/pids/tessera-scheduler.pid"
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$TESSERA_EXTENDER_PORT/readyz" >/dev/null && break
  sleep 0.2
done
"$BIN/tessera-dev" create-nodes examples/cluster/nodes.yaml >/dev/null
for f in examples/workloads/*.yaml; do tools/controlplane/bin/kubectl apply -f "$f" >/dev/null; done
"$BIN/tessera-dev" wait-scheduled --namespace default --timeout 60

path="$PWD/$BIN:$PWD/tools/controlplane/bin:$PATH"
kubeconfig=$(realpath "$KUBECONFIG")
for cols in 80 200; do
  out="docs/kubectl-tessera-${cols}cols.txt"
  tmux -L "$SOCKET" new-session -d -s "c$cols" -x "$cols" -y 80 \
    "env -u NO_COLOR PATH='$path' KUBECONFIG='$kubeconfig' PS1='$ ' TERM=xterm-256color bash --norc --noprofile"
  sleep 0.5  # the shell's first prompt
  cmds=("kubectl tessera inspect" "kubectl tessera inspect -d a100-0" "kubectl tessera inspect pod rag-gateway"
        "kubectl tessera top")
  # -o wide needs about 90 columns; at 80 its lines would wrap.
  ((cols >= 120)) && cmds+=("kubectl tessera inspect -o wide")
  for cmd in "${cmds[@]}"; do
    tmux -L "$SOCKET" send-keys -t "c$cols" "$cmd" Enter
    sleep 1.5
  done
  {
    echo "# kubectl tessera under tmux, ${cols} columns (scripts/kubectl-tessera-captures.sh)"
    tmux -L "$SOCKET" capture-pane -p -t "c$cols" | sed -e 's/[[:space:]]*$//' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
  } > "$out"
  echo "captures: wrote $out"
done
