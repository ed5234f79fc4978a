#!/usr/bin/env bash
# e2e_real_node_dra_test: tessera-node as the DRA driver gpu.tessera.io on a
# real node (tools/realnode: kubelet 1.36 and containerd 2 with CDI), with
# the chart installed as docs/install.md says plus dra.enabled=true. Every
# claim is allocated by the cluster's kube-scheduler (its DRA allocator,
# consumable capacity), prepared by the real kubelet's DRA manager calling
# the agent's plugin, and reaches the container through containerd's CDI.
#
#  1. A real node, Tessera's images and the fake-CUDA workload image imported.
#  2. helm install, dra.enabled, one simulated 40 GiB A100: the chart's
#     DeviceClass, and the node's ResourceSlice with the GPU as a shareable
#     device (memory 40Gi, compute 100).
#  3. examples/dra/gpu-share-claim.yaml (its image and command swapped for
#     the workload image): its claim is allocated 8Gi and 30 of gpu-0, the
#     container starts with the claim's CDI device: TESSERA_* limits,
#     NVIDIA_VISIBLE_DEVICES, the library and /etc/ld.so.preload mounted
#     read-only; inside it the library reports 8192 MiB as the GPU's total
#     and refuses 9000 MiB (exit 7, CUDA_ERROR_OUT_OF_MEMORY) while 7000 MiB
#     fit; the CDI spec and the claim's region are on the node; the pod
#     shows the device Healthy (the agent's health stream).
#  4. A second claim (2Gi, 30, selecting model A100 as docs/user-guide.md
#     shows) shares gpu-0: both claims' allocations name the device with
#     their own shareID; it sees 2048 MiB.
#  5. A third claim (4Gi, 50) does not fit beside them (compute 110 %): it
#     waits Pending with kube-scheduler's reason.
#  6. A claim for 48Gi (more than any GPU has) waits Pending with
#     kube-scheduler's reason, the same as the third's; tessera-scheduler
#     tells it apart with a TesseraClaimUnsatisfiable Event naming the
#     claim, the 48Gi and the largest GPU (and gives the third none).
#  7. The second pod deleted: the kubelet unprepares its claim (its CDI spec
#     and region go), the third claim is allocated and its container sees
#     4096 MiB. The kubelet restarted: it deletes the node's slices as
#     it starts, and the agent publishes its slice again.
#  8. A claim allocated from that slice; the agent restarted between
#     NodePrepareResources and the container's start (the pod held in an
#     init container meanwhile): the container starts after the restart
#     with its limits.
#  9. The pods deleted: the kubelet unprepares every claim, no CDI spec and
#     no claim region stays on the node.
# 10. A mixed node: a device-plugin pod (tessera.io/gpu through
#     tessera-scheduler's extender, 16 GiB and 40 %) runs on gpu-0; the slice
#     offers claims what it leaves (memory 24Gi, compute 60); a claim pod
#     (8Gi, 30) runs beside it on the same GPU, each seeing its own limit.
# 11. A claim (20Gi) that would over-commit the GPU's memory with both waits
#     with kube-scheduler's reason (16Gi left in the slice); the
#     device-plugin pod deleted, the agent's pod LIST drops it from the
#     node's book, the slice offers the whole card again and the claim runs.
# 12. A device-plugin pod holding the whole card: the slice taints gpu-0
#     NoSchedule and a 1Gi claim waits; the pod deleted, the taint goes and
#     the claim runs. helm uninstall; the node down leaves nothing.
#
# Exit 77 (skipped) without root, the image archives (unless
# TESSERA_REQUIRE_IMAGES=1) or the fake CUDA client (sanitizer builds).
set -euo pipefail
node=rn-dra
ns=real-node-dra-e2e
work="$TESSERA_TEST_CLUSTER_DIR/real-node-dra-test"
# shellcheck source=tests/e2e/real_node_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/real_node_lib.sh"
rn_preflight --needs-client
# A command that fails outside a check names itself (set -e would end the test silently).
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"' ERR
a100=40960
gpu=GPU-fa4e0000-0000-4000-8000-0000000000f0
slice="$node-gpu.tessera.io"

# --- Claims and pods -----------------------------------------------------------
# claim_pod NAME MEMORY COMPUTE [hold] [MODEL]: a ResourceClaimTemplate NAME
# asking one GPU of class gpu.tessera.io with these capacities (and, with
# MODEL, a selector on the model attribute as docs/user-guide.md writes it),
# and pod NAME using it in container main (the workload image, asleep). With
# `hold`, an init container first waits for /tmp/go in itself.
claim_pod() {
  python3 - "$1" "$2" "$3" "${4:-}" "${5:-}" "$workload_image" "$a100" <<'PY' | "$kubectl" -n "$ns" create -f - > /dev/null
import json, sys
name, memory, compute, hold, model, image, card = sys.argv[1:8]
request = {"deviceClassName": "gpu.tessera.io", "capacity": {"requests": {"memory": memory, "compute": compute}}}
if model:
    request["selectors"] = [{"cel": {"expression": f'device.attributes["gpu.tessera.io"].model == "{model}"'}}]
template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}}}
container = {"name": "main", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"],
             "env": [{"name": "FAKE_CUDA_MEM_MIB", "value": card}], "resources": {"claims": [{"name": "gpu"}]}}
spec = {"terminationGracePeriodSeconds": 0, "containers": [container],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}]}
if hold:
    spec["initContainers"] = [{"name": "hold", "image": image, "imagePullPolicy": "Never",
                               "command": ["sh", "-c", "until [ -e /tmp/go ]; do sleep 0.2; done"]}]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [template, pod]}))
PY
}
ready() {  # NAME...: each Ready (its containers started)
  local p
  for p in "$@"; do
    "$kubectl" -n "$ns" wait --for=condition=Ready "pod/$p" --timeout=90s > /dev/null \
      || fail "pod $p not Ready: $("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.status}')"
  done
}
claim_of() { "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}'; }
assigned_uuid() {  # POD: the GPU uuid of its tessera.io/assignment (one container, one GPU)
  "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.metadata.annotations.tessera\.io/assignment}' \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["containers"][0]["gpus"][0]["uuid"])'
}
claim_uid() { "$kubectl" -n "$ns" get resourceclaim "$(claim_of "$1")" -o 'jsonpath={.metadata.uid}'; }
# allocation POD: "DEVICE POOL MEMORY COMPUTE SHAREID" of its claim's one result.
allocation() {
  "$kubectl" -n "$ns" get resourceclaim "$(claim_of "$1")" -o json | python3 -c '
import json, sys
rs = json.load(sys.stdin)["status"]["allocation"]["devices"]["results"]
assert len(rs) == 1, rs
r = rs[0]
assert r["driver"] == "gpu.tessera.io", r
print(r["device"], r["pool"], r["consumedCapacity"]["memory"], r["consumedCapacity"]["compute"], r.get("shareID", ""))'
}
# sees POD MIB: the library inside POD reports MIB as the GPU's total.
sees() {
  local info; info="$("$kubectl" -n "$ns" exec "$1" -- fake_cuda_client info 2> /dev/null)" || true
  [[ "${info#* }" == $(($2 * mib)) ]] || fail "$1 sees '$info' (free total), not a total of $2 MiB"
}
# waits_with POD TEXT: POD stays unscheduled, kube-scheduler's reason containing TEXT.
waits_with() {
  local cond=""
  for _ in $(seq 100); do
    cond="$("$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.status.conditions[?(@.type=="PodScheduled")].reason}: {.status.conditions[?(@.type=="PodScheduled")].message}')"
    [[ "$cond" == Unschedulable:* ]] && break
    sleep 0.2
  done
  [[ "$cond" == Unschedulable:*"$2"* ]] || fail "$1 is not waiting with '$2': '$cond'"
  [[ -z "$("$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.spec.nodeName}')" ]] || fail "$1 was bound"
  local events
  events="$("$kubectl" -n "$ns" get events --field-selector "involvedObject.name=$1,reason=FailedScheduling" -o 'jsonpath={.items[*].message}')"
  [[ "$events" == *"$2"* ]] || fail "$1 has no FailedScheduling Event saying '$2': '$events'"
  echo "$1 waits: ${cond#Unschedulable: }"
}

step "1. a real node, Tessera's images and the workload image imported"
rn_begin
cdi="$node_dir/cdi/run"                          # the node's /var/run/cdi, as the host sees it
regions="$node_dir/host/run-tessera/regions/dra" # claims' regions under the chart's regionRoot

step "2. helm install with dra.enabled: the DeviceClass and the node's ResourceSlice"
rn_helm_install 8 "gpus:
- {uuid: $gpu, model: A100, memMiB: $a100, sms: 108, numa: 0, healthy: true}" --set dra.enabled=true
"$kubectl" create namespace "$ns" > /dev/null
"$kubectl" get deviceclass gpu.tessera.io -o 'jsonpath={.spec.selectors[0].cel.expression}' | grep -qx 'device.driver == "gpu.tessera.io"' \
  || fail "the chart's DeviceClass gpu.tessera.io does not select the driver"
for _ in $(seq 100); do "$kubectl" get resourceslice "$slice" > /dev/null 2>&1 && break; sleep 0.2; done
"$kubectl" get resourceslice "$slice" -o json > "$work/slice.json" || fail "no ResourceSlice $slice"
python3 - "$work/slice.json" "$gpu" <<'PY' || fail "ResourceSlice $slice is not the GPU as a shareable device: $(cat "$work/slice.json")"
import json, sys
s = json.load(open(sys.argv[1]))["spec"]
assert (s["driver"], s["pool"]["name"]) == ("gpu.tessera.io", s["nodeName"]), s
[d] = s["devices"]
assert d["name"] == "gpu-0" and d["allowMultipleAllocations"] is True, d
assert d["attributes"]["uuid"]["string"] == sys.argv[2], d
assert (d["capacity"]["memory"]["value"], d["capacity"]["compute"]["value"]) == ("40Gi", "100"), d
PY
echo "DeviceClass gpu.tessera.io; ResourceSlice $slice: gpu-0 shareable, memory 40Gi, compute 100"

step "3. examples/dra/gpu-share-claim.yaml: allocated, prepared, its limits enforced inside"
t0=$SECONDS
"$kubectl" -n "$ns" create --dry-run=client -o json -f "$src/examples/dra/gpu-share-claim.yaml" \
  | python3 -c '
import json, sys
text, pos, items, dec = sys.stdin.read(), 0, [], json.JSONDecoder()
while text[pos:].strip():
    doc, pos = dec.raw_decode(text, len(text) - len(text[pos:].lstrip()))
    items += doc["items"] if doc.get("kind") == "List" else [doc]
for o in items:
    if o["kind"] == "Pod":
        o["spec"]["terminationGracePeriodSeconds"] = 0
        for c in o["spec"]["containers"]:
            c.update(image=sys.argv[1], imagePullPolicy="Never", command=["sleep", "3600"],
                     env=[{"name": "FAKE_CUDA_MEM_MIB", "value": sys.argv[2]}])
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))' "$workload_image" "$a100" \
  | "$kubectl" -n "$ns" create -f - > /dev/null
ready dra-inference
echo "created to Ready: $((SECONDS - t0)) s"
read -r device pool memory compute share1 <<< "$(allocation dra-inference)"
[[ "$device $pool $memory $compute" == "gpu-0 $node 8Gi 30" && -n "$share1" ]] \
  || fail "the example's claim is allocated '$device $pool $memory $compute $share1', not gpu-0 of $node, 8Gi, 30, shared"
env="$("$kubectl" -n "$ns" exec dra-inference -- env)"
for want in "TESSERA_GPU_MEM_LIMIT_MIB_0=8192" "TESSERA_GPU_CORE_PERCENT_0=30" "TESSERA_GPU_UUID_0=$gpu" \
            "NVIDIA_VISIBLE_DEVICES=$gpu" "TESSERA_GPU_COUNT=1" "TESSERA_POD=$ns/$(claim_of dra-inference)" \
            "TESSERA_CONTAINER=claim" "TESSERA_REGION_DIR=/var/run/tessera/region"; do
  grep -qxF "$want" <<< "$env" || fail "dra-inference has no $want: $(grep -E '^(TESSERA|NVIDIA)_' <<< "$env")"
done
[[ "$("$kubectl" -n "$ns" exec dra-inference -- cat /etc/ld.so.preload)" == /usr/local/lib/tessera/libtessera-cuda.so ]] \
  || fail "/etc/ld.so.preload does not name the library"
mounts="$("$kubectl" -n "$ns" exec dra-inference -- cat /proc/self/mounts)"
grep -qE ' /etc/ld.so.preload [^ ]+ ro[, ]' <<< "$mounts" || fail "/etc/ld.so.preload is not mounted read-only"
grep -qE ' /usr/local/lib/tessera/libtessera-cuda.so [^ ]+ ro[, ]' <<< "$mounts" || fail "the library is not mounted read-only"
grep -qE ' /var/run/tessera/region [^ ]+ rw[, ]' <<< "$mounts" || fail "the claim's region is not mounted read-write"
sees dra-inference 8192
rc=0; "$kubectl" -n "$ns" exec dra-inference -- fake_cuda_client alloc 9000 exit > /dev/null 2>&1 || rc=$?
((rc == 7)) || fail "9000 MiB in an 8192 MiB claim ended $rc, not CUDA_ERROR_OUT_OF_MEMORY's exit 7"
"$kubectl" -n "$ns" exec dra-inference -- fake_cuda_client alloc 7000 exit > /dev/null 2>&1 \
  || fail "7000 MiB in an 8192 MiB claim was refused"
uid1="$(claim_uid dra-inference)"
[[ -f "$cdi/tessera.io-gpu-$uid1.json" && -d "$regions/$uid1/claim" ]] \
  || fail "no CDI spec or region of claim $uid1 on the node: $(ls "$cdi" "$regions" 2>&1)"
health=""
for _ in $(seq 50); do
  health="$("$kubectl" -n "$ns" get pod dra-inference -o 'jsonpath={.status.containerStatuses[0].allocatedResourcesStatus[0].resources[0].health}')"
  [[ "$health" == Healthy ]] && break
  sleep 0.2
done
[[ "$health" == Healthy ]] || fail "the pod does not show its device Healthy: '$health'"
echo "claim $(claim_of dra-inference): gpu-0, 8Gi, 30 %; inside: 8192 MiB total, 9000 refused, 7000 fit; device Healthy"

step "4. a second claim (selecting the model) shares gpu-0"
claim_pod second 2Gi 30 "" A100
ready second
read -r device pool memory compute share2 <<< "$(allocation second)"
[[ "$device $pool $memory $compute" == "gpu-0 $node 2Gi 30" && -n "$share2" && "$share2" != "$share1" ]] \
  || fail "the second claim is allocated '$device $pool $memory $compute $share2', not a share of gpu-0 (2Gi, 30) of its own"
[[ "$(allocation dra-inference)" == "gpu-0 $node 8Gi 30 $share1" ]] || fail "the first claim's allocation changed"
sees second 2048
echo "both Running on gpu-0 of $node, shareIDs $share1 and $share2; the second sees 2048 MiB"

step "5. a third claim that does not fit beside them waits"
claim_pod third 4Gi 50
waits_with third "cannot allocate all claims"

step "6. a claim for more memory than any GPU has waits, and Tessera says why"
claim_pod huge 48Gi 10
waits_with huge "cannot allocate all claims"
# kube-scheduler's reason is the same as the third's; tessera-scheduler's
# claim advice tells the two apart.
want="claim $ns/$(claim_of huge) request \"gpu\" asks 49152 MiB of GPU memory (48Gi); the largest GPU of driver gpu.tessera.io has $a100 MiB (gpu-0 on node $node)"
advice=""
for _ in $(seq 75); do
  advice="$("$kubectl" -n "$ns" get events --field-selector involvedObject.name=huge,reason=TesseraClaimUnsatisfiable -o 'jsonpath={.items[*].message}')"
  [[ -n "$advice" ]] && break
  sleep 0.2
done
[[ "$advice" == "$want" ]] || fail "huge has no TesseraClaimUnsatisfiable Event saying '$want': '$advice'"
[[ -z "$("$kubectl" -n "$ns" get events --field-selector involvedObject.name=third,reason=TesseraClaimUnsatisfiable -o name)" ]] \
  || fail "third, which only waits for room, was called unsatisfiable"
echo "huge: TesseraClaimUnsatisfiable: $advice"

step "7. room freed, the third runs; the kubelet restarted wipes the slice, the agent publishes it again"
uid2="$(claim_uid second)"
t0=$SECONDS
"$kubectl" -n "$ns" delete pod second --wait=true --timeout=60s > /dev/null
# The kubelet unprepares the claim once the pod's containers are gone.
for _ in $(seq 150); do [[ -e "$cdi/tessera.io-gpu-$uid2.json" || -e "$regions/$uid2" ]] || break; sleep 0.2; done
[[ ! -e "$cdi/tessera.io-gpu-$uid2.json" && ! -e "$regions/$uid2" ]] || fail "the second claim's CDI spec or region stayed"
echo "second deleted: its claim unprepared (CDI spec and region gone) $((SECONDS - t0)) s after the delete began"
ready third
[[ "$(allocation third | cut -d' ' -f1-4)" == "gpu-0 $node 4Gi 50" ]] || fail "the third claim is allocated '$(allocation third)'"
sees third 4096
echo "third allocated gpu-0, 4Gi, 50 % beside the example's 30 %, sees 4096 MiB"
# A pod deleted while a restarted kubelet has not listed it yet is an orphan
# to that kubelet, whose claims it unprepares only in its 60 s reconcile
# loop: nothing is deleted around the restart here.
old_slice_uid="$("$kubectl" get resourceslice "$slice" -o 'jsonpath={.metadata.uid}')"
t0=$SECONDS
"$realnode" restart "$dir" "$node" kubelet
new_slice_uid=""
for _ in $(seq 100); do
  new_slice_uid="$("$kubectl" get resourceslice "$slice" -o 'jsonpath={.metadata.uid}' 2> /dev/null || true)"
  [[ -n "$new_slice_uid" && "$new_slice_uid" != "$old_slice_uid" ]] && break
  sleep 0.2
done
[[ -n "$new_slice_uid" && "$new_slice_uid" != "$old_slice_uid" ]] \
  || fail "ResourceSlice $slice was not deleted and published again after the kubelet restart (uid '$new_slice_uid')"
echo "the slice was wiped and published again $((SECONDS - t0)) s after the restart began (step 8 allocates from it)"

step "8. the agent restarted between NodePrepareResources and the container's start"
claim_pod late 1Gi 10 hold
for _ in $(seq 150); do
  [[ -n "$("$kubectl" -n "$ns" get pod late -o 'jsonpath={.status.initContainerStatuses[0].state.running}')" ]] && break
  sleep 0.2
done
uid_late="$(claim_uid late)"
[[ -f "$cdi/tessera.io-gpu-$uid_late.json" ]] || fail "late's claim $uid_late is not prepared while its init container runs"
old_agent="$(agent_pod)"
"$kubectl" -n "$relns" delete pod "$old_agent" --wait=true --timeout=60s > /dev/null
for _ in $(seq 150); do
  a="$(agent_pod)"
  [[ -n "$a" && "$a" != "$old_agent" ]] && break
  sleep 0.2
done
[[ -n "$a" && "$a" != "$old_agent" ]] || fail "no new agent pod after $old_agent was deleted"
"$kubectl" -n "$ns" exec late -c hold -- touch /tmp/go
ready late
grep -qx TESSERA_GPU_MEM_LIMIT_MIB_0=1024 <<< "$("$kubectl" -n "$ns" exec late -- env)" || fail "late has not its 1024 MiB limit"
sees late 1024
echo "agent $old_agent replaced by $a while late waited; late started with 1024 MiB"

step "9. the pods deleted: every claim unprepared, nothing left on the node"
t0=$SECONDS
"$kubectl" -n "$ns" delete pod --all --wait=true --timeout=90s > /dev/null
for _ in $(seq 150); do
  [[ -z "$(ls -A "$cdi")" && -z "$(ls -A "$regions" 2> /dev/null)" ]] && break
  sleep 0.2
done
[[ -z "$(ls -A "$cdi")" ]] || fail "CDI specs left on the node: $(ls "$cdi")"
[[ -z "$(ls -A "$regions" 2> /dev/null)" ]] || fail "claim regions left on the node: $(ls "$regions")"
echo "no CDI spec and no claim region left $((SECONDS - t0)) s after the delete began"

# --- A mixed node: device-plugin pods and claims on one GPU --------------------
# dp_pod NAME MIB CORE: a device-plugin pod asking one GPU's share through
# tessera.io/gpu, placed by the chart's kube-scheduler and Tessera's extender.
dp_pod() {
  python3 - "$1" "$2" "$3" "$node" "$workload_image" "$a100" <<'PY' | "$kubectl" -n "$ns" create -f - > /dev/null
import json, sys
name, mib, core, node, image, card = sys.argv[1:7]
limits = {"tessera.io/gpu": "1", "tessera.io/gpu-mem": mib, "tessera.io/gpu-core": core}
container = {"name": "main", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"],
             "env": [{"name": "FAKE_CUDA_MEM_MIB", "value": card}], "resources": {"limits": limits}}
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                  "spec": {"schedulerName": "tessera-scheduler", "terminationGracePeriodSeconds": 0,
                           "nodeSelector": {"kubernetes.io/hostname": node}, "containers": [container]}}))
PY
}
# offered: gpu-0's "memory compute" in the slice, and " tainted" when it has the full-GPU taint.
offered() {
  "$kubectl" get resourceslice "$slice" -o json | python3 -c '
import json, sys
[d] = json.load(sys.stdin)["spec"]["devices"]
taints = [t for t in d.get("taints", []) if t["key"] == "gpu.tessera.io/held-by-device-plugin-pods" and t["effect"] == "NoSchedule"]
print(d["capacity"]["memory"]["value"], d["capacity"]["compute"]["value"] + (" tainted" if taints else ""))'
}
wait_offered() {  # WANT WHAT: until the slice offers WANT for gpu-0
  local o=""
  for _ in $(seq 100); do o="$(offered)"; [[ "$o" == "$1" ]] && break; sleep 0.2; done
  [[ "$o" == "$1" ]] || fail "$2: the slice offers '$o' of gpu-0, not '$1'"
}
gone() {  # POD...: deleted, and their claims (if any) unprepared
  "$kubectl" -n "$ns" delete pod "$@" --wait=true --timeout=60s > /dev/null
}

step "10. a mixed node: a device-plugin pod and a claim on one GPU, the slice offering what the pod leaves"
wait_offered "40Gi 100" "before any pod"
# The agent restarted in step 8 registers its device plugin again, and the
# kubelet reports the slots at its next node status update (up to 10 s
# later). The device-plugin pod does not wait for them: until they are
# allocatable tessera-scheduler turns it away with its own reason, and
# kube-scheduler retries it at the node's status update that brings them
# (docs/scheduler-extender.md, "A pod that arrives before the slots").
slots="$("$kubectl" get node "$node" -o 'jsonpath={.status.allocatable.tessera\.io/gpu}')"
t0=$SECONDS
dp_pod dp 16384 40
ready dp
turned_away="$("$kubectl" -n "$ns" get events --field-selector involvedObject.name=dp,reason=FailedScheduling \
  -o 'jsonpath={range .items[*]}{.message}{"\n"}{end}')"
if [[ -n "$turned_away" ]]; then
  grep -q "tessera.io/gpu slots allocatable" <<< "$turned_away" \
    || fail "dp was turned away for another reason than its node's slots: $turned_away"
fi
echo "dp Ready $((SECONDS - t0)) s after it was created (allocatable tessera.io/gpu then: '${slots:-none}';" \
  "turned away $(grep -c . <<< "$turned_away") times before)"
[[ "$(assigned_uuid dp)" == "$gpu" ]] || fail "dp is not assigned gpu-0 ($gpu): $(assigned_uuid dp)"
t0=$SECONDS
wait_offered "24Gi 60" "dp (16 GiB, 40 %) running"
echo "dp Running on gpu-0 (16 GiB, 40 %); the slice offers 24Gi and 60 within $((SECONDS - t0)) s"
claim_pod beside 8Gi 30
ready beside
[[ "$(allocation beside | cut -d' ' -f1-4)" == "gpu-0 $node 8Gi 30" ]] || fail "beside is allocated '$(allocation beside)'"
sees dp 16384
sees beside 8192
echo "dp (16384 MiB) and claim beside (8192 MiB, 30 %) run together on gpu-0"

step "11. a claim that would over-commit the GPU with both waits, and runs once the device-plugin pod is gone"
claim_pod over 20Gi 20
waits_with over "cannot allocate all claims"
[[ "$(offered)" == "24Gi 60" ]] || fail "the slice changed while over waited: $(offered)"
t0=$SECONDS
gone dp
wait_offered "40Gi 100" "dp deleted"
echo "dp deleted: the slice offers the whole card again $((SECONDS - t0)) s after the delete began"
ready over
[[ "$(allocation over | cut -d' ' -f1-4)" == "gpu-0 $node 20Gi 20" ]] || fail "over is allocated '$(allocation over)'"
sees over 20480
echo "over allocated gpu-0 (20Gi) beside beside, $((SECONDS - t0)) s after the delete began"

step "12. a device-plugin pod holding the whole card taints gpu-0; a claim waits until it is gone"
gone beside over
for _ in $(seq 150); do [[ -z "$(ls -A "$cdi")" ]] && break; sleep 0.2; done
[[ -z "$(ls -A "$cdi")" ]] || fail "claims not unprepared: $(ls "$cdi")"
dp_pod whole "$a100" 100
ready whole
wait_offered "2Mi 1 tainted" "whole (the card) running"
claim_pod tiny 1Gi 0
waits_with tiny "cannot allocate all claims"
gone whole
wait_offered "40Gi 100" "whole deleted"
ready tiny
echo "whole tainted gpu-0 (NoSchedule) and tiny waited; whole deleted, tiny runs"
"$kubectl" -n "$ns" delete pod --all --wait=true --timeout=90s > /dev/null
rn_end
! "$kubectl" get deviceclass gpu.tessera.io > /dev/null 2>&1 || fail "helm uninstall left the DeviceClass"
