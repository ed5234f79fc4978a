#!/usr/bin/env bash
# e2e_real_node_examples_test: every example (examples/tf-serving,
# examples/tensorflow, examples/pytorch, examples/compat, examples/workloads;
# examples/cluster and examples/synthetic are inputs of the demo and the
# simulator, not Kubernetes objects) on a real node, with
# the chart installed as in e2e_real_node_chart_test and both compatibility
# front ends switched on (docs/migration.md).
#
#  1. A real node (tools/realnode) with Tessera's images and the fake-CUDA
#     workload image imported; helm install with six simulated H100s and
#     frontEnds.gpushare and frontEnds.hami enabled.
#  2. Each example, adapted by adapt_example.py only where it cannot run here
#     (the workload image instead of TensorFlow's or PyTorch's, which holds
#     512 MiB through the interception library and waits, or exits in a Job;
#     no probes; no CPU or memory requests on this 2-core node;
#     schedulerName added to the gpushare and HAMi pods, as docs/install.md
#     says), applied unchanged otherwise: its Deployment, Job and Pods made
#     and run by the real controllers and kubelet.
#  3. Inside each running container the library shows the example's share:
#     the memory it asks for as the GPU's total (gpushare's pod: the card's
#     total, as under gpushare, with its 3 GiB enforced), its own 512 MiB and
#     context held against it. The gpushare and HAMi pods have the variables
#     their own projects would give them (ALIYUN_COM_GPU_MEM_*,
#     CUDA_DEVICE_MEMORY_LIMIT_0, CUDA_DEVICE_SM_LIMIT) and Tessera's limits,
#     on the GPU their assignment names.
#  4. The PyTorch Job completes, and its completion gives its 16 GiB back:
#     the GPUs' allocated memory is then the running examples' sum.
#  5. A rolling update of the TF Serving Deployment (kubectl set env) moves
#     its three shares to new pods; sampled every 0.3 s until it is done, no
#     GPU's allocated memory or slots ever exceed the GPU, and afterwards the
#     allocation is what it was before.
#  6. examples/workloads, the demo's set: the 2-GPU H100 trainer gets two
#     whole GPUs, every inference pod runs beside it on the other four (the
#     set asks for 230 % of a GPU's compute in shares), and
#     too-big.yaml's two pods stay Pending with the extender's reasons.
#  7. helm uninstall; the node down; nothing left.
#
# Exit 77 (skipped) without root, the image archives (unless
# TESSERA_REQUIRE_IMAGES=1) or the fake CUDA client (sanitizer builds).
set -euo pipefail
node=rn-examples
ns=real-node-examples-e2e
work="$TESSERA_TEST_CLUSTER_DIR/real-node-examples-test"
# shellcheck source=tests/e2e/real_node_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/real_node_lib.sh"
rn_preflight --needs-client
h100=81559
uuid() { echo "GPU-fa4e0000-0000-4000-8000-00000000e0$1"; }

step "1. a real node; helm install with six simulated H100s and both front ends on"
rn_begin
rn_helm_install 48 "gpus:
- {uuid: $(uuid 00), model: H100, memMiB: $h100, sms: 132, numa: 0, healthy: true}
- {uuid: $(uuid 01), model: H100, memMiB: $h100, sms: 132, numa: 0, healthy: true}
- {uuid: $(uuid 02), model: H100, memMiB: $h100, sms: 132, numa: 0, healthy: true}
- {uuid: $(uuid 03), model: H100, memMiB: $h100, sms: 132, numa: 0, healthy: true}
- {uuid: $(uuid 04), model: H100, memMiB: $h100, sms: 132, numa: 0, healthy: true}
- {uuid: $(uuid 05), model: H100, memMiB: $h100, sms: 132, numa: 0, healthy: true}" \
  --set frontEnds.gpushare.enabled=true --set frontEnds.hami.enabled=true
wait_allocatable aliyun.com/gpu-mem + "with both front ends on"
wait_allocatable nvidia.com/gpu + "with both front ends on"
# gpushare's unit is GiB: kube-scheduler and the kubelet count it as under gpushare.
[[ "$("$kubectl" get node "$node" -o 'jsonpath={.status.capacity.aliyun\.com/gpu-mem}')" == $((6 * (h100 / 1024))) ]] \
  || fail "the Node's aliyun.com/gpu-mem capacity is not $((6 * (h100 / 1024))) GiB"
echo "the Node offers tessera.io/gpu, aliyun.com/gpu-mem and nvidia.com/gpu"

step "2. the examples, adapted only where they cannot run here, applied"
"$kubectl" create namespace "$ns" > /dev/null
examples=(tf-serving/half-plus-two.yaml tensorflow/tf-memory-limit.yaml pytorch/train-job.yaml
          compat/gpushare-pod.yaml compat/hami-pod.yaml)
t0=$SECONDS
for e in "${examples[@]}"; do
  "$kubectl" -n "$ns" create --dry-run=client -o json -f "$src/examples/$e" \
    | python3 "$src/tests/e2e/adapt_example.py" "$workload_image" "$h100" > "$work/${e//\//_}.json"
  "$kubectl" -n "$ns" apply -f "$work/${e//\//_}.json" > /dev/null
  echo "applied examples/$e"
done
"$kubectl" -n "$ns" rollout status deployment/tf-serving --timeout=120s > /dev/null
for p in tf-memory-limit gpushare-tf hami-infer; do
  "$kubectl" -n "$ns" wait --for=condition=Ready "pod/$p" --timeout=120s > /dev/null \
    || fail "pod $p not Ready: $("$kubectl" -n "$ns" get pod "$p" -o jsonpath='{.status}')"
done
echo "every example running: $((SECONDS - t0)) s"
"$kubectl" -n "$ns" get pods -o wide

step "3. inside each container, the example's share"
first_container() { "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.spec.containers[0].name}'; }
seen() {  # POD: "free total" in MiB as the library shows it to a second process
  local out=""
  out="$("$kubectl" -n "$ns" exec "$1" -c "$(first_container "$1")" -- fake_cuda_client info)" || fail "fake_cuda_client info failed in $1"
  echo "$(( ${out% *} / mib )) $(( ${out#* } / mib ))"
}
# pod, the total it must see, what is held against it: its main process's
# 512 MiB and two contexts (256 MiB each, the library's default charge).
check_share() {
  local got; got="$(seen "$1")"
  [[ "$got" == "$(($2 - 512 - 512)) $2" ]] || fail "$1 sees '$got' MiB (free total), not $(($2 - 1024)) of $2"
  echo "$1: $got MiB free of total, as its share says"
}
for p in $("$kubectl" -n "$ns" get pods -l app=tf-serving -o name); do check_share "${p#pod/}" 4096; done
check_share tf-memory-limit 8192
check_share hami-infer 3000
# gpushare's device view: the card's total, the 3 GiB enforced all the same.
got="$(seen gpushare-tf)"
[[ "${got#* }" == "$h100" ]] || fail "gpushare-tf sees total ${got#* } MiB, not the card's $h100"
filled="$("$kubectl" -n "$ns" exec gpushare-tf -- fake_cuda_client fill 256)"
[[ "$filled" == $(( (3072 - 1024) / 256 )) ]] || fail "gpushare-tf filled $filled x 256 MiB, not the $(( (3072 - 1024) / 256 )) its 3 GiB leave"
echo "gpushare-tf: total $h100 MiB (the card's), $filled x 256 MiB more within its 3 GiB"
# Each front end's pod has the variables its own project would give it, and
# Tessera's limits on the GPU its assignment names.
expect_env() {  # POD NAME=VALUE... (VALUE "-": unset)
  local p="$1" env kv; shift
  env="$("$kubectl" -n "$ns" exec "$p" -- env)"
  for kv in "$@"; do
    if [[ "${kv#*=}" == - ]]; then
      ! grep -q "^${kv%%=*}=" <<< "$env" || fail "$p: ${kv%%=*} is set: $(grep "^${kv%%=*}=" <<< "$env")"
    else
      grep -qx "$kv" <<< "$env" || fail "$p: not $kv but '$(grep "^${kv%%=*}=" <<< "$env" || echo unset)'"
    fi
  done
}
assigned_gpu() {  # POD: "INDEX UUID" of its assignment's one GPU
  "$kubectl" -n "$ns" get pod "$1" -o 'jsonpath={.metadata.annotations.tessera\.io/assignment}' \
    | python3 -c 'import json, sys; g = json.load(sys.stdin)["containers"][0]["gpus"]; assert len(g) == 1; print(g[0]["index"], g[0]["uuid"])'
}
read -r idx gpu <<< "$(assigned_gpu gpushare-tf)"
expect_env gpushare-tf ALIYUN_COM_GPU_MEM_DEV=$((h100 / 1024)) ALIYUN_COM_GPU_MEM_CONTAINER=3 ALIYUN_COM_GPU_MEM_POD=3 \
  "ALIYUN_COM_GPU_MEM_IDX=$idx" "NVIDIA_VISIBLE_DEVICES=$gpu" TESSERA_GPU_MEM_LIMIT_MIB_0=3072 TESSERA_GPU_MEM_VIEW=device
[[ "$("$kubectl" -n "$ns" get pod gpushare-tf -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')" == tf ]] \
  || fail "gpushare-tf is not annotated tessera.io/allocated=tf"
read -r idx gpu <<< "$(assigned_gpu hami-infer)"
expect_env hami-infer "NVIDIA_VISIBLE_DEVICES=$gpu" TESSERA_GPU_MEM_LIMIT_MIB_0=3000 TESSERA_GPU_CORE_PERCENT_0=30 \
  CUDA_DEVICE_MEMORY_LIMIT_0=3000m CUDA_DEVICE_SM_LIMIT=30 ALIYUN_COM_GPU_MEM_DEV=- TESSERA_GPU_MEM_VIEW=-
echo "gpushare-tf and hami-infer: their projects' variables and Tessera's limits on their assigned GPUs"

step "4. the PyTorch Job completes and gives its share back"
"$kubectl" -n "$ns" wait --for=condition=Complete job/pytorch-train --timeout=120s > /dev/null
running_mib=$((3 * 4096 + 8192 + 3072 + 3000))
allocated_sum() { agent_metric tessera_gpu_memory_allocated_bytes | awk -v m="$mib" '{s += $1} END {print s / m}'; }
for _ in $(seq 100); do [[ "$(allocated_sum)" == "$running_mib" ]] && break; sleep 0.3; done
[[ "$(allocated_sum)" == "$running_mib" ]] || fail "after the Job completed the GPUs hold $(allocated_sum) MiB, not the running examples' $running_mib"
echo "Job complete; the GPUs hold $running_mib MiB: the running examples' shares only"

step "5. a rolling update of TF Serving moves its shares without over-commit"
t0=$SECONDS
old="$("$kubectl" -n "$ns" get pods -l app=tf-serving -o name | sort)"
"$kubectl" -n "$ns" set env deployment/tf-serving ROLLED=1 > /dev/null
samples=0
while :; do
  m="$(agent_metrics || true)"
  if [[ -n "$m" ]]; then
    samples=$((samples + 1))
    over="$(awk -v m="$mib" '
      /^tessera_gpu_memory_total_bytes\{/ { split($1, a, "gpu=\""); split(a[2], q, "\""); total[q[1]] = $2 }
      /^tessera_gpu_memory_allocated_bytes\{/ { split($1, a, "gpu=\""); split(a[2], q, "\""); alloc[q[1]] = $2 }
      /^tessera_gpu_containers\{/ { split($1, a, "gpu=\""); split(a[2], q, "\""); n[q[1]] = $2 }
      END {
        for (g in alloc) if (alloc[g] > total[g]) printf "GPU %s: %d of %d MiB ", g, alloc[g] / m, total[g] / m
        for (g in n) if (n[g] > 8) printf "GPU %s: %d containers on 8 slots ", g, n[g]
      }' <<< "$m")"
    [[ -z "$over" ]] || fail "during the rolling update: over-committed $over"
  fi
  [[ "$("$kubectl" -n "$ns" get deployment tf-serving -o 'jsonpath={.status.updatedReplicas}/{.status.readyReplicas}/{.status.replicas}')" == 3/3/3 ]] && break
  ((SECONDS - t0 < 400)) || fail "the rolling update did not finish"
  sleep 0.3
done
"$kubectl" -n "$ns" rollout status deployment/tf-serving --timeout=60s > /dev/null
# The old pods end (their main process exits on SIGTERM) and are removed.
for _ in $(seq 200); do
  new="$("$kubectl" -n "$ns" get pods -l app=tf-serving -o name | sort)"
  [[ -z "$(comm -12 <(echo "$old") <(echo "$new"))" ]] && break
  sleep 0.3
done
[[ -z "$(comm -12 <(echo "$old") <(echo "$new"))" ]] || fail "the rolling update left old pods: $(comm -12 <(echo "$old") <(echo "$new"))"
for _ in $(seq 100); do [[ "$(allocated_sum)" == "$running_mib" ]] && break; sleep 0.3; done
[[ "$(allocated_sum)" == "$running_mib" ]] || fail "after the rolling update the GPUs hold $(allocated_sum) MiB, not $running_mib"
for p in $new; do check_share "${p#pod/}" 4096; done
echo "rolled: 3 new pods with their shares; $samples samples of /metrics, no GPU over-committed"

step "6. examples/workloads (the demo's set): a 2-GPU trainer, inference shares, two that cannot fit"
"$kubectl" delete namespace "$ns" --wait=true --timeout=90s > /dev/null
for _ in $(seq 100); do [[ "$(allocated_sum)" == 0 ]] && break; sleep 0.3; done
[[ "$(allocated_sum)" == 0 ]] || fail "with the examples' namespace deleted the GPUs still hold $(allocated_sum) MiB"
ns=real-node-workloads-e2e
"$kubectl" create namespace "$ns" > /dev/null
apply_example() {
  "$kubectl" -n "$ns" create --dry-run=client -o json -f "$src/examples/$1" \
    | python3 "$src/tests/e2e/adapt_example.py" "$workload_image" "$h100" | "$kubectl" -n "$ns" apply -f - > /dev/null
}
t0=$SECONDS
# The trainer first: it takes two whole GPUs, which the shares after it must leave.
apply_example workloads/trainer.yaml
"$kubectl" -n "$ns" wait --for=condition=Ready pod/finetune-2xh100 --timeout=120s > /dev/null
visible="$("$kubectl" -n "$ns" exec finetune-2xh100 -- env | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')"
[[ "$(tr ',' '\n' <<< "$visible" | sort -u | wc -l)" == 2 ]] || fail "the trainer sees '$visible', not two GPUs"
apply_example workloads/inference.yaml
apply_example workloads/too-big.yaml
mapfile -t inference < <("$kubectl" -n "$ns" get pods -o name | grep -v -e finetune-2xh100 -e too-big -e wants-v100)
for p in "${inference[@]}"; do
  "$kubectl" -n "$ns" wait --for=condition=Ready "$p" --timeout=120s > /dev/null || fail "$p did not run"
done
echo "the trainer on two whole GPUs ($visible) and ${#inference[@]} inference pods running: $((SECONDS - t0)) s"
for want in "too-big|more than any GPU in the cluster has" "wants-v100|is not on any node in the cluster"; do
  p="${want%%|*}" reason="${want#*|}"
  for _ in $(seq 150); do
    "$kubectl" -n "$ns" get events --field-selector "involvedObject.name=$p,reason=FailedScheduling" \
      -o 'jsonpath={.items[*].message}' | grep -q "$reason" && break
    sleep 0.2
  done
  msg="$("$kubectl" -n "$ns" get events --field-selector "involvedObject.name=$p,reason=FailedScheduling" -o 'jsonpath={.items[*].message}')"
  grep -q "$reason" <<< "$msg" || fail "$p has no FailedScheduling event saying '$reason': $msg"
  [[ -z "$("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.spec.nodeName}')" ]] || fail "$p was bound"
  echo "$p: Pending, $(grep -o "[^:]*$reason[^;.]*" <<< "$msg" | head -1)"
done

step "7. helm uninstall; realnode.sh down leaves nothing"
rn_end
