#!/usr/bin/env bash
# Starts kube-scheduler for a cluster made by cluster-up.sh DIR, with the
# configuration it wrote (DIR/scheduler-config.yaml), and waits for /healthz.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(cd "${1:?usage: scheduler-up.sh DIR}" && pwd)"
bin="${TESSERA_CONTROLPLANE_BIN:-$here/bin}"
[[ -f "$dir/scheduler-config.yaml" ]] || { echo "scheduler-up: no $dir/scheduler-config.yaml; run cluster-up.sh first" >&2; exit 1; }
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# Unschedulable pods are retried after 10 s here, not kube-scheduler's 5 min: a
# safety net on this quiet cluster should tessera-scheduler's own wake-up of
# pods it turned away just before a share was freed ever miss one
# (docs/scheduler-extender.md). SCHEDULER_UNSCHEDULABLE_RETRY=5m tests without it.
# /metrics is open to anyone on the loopback (bench/scheduling_throughput
# reads it from DIR/kube-scheduler.port), as /healthz is.
setsid "$bin/kube-scheduler" --config "$dir/scheduler-config.yaml" \
  --bind-address 127.0.0.1 --secure-port "$port" \
  --authorization-always-allow-paths /healthz,/readyz,/livez,/metrics \
  --pod-max-in-unschedulable-pods-duration "${SCHEDULER_UNSCHEDULABLE_RETRY:-10s}" \
  --authentication-skip-lookup --authentication-tolerate-lookup-failure --v=2 \
  >"$dir/logs/kube-scheduler.log" 2>&1 </dev/null &
echo $! > "$dir/pids/kube-scheduler.pid"
echo "$port" > "$dir/kube-scheduler.port"
deadline=$((SECONDS + 60))
until curl -sfk "https://127.0.0.1:${port}/healthz" >/dev/null 2>&1; do
  if ! kill -0 "$(cat "$dir/pids/kube-scheduler.pid")" 2>/dev/null || ((SECONDS >= deadline)); then
    echo "scheduler-up: kube-scheduler did not become healthy; last lines of $dir/logs/kube-scheduler.log:" >&2
    tail -n 20 "$dir/logs/kube-scheduler.log" >&2
    exit 1
  fi
  sleep 0.2
done
echo "kube-scheduler up (config $dir/scheduler-config.yaml)"
