#!/usr/bin/env bash
# e2e_real_node_path_test: the node path's cases that need no fault injection,
# on a real node (tools/realnode: a real kubelet and containerd) with the
# chart installed as in e2e_real_node_chart_test. They used to run in
# e2e_node_path_test against the kubelet stand-in; here every share goes
# through the chart's kube-scheduler, the extender and the real kubelet's
# Allocate, and is checked from inside real containers (kubectl exec), the
# agent's /metrics, the pod's annotations and Events, and kubectl tessera top.
# One node, one helm install, reused by every case; each case deletes what it
# no longer needs.
#
#  1. A real node, Tessera's images and the fake-CUDA workload image imported.
#  2. helm install with three simulated 40 GiB A100s and the agent's flags
#     node.extraArgs passes: usage read every 100 ms, the usage annotation
#     written at most every 500 ms, region folders removed 1 s after their
#     pod left; tessera.io/isolation: none allowed in the test's namespace.
#  3. Two 30 GiB pods submitted together (they cannot share a 40 GiB GPU):
#     each runs on its own GPU, every container's environment inside is what
#     its tessera.io/assignment says (NVIDIA_VISIBLE_DEVICES, the per-GPU
#     TESSERA_GPU_UUID/MEM_LIMIT_MIB/CORE_PERCENT, TESSERA_GPU_COUNT,
#     TESSERA_POD, TESSERA_CONTAINER; tessera.io/allocated names the assigned
#     containers), and later reconciliation passes against the kubelet's
#     pod-resources count no mismatch.
#  4. Region clean-up: the first pod deleted, its folder under the node's
#     region root (as the host sees it: realnode.sh binds the node's
#     /run/tessera to its folder host/run-tessera) goes after the 1 s grace,
#     tessera_node_region_folders_removed_total counts 1, and the second
#     pod's folder stays through several passes.
#  5. A container spanning two GPUs takes them whole and sees them in the
#     assignment's order (TESSERA_GPU_COUNT=2, NVIDIA_VISIBLE_DEVICES and
#     TESSERA_GPU_UUID_0/1); a neighbour shares the third GPU.
#  6. A pod with an init container and two GPU containers: the init
#     container (its log: its environment) gets no share and no TESSERA_*
#     variable; each regular container sees its own limits (the library's
#     cuMemGetInfo total inside); tessera.io/allocated is "server,sidecar".
#  7. Burst: a pod asking 20 % with tessera.io/gpu-core-limit "60" and an
#     80 % pod on one GPU (the trainer of 5 holds the other two whole).
#     Processes launching zero-length kernels (fake_cuda_client spin,
#     FAKE_CUDA_KERNEL_US=0) run in the containers through kubectl exec; the
#     burst container's granted ratio on /metrics is 0.6 alone, 0.2 while the
#     owner runs (the owner's 0.8), 0.6 once it stops. Each process is
#     stopped inside its container with SIGTERM and must exit 0.
#  8. Usage: a process holds 300 MiB (plus its context) of a 1024 MiB share,
#     a second one asking 900 MiB is refused (exit 7, CUDA_ERROR_OUT_OF_MEMORY);
#     the container series (used, limit, core share, OOM refusals) and the
#     GPU's (total, used, allocated, containers) say exactly that; the pod
#     gets a TesseraOOMRefused Event naming "1024 MiB" and a tessera.io/usage
#     annotation with what it holds, an idle pod beside it none; `kubectl
#     tessera top -o json` lists the one pod with its use. The holder
#     stopped: used goes to 0, the peak stays (holder plus the refused
#     process's context).
#  9. A pod with tessera.io/isolation: none in this namespace (which the
#     install's extender.isolationNoneNamespaces names) runs with its GPU and
#     its share's numbers but no library (no /etc/ld.so.preload, no region:
#     the fake driver's whole card shows); the same pod in default stays
#     Pending, its FailedScheduling Event naming the namespace.
# 10. MPS turned on by helm upgrade (node.mps.mode=on, the stand-in control
#     program of tests/fake_mps through node.extraVolumes): the Node says
#     every GPU runs MPS, and so does tessera_gpu_mps_running; a pod annotated tessera.io/isolation: mps gets
#     MPS's variables, its GPU's daemon pipe folder, and the daemons'
#     /dev/shm (it sees the stand-in daemon's file there, and what it writes
#     lands in node.mps.shm on the node); a pod without MPS keeps its own.
# 11. Reconciliation still counts no mismatch; helm uninstall; realnode.sh
#     down leaves nothing.
#
# e2e_real_node_chart_test already shows the table form of kubectl tessera
# top and the usage annotation's presence for a Deployment; this test checks
# the values node_path_test checked.
#
# Exit 77 (skipped) without root, the image archives (unless
# TESSERA_REQUIRE_IMAGES=1) or the fake CUDA client (sanitizer builds).
set -euo pipefail
node=rn-path
ns=real-node-path-e2e
work="$TESSERA_TEST_CLUSTER_DIR/real-node-path-test"
# shellcheck source=tests/e2e/real_node_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/real_node_lib.sh"
rn_preflight --needs-client
a100=40960
context=256   # MiB the library charges each process's CUDA context (its default)
uuid() { echo "GPU-fa4e0000-0000-4000-8000-0000000000d$1"; }

# --- Pods --------------------------------------------------------------------
# ctr NAME GPUS MIB CORE [ARG...]: one container (JSON) with the GPU limits
# the stand-in suite's GpuPod wrote (0: not asked); runs ARGs, by default sleeps.
ctr() {
  local name="$1" gpus="$2" mib="$3" core="$4"; shift 4
  python3 - "$name" "$gpus" "$mib" "$core" "$workload_image" "$a100" "$@" <<'PY'
import json, sys
name, gpus, mib, core, image, card = sys.argv[1:7]
limits = {k: v for k, v in (("tessera.io/gpu", gpus), ("tessera.io/gpu-mem", mib), ("tessera.io/gpu-core", core)) if v != "0"}
print(json.dumps({"name": name, "image": image, "imagePullPolicy": "Never",
                  "command": sys.argv[7:] or ["sleep", "3600"],
                  # The fake driver's device: a 40 GiB GPU, as the node's list says.
                  "env": [{"name": "FAKE_CUDA_MEM_MIB", "value": card}],
                  "resources": {"limits": limits}}))
PY
}
# create_pod NAME ANNOTATIONS_JSON INIT_CONTAINERS_JSON CONTAINER_JSON...
create_pod() {
  local name="$1" annotations="$2" inits="$3"; shift 3
  python3 - "$name" "$node" "$annotations" "$inits" "$@" <<'PY' | "$kubectl" -n "$ns" create -f - > /dev/null
import json, sys
name, node, annotations, inits = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
spec = {"schedulerName": "tessera-scheduler", "terminationGracePeriodSeconds": 0,
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [json.loads(c) for c in sys.argv[5:]]}
if inits: spec["initContainers"] = inits
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "annotations": annotations}, "spec": spec}))
PY
}
delete_pods() {  # NAME...: deleted, and gone
  "$kubectl" -n "$ns" delete pod "$@" --wait=true --timeout=90s > /dev/null
}
ready() {  # NAME...: each Ready (its containers started)
  local p
  for p in "$@"; do
    "$kubectl" -n "$ns" wait --for=condition=Ready "pod/$p" --timeout=120s > /dev/null \
      || fail "pod $p not Ready: $("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.status}')"
  done
}
assigned() {  # POD [CONTAINER]: "INDEX UUID" per line of the container's GPUs (the first container's by default)
  "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.metadata.annotations.tessera\.io/assignment}' \
    | python3 -c 'import json, sys
cs = json.load(sys.stdin)["containers"]
c = next(c for c in cs if c["name"] == sys.argv[1]) if sys.argv[1] else cs[0]
for g in c["gpus"]: print(g["index"], g["uuid"])' "${2:-}"
}
uid_of() { "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.metadata.uid}'; }

# as_assigned POD: every regular container's environment, read inside it, is
# what the pod's assignment says (node_path_test's Mismatches, from inside):
# a container with a share has its GPUs in the assignment's order and their
# limits; one without has no TESSERA_* variable and no NVIDIA_VISIBLE_DEVICES;
# tessera.io/allocated names exactly the containers with a share.
as_assigned() {
  local p="$1" c problems
  "$kubectl" -n "$ns" get pod "$p" -o json > "$work/$p.json"
  for c in $("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.spec.containers[*].name}'); do
    "$kubectl" -n "$ns" exec "$p" -c "$c" -- env > "$work/$p.$c.env"
  done
  problems="$(python3 - "$work" "$p" <<'PY'
import json, sys
work, name = sys.argv[1:3]
pod = json.load(open(f"{work}/{name}.json"))
meta = pod["metadata"]
ann = meta.get("annotations", {})
try:
    assigned = {c["name"]: c["gpus"] for c in json.loads(ann["tessera.io/assignment"])["containers"]}
except (KeyError, ValueError) as e:
    sys.exit(print(f"no readable tessera.io/assignment: {e!r}"))
def percent(milli): return str(milli // 10) + (f".{milli % 10}" if milli % 10 else "")
containers = [c["name"] for c in pod["spec"]["containers"]]
problems = []
for c in containers:
    env = dict(l.split("=", 1) for l in open(f"{work}/{name}.{c}.env").read().splitlines() if "=" in l)
    if c not in assigned:
        got = sorted(k for k in env if k.startswith("TESSERA_") or k == "NVIDIA_VISIBLE_DEVICES")
        if got: problems.append(f"[{c}] has no share but got {got}")
        continue
    gpus = assigned[c]
    want = {"NVIDIA_VISIBLE_DEVICES": ",".join(g["uuid"] for g in gpus), "TESSERA_GPU_COUNT": str(len(gpus)),
            "TESSERA_POD": f"{meta['namespace']}/{name}", "TESSERA_CONTAINER": c}
    for i, g in enumerate(gpus):
        want[f"TESSERA_GPU_UUID_{i}"] = g["uuid"]
        want[f"TESSERA_GPU_MEM_LIMIT_MIB_{i}"] = str(g["memMiB"])
        want[f"TESSERA_GPU_CORE_PERCENT_{i}"] = percent(g["coreMilli"])
    problems += [f"[{c}] {k}: got {env.get(k)!r}, want {v!r}" for k, v in want.items() if env.get(k) != v]
problems += [f"[{c}] assigned but not a regular container" for c in assigned if c not in containers]
allocated = ann.get("tessera.io/allocated", "")
if sorted(allocated.split(",")) != sorted(assigned):
    problems.append(f"tessera.io/allocated is {allocated!r}; the assignment names {sorted(assigned)}")
print("\n".join(problems))
PY
)"
  [[ -z "$problems" ]] || fail "$p differs from its assignment: $problems"
  echo "$p: as assigned: $(python3 -c 'import json, sys; print(json.load(sys.stdin)["metadata"]["annotations"]["tessera.io/assignment"])' < "$work/$p.json")"
}

# no_mismatches: two more reconciliation passes (every 2 s) and still none.
no_mismatches() {
  local runs; runs="$(agent_metric tessera_node_reconcile_runs_total)"
  for _ in $(seq 100); do (($(agent_metric tessera_node_reconcile_runs_total) >= runs + 2)) && break; sleep 0.2; done
  (($(agent_metric tessera_node_reconcile_runs_total) >= runs + 2)) || fail "no two reconciliation passes after $runs"
  [[ "$(agent_metric tessera_node_allocation_mismatches_total)" == 0 ]] \
    || fail "reconciliation counted $(agent_metric tessera_node_allocation_mismatches_total) mismatches; see the agent's log"
  echo "reconciliation: $(agent_metric tessera_node_reconcile_runs_total) passes, no mismatch"
}

# --- Processes in the containers ----------------------------------------------
# bg_start POD NAME ARG...: runs ARG... in POD's container in the background
# (kubectl exec returns at once): its output in /tmp/NAME.log, its pid in
# /tmp/NAME.pid, its exit status in /tmp/NAME.rc once it ends.
bg_start() {
  local p="$1" n="$2"; shift 2
  "$kubectl" -n "$ns" exec "$p" -- sh -c '
    n="$1"; shift
    ( "$@" > "/tmp/$n.log" 2>&1 & echo $! > "/tmp/$n.pid"; wait $!; echo $? > "/tmp/$n.rc" ) < /dev/null > /dev/null 2>&1 &
    ' sh "$n" "$@"
  for _ in $(seq 100); do
    "$kubectl" -n "$ns" exec "$p" -- cat "/tmp/$n.log" 2>/dev/null | grep -qx ready && return 0
    sleep 0.2
  done
  fail "$n in $p did not print ready: $("$kubectl" -n "$ns" exec "$p" -- cat "/tmp/$n.log" "/tmp/$n.rc" 2>&1)"
}
# bg_stop POD NAME: SIGTERM inside the container; it must exit 0.
bg_stop() {
  local p="$1" n="$2" rc=""
  "$kubectl" -n "$ns" exec "$p" -- sh -c 'kill -TERM "$(cat "/tmp/$1.pid")"' sh "$n"
  for _ in $(seq 100); do
    rc="$("$kubectl" -n "$ns" exec "$p" -- cat "/tmp/$n.rc" 2>/dev/null || true)"
    [[ -n "$rc" ]] && break
    sleep 0.2
  done
  [[ "$rc" == 0 ]] || fail "$n in $p ended '$rc' after SIGTERM, not 0"
}

step "1. a real node, Tessera's images and the workload image imported"
rn_begin

step "2. helm install: three simulated 40 GiB A100s; usage every 100 ms, region clean-up after 1 s"
rn_helm_install 24 "gpus:
- {uuid: $(uuid 0), model: A100, memMiB: $a100, sms: 108, numa: 0, healthy: true}
- {uuid: $(uuid 1), model: A100, memMiB: $a100, sms: 108, numa: 0, healthy: true}
- {uuid: $(uuid 2), model: A100, memMiB: $a100, sms: 108, numa: 0, healthy: true}" \
  --set-json 'node.extraArgs=["--usage-interval-ms=100","--usage-annotation-interval-ms=500","--region-gc-grace-seconds=1"]' \
  --set-json "extender.isolationNoneNamespaces=[\"$ns\"]"
"$kubectl" create namespace "$ns" > /dev/null
regions="$node_dir/host/run-tessera/regions"   # the chart's regionRoot, /var/run/tessera/regions, on the node

step "3. two same-size pods submitted together run on their own GPUs, as assigned"
t0=$SECONDS
# 30 GiB each: they cannot share a 40 GiB GPU, so the extender splits them.
create_pod first '{}' '[]' "$(ctr main 1 30720 30)"
create_pod second '{}' '[]' "$(ctr main 1 30720 30)"
ready first second
echo "both Running: $((SECONDS - t0)) s"
as_assigned first
as_assigned second
[[ "$(assigned first)" != "$(assigned second)" ]] || fail "first and second share GPU $(assigned first)"
no_mismatches

step "4. a deleted pod's region folder is removed after the grace; a live pod's stays"
gone="$regions/$(uid_of first)" stays="$regions/$(uid_of second)"
[[ -d "$gone/main" && -f "$gone/main.arbiter.json" ]] || fail "no region folder and arbiter record at $gone (Allocate makes them)"
[[ "$(agent_metric tessera_node_region_folders_removed_total)" == 0 ]] || fail "a region folder was removed before any pod was deleted"
t0=$SECONDS
delete_pods first
for _ in $(seq 150); do [[ -e "$gone" ]] || break; sleep 0.2; done
[[ ! -e "$gone" ]] || fail "$gone is still there $((SECONDS - t0)) s after its pod was deleted"
echo "the deleted pod's folder removed $((SECONDS - t0)) s after the delete began"
wait_metric tessera_node_region_folders_removed_total 1 "the first pod's folder was removed"
sleep 3   # several 1 s passes
[[ -f "$stays/main.arbiter.json" ]] || fail "the live pod's region folder $stays went"
echo "$stays stays; tessera_node_region_folders_removed_total 1"
delete_pods second

step "5. a container spanning two GPUs sees both in the assignment's order; a neighbour shares the third"
# A container spanning GPUs takes them whole (memory: the whole card).
create_pod trainer '{}' '[]' "$(ctr train 2 0 100)"
create_pod neighbour '{}' '[]' "$(ctr main 1 8192 20)"
ready trainer neighbour
as_assigned trainer
as_assigned neighbour
mapfile -t train_gpus < <(assigned trainer | awk '{print $2}')
((${#train_gpus[@]} == 2)) && [[ "${train_gpus[0]}" != "${train_gpus[1]}" ]] \
  || fail "the trainer is assigned '${train_gpus[*]}', not two GPUs"
env="$("$kubectl" -n "$ns" exec trainer -- env)"
grep -qx TESSERA_GPU_COUNT=2 <<< "$env" || fail "the trainer does not see TESSERA_GPU_COUNT=2"
grep -qx "NVIDIA_VISIBLE_DEVICES=${train_gpus[0]},${train_gpus[1]}" <<< "$env" \
  || fail "the trainer sees $(grep NVIDIA_VISIBLE_DEVICES <<< "$env"), not ${train_gpus[0]},${train_gpus[1]} in the assignment's order"
third="$(assigned neighbour | awk '{print $2}')"
[[ "$third" != "${train_gpus[0]}" && "$third" != "${train_gpus[1]}" ]] || fail "the neighbour is on the trainer's GPU $third"
echo "trainer: ${train_gpus[*]} in order; neighbour on $third"

step "6. an init container and two GPU containers: each gets its own share, the init container none"
create_pod mixed '{}' "[$(ctr warm-up 0 0 0 env)]" "$(ctr server 1 8192 30)" "$(ctr sidecar 1 4096 20)"
ready mixed
as_assigned mixed
[[ "$("$kubectl" -n "$ns" get pod mixed -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')" == server,sidecar ]] \
  || fail "mixed is annotated tessera.io/allocated '$("$kubectl" -n "$ns" get pod mixed -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')', not server,sidecar"
init_env="$("$kubectl" -n "$ns" logs mixed -c warm-up)"
[[ -n "$init_env" ]] || fail "the init container's log (its environment) is empty"
! grep -E '^(TESSERA_|NVIDIA_VISIBLE_DEVICES=)' <<< "$init_env" || fail "the init container got a share's variables (above)"
for want in server:8192 sidecar:4096; do
  c="${want%%:*}" limit="${want#*:}"
  info="$("$kubectl" -n "$ns" exec mixed -c "$c" -- fake_cuda_client info)"
  [[ "${info#* }" == $((limit * mib)) ]] || fail "$c sees total ${info#* } bytes, not its $limit MiB"
done
echo "warm-up: no share; server sees 8192 MiB, sidecar 4096 MiB; allocated server,sidecar"
delete_pods neighbour mixed

step "7. burst: borrows idle time up to its ceiling beside an 80 % pod, and gives it back"
create_pod burst '{"tessera.io/gpu-core-limit": "60"}' '[]' "$(ctr main 1 1024 20)"
create_pod owner '{}' '[]' "$(ctr main 1 1024 80)"
ready burst owner
as_assigned burst
as_assigned owner
[[ "$(assigned burst)" == "$(assigned owner)" ]] || fail "burst ($(assigned burst)) and owner ($(assigned owner)) are not on one GPU"
granted() {  # POD: its container's granted compute ratio on /metrics
  agent_metric tessera_container_gpu_core_granted_ratio "pod=\"$1\""
}
wait_granted() {  # POD WANT WHAT
  local v=""
  for _ in $(seq 150); do
    v="$(granted "$1" || true)"
    [[ -n "$v" ]] && awk -v v="$v" -v w="$2" 'BEGIN {exit !(v - w < 1e-6 && w - v < 1e-6)}' && return 0
    sleep 0.2
  done
  fail "$3: $1's granted ratio is '$v', not $2"
}
bg_start burst borrower env FAKE_CUDA_KERNEL_US=0 fake_cuda_client spin
wait_granted burst 0.6 "the burst pod alone: its ceiling, not the whole GPU"
bg_start owner spinner env FAKE_CUDA_KERNEL_US=0 fake_cuda_client spin
wait_granted owner 0.8 "the owner running"
wait_granted burst 0.2 "the owner running: the loan taken back"
bg_stop owner spinner
wait_granted burst 0.6 "the owner stopped: the loan resumes"
bg_stop burst borrower
echo "granted to burst: 0.6 alone, 0.2 beside the owner's 0.8, 0.6 again; both processes stopped, exit 0"
delete_pods burst owner

step "8. usage reaches /metrics, the pod's annotation and Events, and kubectl tessera top"
create_pod user '{}' '[]' "$(ctr main 1 1024 30)"
create_pod idle '{}' '[]' "$(ctr main 1 2048 20)"
ready user idle
as_assigned user
as_assigned idle
read -r gpu share <<< "$(assigned user)"
# The trainer holds the other two GPUs whole: both pods are on the third.
[[ "$(assigned idle)" == "$gpu $share" ]] || fail "idle is on $(assigned idle), not beside user on $gpu $share"
held=$((300 + context))
bg_start user holder fake_cuda_client alloc 300 term
c="pod=\"user\""
wait_metric tessera_container_gpu_memory_used_bytes $((held * mib)) "the holder took 300 MiB" "$c"
# Once the holder holds its 300 MiB, 900 more pass the 1024 MiB share: refused
# (exit 7) after the greedy process's own context fitted.
rc=0; "$kubectl" -n "$ns" exec user -- fake_cuda_client alloc 900 exit > /dev/null 2>&1 || rc=$?
((rc == 7)) || fail "900 MiB beside the holder's $held MiB in a 1024 MiB share ended $rc, not CUDA_ERROR_OUT_OF_MEMORY's exit 7"
wait_metric tessera_container_gpu_memory_limit_bytes $((1024 * mib)) "the share of 1024 MiB" "$c"
wait_metric tessera_container_gpu_core_share_ratio 0.3 "the share of 30 %" "$c"
wait_metric tessera_container_gpu_oom_refusals_total 1 "the refused 900 MiB" "$c"
g="uuid=\"$share\""
wait_metric tessera_gpu_memory_total_bytes $((a100 * mib)) "the GPU's total" "$g"
wait_metric tessera_gpu_memory_used_bytes $((held * mib)) "the holder holds, the idle pod nothing" "$g"
wait_metric tessera_gpu_memory_allocated_bytes $(((1024 + 2048) * mib)) "the two shares" "$g"
wait_metric tessera_gpu_containers 2 "the two pods" "$g"
echo "/metrics: user holds $held of 1024 MiB at 0.3, 1 refusal; GPU $gpu: $held MiB used, 3072 allocated, 2 containers"
for _ in $(seq 50); do
  events="$("$kubectl" -n "$ns" get events --field-selector involvedObject.name=user,reason=TesseraOOMRefused -o 'jsonpath={.items[*].message}')"
  [[ -n "$events" ]] && break
  sleep 0.2
done
[[ "$events" == *"1024 MiB"* ]] || fail "no TesseraOOMRefused Event on user naming 1024 MiB: '$events'"
echo "Event TesseraOOMRefused: $events"
usage_of() {  # POD: "UUID MEM_USED_MIB" per GPU of its tessera.io/usage, "none" without one
  "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.metadata.annotations.tessera\.io/usage}' | python3 -c '
import json, sys
text = sys.stdin.read()
if not text: sys.exit(print("none"))
for c in json.loads(text)["containers"]:
    for g in c["gpus"]: print(c["name"], g["uuid"], g["memUsedMiB"])'
}
for _ in $(seq 100); do [[ "$(usage_of user)" == "main $share $held" ]] && break; sleep 0.2; done
[[ "$(usage_of user)" == "main $share $held" ]] || fail "user's tessera.io/usage says '$(usage_of user)', not main $share $held"
[[ "$(usage_of idle)" == none ]] || fail "idle, whose container runs no CUDA process, has usage '$(usage_of idle)'"
top="$("$TESSERA_BIN_DIR/kubectl-tessera" top -n "$ns" -o json)"
python3 -c '
import json, sys
rows = json.loads(sys.argv[1])["usage"]
assert [(r["pod"], r["memUsedMiB"]) for r in rows] == [("user", int(sys.argv[2]))], rows' "$top" "$held" \
  || fail "kubectl tessera top -o json does not list user alone with $held MiB: $top"
echo "tessera.io/usage on user: main $share $held MiB; none on idle; kubectl tessera top -o json agrees"
bg_stop user holder
wait_metric tessera_container_gpu_memory_used_bytes 0 "the holder exited" "$c"
# The peak: the holder's, with the refused process's context beside it.
wait_metric tessera_container_gpu_memory_peak_bytes $(((held + context) * mib)) "the holder exited" "$c"
echo "the holder stopped: used 0, peak $((held + context)) MiB"

step "9. tessera.io/isolation: none: in this namespace a share without the library; elsewhere Pending, saying why"
create_pod raw '{"tessera.io/isolation": "none"}' '[]' "$(ctr main 1 2048 10)"
ready raw
read -r _ raw_gpu <<< "$(assigned raw)"
env="$("$kubectl" -n "$ns" exec raw -- env)"
for want in "NVIDIA_VISIBLE_DEVICES=$raw_gpu" TESSERA_GPU_MEM_LIMIT_MIB_0=2048 TESSERA_GPU_CORE_PERCENT_0=10; do
  grep -qxF "$want" <<< "$env" || fail "the unenforced container has no $want: $(grep -E '^(TESSERA_|NVIDIA_)' <<< "$env")"
done
if grep -q '^TESSERA_REGION_DIR=' <<< "$env"; then fail "the unenforced container got a region"; fi
if "$kubectl" -n "$ns" exec raw -- cat /etc/ld.so.preload > /dev/null 2>&1; then fail "the unenforced container has /etc/ld.so.preload"; fi
info="$("$kubectl" -n "$ns" exec raw -- fake_cuda_client info)"
[[ "${info#* }" == $((a100 * mib)) ]] || fail "the unenforced container sees total ${info#* } bytes, not the whole card"
[[ "$("$kubectl" -n "$ns" get pod raw -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')" == main ]] \
  || fail "raw is not annotated tessera.io/allocated main"
python3 - "$(ctr main 1 2048 10)" <<'PY' | "$kubectl" -n default create -f - > /dev/null
import json, sys
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "tessera-path-e2e-raw", "annotations": {"tessera.io/isolation": "none"}},
                  "spec": {"schedulerName": "tessera-scheduler", "terminationGracePeriodSeconds": 0,
                           "containers": [json.loads(sys.argv[1])]}}))
PY
for _ in $(seq 100); do
  refused="$("$kubectl" -n default get events --field-selector involvedObject.name=tessera-path-e2e-raw,reason=FailedScheduling -o 'jsonpath={.items[*].message}')"
  [[ -n "$refused" ]] && break
  sleep 0.2
done
"$kubectl" -n default delete pod tessera-path-e2e-raw --wait=true --timeout=60s > /dev/null
[[ "$refused" == *"tessera.io/isolation: none (a share placed but not enforced) is not allowed in namespace default"* ]] \
  || fail "the unenforced pod in default was not refused naming its namespace: '$refused'"
echo "raw on $raw_gpu: its GPU, 2048 MiB and 10 % as numbers, no library (it sees the whole card); in default: Pending, refused"
delete_pods raw

step "10. MPS on by helm upgrade: an MPS container shares its GPU daemon's /dev/shm and pipe folder"
# No GPU here: the stand-in control program (tests/fake_mps) is mounted from
# the source tree through the chart's extra volumes; FAKE_MPS_SHM_MARKER has
# each stand-in daemon keep a file named after its GPU in its /dev/shm, where
# a real MPS server keeps the memory it shares with its clients.
old_agent="$(agent_pod)"
"$helm" upgrade "$rel" "$chart" --namespace "$relns" --reuse-values --set node.mps.mode=on \
  --set node.mps.control=/opt/fake-mps/nvidia-cuda-mps-control \
  --set-json "node.extraVolumes=[{\"name\":\"fake-mps\",\"hostPath\":{\"path\":\"$src/tests/fake_mps\",\"type\":\"Directory\"}}]" \
  --set-json 'node.extraVolumeMounts=[{"name":"fake-mps","mountPath":"/opt/fake-mps","readOnly":true}]' \
  --set-json 'node.extraEnv=[{"name":"FAKE_MPS_SHM_MARKER","value":"fake-mps-daemon"}]' > /dev/null
"$kubectl" -n "$relns" rollout status daemonset/tessera-node --timeout=90s > /dev/null
for _ in $(seq 150); do
  "$kubectl" -n "$relns" get pod "$old_agent" > /dev/null 2>&1 || break
  sleep 0.2
done
mps_flags() {  # the GPUs the Node's inventory says run MPS
  "$kubectl" get node "$node" -o 'jsonpath={.metadata.annotations.tessera\.io/gpu-inventory}' \
    | python3 -c 'import json, sys; print(" ".join(sorted(g["uuid"] for g in json.load(sys.stdin)["gpus"] if g.get("mps"))))'
}
want_flags="$(uuid 0) $(uuid 1) $(uuid 2)"
for _ in $(seq 150); do [[ "$(mps_flags)" == "$want_flags" ]] && break; sleep 0.2; done
[[ "$(mps_flags)" == "$want_flags" ]] || fail "the Node says MPS runs on '$(mps_flags)', not on every GPU"
for i in 0 1 2; do wait_metric tessera_gpu_mps_running 1 "MPS turned on" "uuid=\"$(uuid $i)\""; done
agent_log="$("$kubectl" -n "$relns" logs "$(agent_pod)" -c tessera-node)"
grep -F 'MPS on (--mps=on found /opt/fake-mps/nvidia-cuda-mps-control; MPS containers get /var/run/tessera/mps/shm at /dev/shm)' \
  <<< "$agent_log" > /dev/null || fail "the agent did not log MPS on with the chart's shared memory: $(grep -F MPS <<< "$agent_log")"
shm_host="$node_dir/host/run-tessera/mps/shm"   # node.mps.shm, /var/run/tessera/mps/shm, on the node
create_pod mps '{"tessera.io/isolation": "mps"}' '[]' "$(ctr main 1 4096 20)"
ready mps
read -r _ mps_gpu <<< "$(assigned mps)"
env="$("$kubectl" -n "$ns" exec mps -- env)"
for want in CUDA_MPS_PIPE_DIRECTORY=/var/run/tessera/mps CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20 \
            CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M TESSERA_GPU_MEM_LIMIT_MIB_0=4096 TESSERA_GPU_CORE_PERCENT_0=100; do
  grep -qxF "$want" <<< "$env" || fail "the MPS container has no $want: $(grep -E '^(CUDA_MPS|TESSERA_GPU_)' <<< "$env")"
done
# Its pipe folder is its GPU's daemon's (the stand-in wrote its CUDA_VISIBLE_DEVICES there) ...
[[ "$("$kubectl" -n "$ns" exec mps -- cat /var/run/tessera/mps/devices)" == "$mps_gpu" ]] \
  || fail "the MPS container's pipe folder is not GPU $mps_gpu's daemon's"
# ... its /dev/shm is the daemons' (it sees the stand-in's file; what it writes lands in node.mps.shm) ...
shm="$("$kubectl" -n "$ns" exec mps -- ls /dev/shm)"
grep -qxF "fake-mps-daemon.$mps_gpu" <<< "$shm" || fail "the MPS container's /dev/shm holds '$shm', not its daemon's file"
"$kubectl" -n "$ns" exec mps -- sh -c 'echo client > /dev/shm/from-mps-client'
[[ "$(cat "$shm_host/from-mps-client" 2>/dev/null)" == client ]] || fail "what the MPS container wrote in /dev/shm is not in $shm_host"
# ... while a pod without MPS keeps a /dev/shm of its own.
if "$kubectl" -n "$ns" exec user -- ls /dev/shm | grep -q fake-mps-daemon; then fail "user (no MPS) sees the daemons' /dev/shm"; fi
echo "MPS on every GPU; mps on $mps_gpu: MPS's variables, its daemon's pipe folder and /dev/shm ($(wc -w <<< "$shm") files); user's /dev/shm its own"
rm -f "$shm_host/from-mps-client"
delete_pods mps

step "11. no mismatch after all of it; helm uninstall; realnode.sh down leaves nothing"
no_mismatches
rn_end
