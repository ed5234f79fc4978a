#!/usr/bin/env bash
# e2e_real_node_chart_test: the product path on a real node. Tessera's own
# images (make images: deploy/images/Dockerfile, built without a registry or
# a Docker daemon) imported into the node's containerd and run by the Helm
# chart, installed as docs/install.md says.
#
#  1. realnode.sh up (kubelet, containerd, kube-proxy, CoreDNS); the images
#     tessera-node and tessera-scheduler imported; the node labelled
#     tessera.io/gpu-node=true as docs/install.md says.
#  2. helm install tessera deploy/helm/tessera --namespace tessera-system
#     --create-namespace, with values that say where the images are (the
#     local names, pullPolicy Never: nothing is pulled) and one simulated
#     GPU (no NVML here). Controllers make every pod: tessera-node's
#     DaemonSet pod (its init step installs the library into the node's
#     /usr/local/lib/tessera), the extender's Deployment (2 replicas, one
#     leader), the chart's kube-scheduler Deployment. All turn Ready; the
#     agent, in its container, registers tessera.io/gpu with the real kubelet.
#  3. A Deployment of 2 sharing pods (schedulerName tessera-scheduler):
#     the chart's kube-scheduler reaches the extender through its Service
#     name (CoreDNS, kube-proxy), the extender binds each with an assignment
#     on the one GPU, the real kubelet's device manager calls the agent's
#     Allocate, and inside each container (kubectl exec) the share's limits
#     are in the environment and /etc/ld.so.preload names the library the
#     init step installed.
#  4. The library at work inside the containers. The pods run the workload
#     image (built here with oci_image.py: the fake CUDA driver as the
#     container's libcuda.so.1, its client, their glibc, busybox); nothing
#     sets LD_PRELOAD: the dynamic loader finds the library through the
#     mounted /etc/ld.so.preload. Each pod's main process holds 1024 MiB of
#     its 4096 MiB share (plus a context's 256 MiB charge); a second process
#     (kubectl exec) sees the share as the GPU's total, fills exactly what is
#     left in 512 MiB blocks, and is refused CUDA_ERROR_OUT_OF_MEMORY beyond.
#     Without the fake client (sanitizer builds) the pods run busybox and
#     this step is left out.
#  5. What users see of it: the agent's /metrics (its pod's address, from
#     the node) counts both containers and their memory; the agent's
#     tessera.io/usage annotation on each pod; `kubectl tessera top`.
#  6. Faults while the sharing pods run; after each, both pods are still
#     the same containers (no restart, no replacement), each still holds its
#     memory in its share (the library's view from inside, which reads the
#     region), and the node still offers the agent's slots:
#     a. the agent's pod deleted: its DaemonSet makes a new one, which finds
#        the running containers in their regions (/metrics: 2 containers,
#        their memory);
#     b. the kubelet restarted: the agent re-registers (its log says so),
#        reconciliation against pod-resources runs and finds no mismatch;
#     c. containerd restarted: exec into the containers still works;
#     d. helm upgrade --reuse-values switching the gpushare front end on
#        (docs/install.md's command): the agent and the extender roll; then
#        a StatefulSet as gpushare's docs write one (aliyun.com/gpu-mem: 2,
#        plus schedulerName, as docs/install.md says for unchanged
#        manifests) runs with gpushare's variables and a 2 GiB limit;
#     e. the sharing Deployment scaled to 3: the agent that has been through
#        all of the above allocates the third;
#     f. the node drained (kubectl drain --ignore-daemonsets) and uncordoned:
#        every sharing pod is evicted, its share given back (/metrics: no
#        container), and all come back through the extender when the
#        extender and kube-scheduler, evicted too, are back; the GPU's
#        assigned memory never exceeds it.
#  7. helm uninstall: the release's pods go, the sharing pods' Deployment
#     is deleted; realnode.sh down leaves nothing of the node.
#
# Adapted from docs/install.md, and only these: the image values above, the
# simulated GPU list, the agent's reconcile period (2 s instead of 30 s, so
# step 6b sees a run), and a nodeSelector keeping the extender and
# kube-scheduler pods on this node (the fixture's cluster may hold other
# tests' simulated nodes, where no kubelet would start them).
#
# Exit 77 (skipped) without root or without the image archives, unless
# TESSERA_REQUIRE_IMAGES=1 (make test), which makes a missing archive a failure.
set -euo pipefail
node=rn-chart
ns=real-node-chart-e2e   # the sharing workload's
work="$TESSERA_TEST_CLUSTER_DIR/real-node-chart-test"
# shellcheck source=tests/e2e/real_node_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/real_node_lib.sh"
# The simulated GPU, with a UUID of the form nvidia-smi -L shows (the library
# checks it); the fake driver adopts the UUIDs NVIDIA_VISIBLE_DEVICES lists.
gpu_uuid=GPU-fa4e0000-0000-4000-8000-0000000000c4
rn_preflight

step "1. a real node, Tessera's images imported, labelled for the agent"
rn_begin

step "2. helm install as docs/install.md says; every pod made by a controller and Ready"
rn_helm_install 8 "gpus:
- {uuid: $gpu_uuid, model: A100, memMiB: 40960, sms: 108, numa: 0, healthy: true}"
"$kubectl" -n "$relns" get pods -o wide
agent="$(agent_pod)"
[[ "$("$kubectl" -n "$relns" get pod "$agent" -o 'jsonpath={.spec.nodeName}')" == "$node" ]] || fail "the agent pod is not on $node"
echo "the agent's DaemonSet pod registered with the real kubelet"
installed="$node_dir/host/usr-local-lib-tessera"
[[ -s "$installed/libtessera-cuda.so" && "$(cat "$installed/ld.so.preload")" == /usr/local/lib/tessera/libtessera-cuda.so ]] \
  || fail "the init step did not install the library and ld.so.preload in the node's /usr/local/lib/tessera"
echo "the init step installed: $(ls "$installed" | tr '\n' ' ')"

step "3. a Deployment of 2 sharing pods: chart's kube-scheduler -> extender Service -> bind -> real Allocate"
"$kubectl" create namespace "$ns" > /dev/null
t0=$SECONDS
"$kubectl" -n "$ns" apply -f - > /dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: share}
spec:
  replicas: 2
  selector: {matchLabels: {app: share}}
  template:
    metadata: {labels: {app: share}}
    spec:
      schedulerName: tessera-scheduler
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: $workload_image
        imagePullPolicy: Never
        command: [$([[ "$workload_image" == *fake-cuda* ]] && echo 'fake_cuda_client, alloc, "1024", term' || echo 'sleep, "3600"')]
        # The fake driver's device: a 40 GiB GPU, as the node's GPU list says.
        env: [{name: FAKE_CUDA_MEM_MIB, value: "40960"}]
        resources:
          limits: {tessera.io/gpu: 1, tessera.io/gpu-mem: 4096, tessera.io/gpu-core: 30}
EOF
"$kubectl" -n "$ns" rollout status deployment/share --timeout=120s
echo "sharing Deployment created to 2 Ready pods: $((SECONDS - t0)) s"
mapfile -t share_pods < <("$kubectl" -n "$ns" get pods -l app=share -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}')
((${#share_pods[@]} == 2)) || fail "expected 2 sharing pods, got ${#share_pods[@]}"
for p in "${share_pods[@]}"; do
  a="$("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.metadata.annotations.tessera\.io/assignment}')"
  [[ -n "$a" ]] || fail "pod $p has no tessera.io/assignment"
  [[ -n "$("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.metadata.annotations.tessera\.io/allocated}')" ]] \
    || fail "the agent did not annotate pod $p as allocated"
  env="$("$kubectl" -n "$ns" exec "$p" -- env)"
  echo "$p: assignment $a; $(echo "$env" | grep -E '^(TESSERA_GPU_MEM_LIMIT_MIB_0|TESSERA_GPU_CORE_PERCENT_0|NVIDIA_VISIBLE_DEVICES)=' | sort | tr '\n' ' ')"
  echo "$env" | grep -qx 'TESSERA_GPU_MEM_LIMIT_MIB_0=4096' || fail "TESSERA_GPU_MEM_LIMIT_MIB_0 is not 4096 in $p"
  echo "$env" | grep -qx 'TESSERA_GPU_CORE_PERCENT_0=30' || fail "TESSERA_GPU_CORE_PERCENT_0 is not 30 in $p"
  echo "$env" | grep -qx "NVIDIA_VISIBLE_DEVICES=$gpu_uuid" || fail "NVIDIA_VISIBLE_DEVICES is not $gpu_uuid in $p"
  [[ "$("$kubectl" -n "$ns" exec "$p" -- cat /etc/ld.so.preload)" == /usr/local/lib/tessera/libtessera-cuda.so ]] \
    || fail "/etc/ld.so.preload in $p does not name the library"
  "$kubectl" -n "$ns" exec -i "$p" -- cmp -s /usr/local/lib/tessera/libtessera-cuda.so /proc/self/fd/0 \
    < "$installed/libtessera-cuda.so" || fail "the library in $p is not the one the init step installed"
done

step "4. the library in the containers, found through /etc/ld.so.preload"
if [[ "$workload_image" != *fake-cuda* ]]; then
  echo "left out: no fake CUDA client in this build"
else
  for p in "${share_pods[@]}"; do
    for _ in $(seq 50); do "$kubectl" -n "$ns" logs "$p" 2>/dev/null | grep -qx ready && break; sleep 0.2; done
    "$kubectl" -n "$ns" logs "$p" | grep -qx ready || fail "the main process of $p did not get its 1024 MiB"
    "$kubectl" -n "$ns" exec "$p" -- sh -c 'echo "LD_PRELOAD=${LD_PRELOAD:-unset}"' | grep -qx LD_PRELOAD=unset \
      || fail "LD_PRELOAD is set in $p: the test would not show ld.so.preload at work"
    info="$("$kubectl" -n "$ns" exec "$p" -- fake_cuda_client info)"
    # Share 4096 MiB; held: main 1024 + 2 contexts x 256.
    [[ "$info" == "$(( (4096 - 1024 - 2 * 256) * mib )) $((4096 * mib))" ]] \
      || fail "$p: cuMemGetInfo says '$info' (free total), not the share's"
    filled="$("$kubectl" -n "$ns" exec "$p" -- fake_cuda_client fill 512)"
    [[ "$filled" == 5 ]] || fail "$p: filled $filled blocks of 512 MiB, not the 5 left in the share"
    rc=0; "$kubectl" -n "$ns" exec "$p" -- fake_cuda_client alloc 3000 exit > /dev/null 2>&1 || rc=$?
    ((rc == 7)) || fail "$p: 3000 MiB beyond the share's 2560 free ended $rc, not CUDA_ERROR_OUT_OF_MEMORY's exit 7"
    echo "$p: free/total $info; 5 x 512 MiB filled; 3000 MiB refused"
  done
fi

step "5. /metrics, the tessera.io/usage annotation and kubectl tessera top"
wait_metric tessera_gpu_containers 2 "the sharing Deployment ran"
agent_metrics | grep -E '^tessera_gpu_(containers|memory_allocated_bytes|memory_used_bytes|core_allocated_ratio)\{' || true
if [[ "$workload_image" == *fake-cuda* ]]; then
  # Both main processes: 2 x (1024 + 256) MiB.
  wait_metric tessera_gpu_memory_used_bytes $((2 * (1024 + 256) * mib)) "the sharing Deployment ran"
  for p in "${share_pods[@]}"; do
    for _ in $(seq 150); do
      usage="$("$kubectl" -n "$ns" get pod "$p" -o 'jsonpath={.metadata.annotations.tessera\.io/usage}')"
      [[ -n "$usage" ]] && break
      sleep 0.2
    done
    [[ -n "$usage" ]] || fail "the agent wrote no tessera.io/usage on $p"
    echo "$p: tessera.io/usage $usage"
  done
  top="$("$TESSERA_BIN_DIR/kubectl-tessera" top -n "$ns" --units MiB)"
  echo "$top"
  for p in "${share_pods[@]}"; do
    grep -E "[[:space:]]$p[[:space:]]" <<< "$top" | grep -q " 1280 / 4096 " || fail "kubectl tessera top does not show $p holding 1280 MiB"
  done
fi

step "6. faults with the workload running"
restarts() {  # NAME=RESTARTS of the sharing Deployment's pods
  "$kubectl" -n "$ns" get pods -l app=share -o 'jsonpath={range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}'
}
before_restarts="$(restarts)"
intact() {  # WHAT: the sharing pods unrestarted, their memory held, the slots offered
  [[ "$(restarts)" == "$before_restarts" ]] || fail "after $1: sharing pods restarted or replaced: $(restarts) (before: $before_restarts)"
  wait_allocatable tessera.io/gpu 8 "after $1"
  if [[ "$workload_image" == *fake-cuda* ]]; then
    # Retried: a kubelet just restarted answers exec only once it has listed
    # its pods again ("pod does not exist" until then).
    local want="$(( (4096 - 1024 - 2 * 256) * mib )) $((4096 * mib))" seen=""
    for p in "${share_pods[@]}"; do
      for _ in $(seq 50); do
        seen="$("$kubectl" -n "$ns" exec "$p" -- fake_cuda_client info 2>/dev/null || true)"
        [[ "$seen" == "$want" ]] && break
        sleep 0.3
      done
      [[ "$seen" == "$want" ]] || fail "after $1: $p sees '$seen' (free total), not its main process's 1024 MiB held in its share"
    done
    wait_metric tessera_gpu_memory_used_bytes "$((2 * (1024 + 256) * mib))" "$1"
  fi
  wait_metric tessera_gpu_containers 2 "$1"
  echo "after $1: both pods unrestarted, their shares and memory intact, 8 slots offered"
}

echo "--- 6a. the agent's pod deleted; its DaemonSet makes another"
old_agent="$(agent_pod)"
"$kubectl" -n "$relns" delete pod "$old_agent" --wait=true > /dev/null
for _ in $(seq 150); do new_agent="$(agent_pod)"; [[ -n "$new_agent" && "$new_agent" != "$old_agent" ]] && break; sleep 0.2; done
[[ "$new_agent" != "$old_agent" ]] || fail "no new agent pod after $old_agent was deleted"
intact "the agent pod $old_agent was replaced by $new_agent"

echo "--- 6b. the kubelet restarted"
runs_before="$(agent_metric tessera_node_reconcile_runs_total)"
"$realnode" restart "$dir" "$node" kubelet
intact "a kubelet restart"
for _ in $(seq 100); do
  "$kubectl" -n "$relns" logs "$(agent_pod)" | grep -q "re-registering" && break
  sleep 0.2
done
"$kubectl" -n "$relns" logs "$(agent_pod)" | grep "re-registering" || fail "the agent did not log re-registering after the kubelet restart"
for _ in $(seq 100); do
  (( $(agent_metric tessera_node_reconcile_runs_total) > runs_before + 1 )) && break
  sleep 0.2
done
(( $(agent_metric tessera_node_reconcile_runs_total) > runs_before + 1 )) || fail "no reconciliation ran after the kubelet restart"
[[ "$(agent_metric tessera_node_allocation_mismatches_total)" == 0 ]] \
  || fail "reconciliation found $(agent_metric tessera_node_allocation_mismatches_total) mismatches after the kubelet restart"
echo "reconcile runs: $runs_before -> $(agent_metric tessera_node_reconcile_runs_total), mismatches 0"

echo "--- 6c. containerd restarted"
"$realnode" restart "$dir" "$node" containerd
intact "a containerd restart"

echo "--- 6d. helm upgrade --reuse-values: the gpushare front end on; a gpushare StatefulSet"
t0=$SECONDS
"$helm" upgrade "$rel" "$chart" --namespace "$relns" --reuse-values --set frontEnds.gpushare.enabled=true > /dev/null
for _ in $(seq 150); do
  [[ "$("$kubectl" -n "$relns" get daemonset tessera-node -o 'jsonpath={.status.updatedNumberScheduled}/{.status.numberAvailable}')" == 1/1 ]] \
    && "$kubectl" -n "$relns" get daemonset tessera-node -o 'jsonpath={.spec.template.spec.containers[0].args}' | grep -q -- --gpushare=true \
    && break
  sleep 0.3
done
"$kubectl" -n "$relns" rollout status daemonset/tessera-node --timeout=90s > /dev/null
"$kubectl" -n "$relns" rollout status deployment/tessera-kube-scheduler --timeout=90s > /dev/null
for _ in $(seq 300); do
  [[ "$("$kubectl" -n "$relns" get deployment tessera-extender -o 'jsonpath={.status.readyReplicas}/{.status.updatedReplicas}')" == 1/2 ]] && break
  sleep 0.3
done
echo "helm upgrade to rolled out: $((SECONDS - t0)) s"
intact "helm upgrade"
wait_allocatable aliyun.com/gpu-mem 40 "with gpushare on (GiB of the one GPU)"
"$kubectl" -n "$ns" apply -f - > /dev/null <<EOF
# As gpushare's own docs write a StatefulSet (binpack), with its image here
# and the schedulerName docs/install.md says to add.
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: binpack-1
  labels: {app: binpack-1}
spec:
  replicas: 1
  serviceName: binpack-1
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: binpack-1}}
  template:
    metadata: {labels: {app: binpack-1}}
    spec:
      schedulerName: tessera-scheduler
      terminationGracePeriodSeconds: 0
      containers:
      - name: binpack-1
        image: $workload_image
        imagePullPolicy: Never
        command: [sleep, "3600"]
        env: [{name: FAKE_CUDA_MEM_MIB, value: "40960"}]
        resources:
          limits:
            # GiB
            aliyun.com/gpu-mem: 2
EOF
"$kubectl" -n "$ns" rollout status statefulset/binpack-1 --timeout=90s > /dev/null
genv="$("$kubectl" -n "$ns" exec binpack-1-0 -- env)"
echo "$genv" | grep -E '^ALIYUN_COM_GPU_MEM_' | sort | tr '\n' ' '; echo
echo "$genv" | grep -qx 'ALIYUN_COM_GPU_MEM_CONTAINER=2' || fail "binpack-1-0 lacks ALIYUN_COM_GPU_MEM_CONTAINER=2"
echo "$genv" | grep -qx 'ALIYUN_COM_GPU_MEM_DEV=40' || fail "binpack-1-0 lacks ALIYUN_COM_GPU_MEM_DEV=40"
if [[ "$workload_image" == *fake-cuda* ]]; then
  # gpushare's device view: the card's total; the 2 GiB enforced all the same.
  ginfo="$("$kubectl" -n "$ns" exec binpack-1-0 -- fake_cuda_client info)"
  [[ "$ginfo" == *" $((40960 * mib))" ]] || fail "binpack-1-0 sees '$ginfo' (free total), not the card's 40960 MiB total"
  gfill="$("$kubectl" -n "$ns" exec binpack-1-0 -- fake_cuda_client fill 512)"
  [[ "$gfill" == 3 ]] || fail "binpack-1-0 filled $gfill x 512 MiB, not the 3 its 2 GiB hold beside a context"
  echo "binpack-1-0: free/total $ginfo; 3 x 512 MiB filled within its 2 GiB"
fi

echo "--- 6e. the sharing Deployment scaled to 3"
"$kubectl" -n "$ns" scale deployment share --replicas 3 > /dev/null
"$kubectl" -n "$ns" rollout status deployment/share --timeout=90s > /dev/null
third="$(comm -13 <(printf '%s\n' "${share_pods[@]}" | sort) <("$kubectl" -n "$ns" get pods -l app=share -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}' | sort))"
"$kubectl" -n "$ns" exec "$third" -- env | grep -qx 'TESSERA_GPU_MEM_LIMIT_MIB_0=4096' || fail "the third pod $third has no share"
wait_metric tessera_gpu_containers 4 "the scale to 3"
echo "the third pod $third allocated; 4 containers on the GPU"

echo "--- 6f. the node drained, then uncordoned"
t0=$SECONDS
"$kubectl" drain "$node" --ignore-daemonsets --delete-emptydir-data --grace-period 0 --timeout 120s > /dev/null
wait_metric tessera_gpu_containers 0 "the drain"
"$kubectl" uncordon "$node" > /dev/null
"$kubectl" -n "$relns" rollout status deployment/tessera-kube-scheduler --timeout=120s > /dev/null
"$kubectl" -n "$ns" rollout status deployment/share --timeout=120s > /dev/null
"$kubectl" -n "$ns" rollout status statefulset/binpack-1 --timeout=120s > /dev/null
wait_metric tessera_gpu_containers 4 "the uncordon"
assigned="$(agent_metric tessera_gpu_memory_allocated_bytes)"
[[ "$assigned" == "$(( (3 * 4096 + 2048) * mib ))" ]] || fail "after the drain the GPU's allocated memory is $assigned, not 3 x 4096 + 2048 MiB"
echo "drain to every pod back on its share: $((SECONDS - t0)) s; allocated $((assigned / mib)) MiB of 40960"

step "7. helm uninstall; realnode.sh down leaves nothing"
rn_end
