#!/usr/bin/env bash
# Stops a cluster started by cluster-up.sh DIR (and anything else recorded in
# DIR/pids, such as a tessera-scheduler a test started there): SIGTERM, then
# SIGKILL after 10 s, to each process's whole session. Real nodes still up in
# DIR/nodes (tools/realnode) go down first. Leaves logs in place; exits
# non-zero if a process survives.
set -uo pipefail
dir="${1:?usage: cluster-down.sh DIR}"
[[ -d "$dir/pids" ]] || { echo "cluster-down: nothing running in $dir"; exit 0; }

rc=0
for slot in "$dir"/nodes/*/slot; do
  [[ -e "$slot" ]] || continue
  "$(dirname "${BASH_SOURCE[0]}")/../realnode/realnode.sh" down "$dir" "$(basename "$(dirname "$slot")")" || rc=1
done

alive() { kill -0 "$1" 2>/dev/null; }
# Stop in reverse start order: clients first, etcd last.
order=(); for f in "$dir"/pids/*.pid; do [[ -e "$f" ]] && order+=("$f"); done
sorted=()
for f in "${order[@]}"; do case "$(basename "$f")" in etcd.pid|kube-apiserver.pid) ;; *) sorted+=("$f");; esac; done
for f in "$dir/pids/kube-apiserver.pid" "$dir/pids/etcd.pid"; do [[ -e "$f" ]] && sorted+=("$f"); done

for f in "${sorted[@]}"; do
  pid="$(cat "$f")"
  if alive "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
      sleep 0.2
    fi
    if alive "$pid"; then echo "cluster-down: $(basename "$f" .pid) (pid $pid) survived SIGKILL" >&2; rc=1; continue; fi
  fi
  rm -f "$f"
done
rm -rf "$dir/etcd-data"
echo "cluster down: $dir"
exit $rc
