#!/usr/bin/env bash
# e2e_helm_chart_test: the Helm chart deploy/helm/tessera against the ctest
# `cluster` fixture (real etcd, kube-apiserver, kube-scheduler of the pinned
# release, tools/controlplane).
#
#  1. helm lint, and helm template with the default values, with
#     scheduler.mode=configOnly, with the simulated-node values below, and
#     with docs/install.md's frontEnds values (gpushare; HAMi with its count
#     renamed), which must reach the extender's config, tessera-node's args
#     and kube-scheduler's managedResources (and by default none of them),
#     and with dra.enabled (the agent's DRA flags, host folders and RBAC, and
#     the DeviceClass; by default none), and with node.mps.mode=on (the
#     agent's MPS flags, the compute capability, its MPS folders and /dev/shm;
#     by default --mps=off and none); a bad scheduler.mode or node.mps.mode
#     must fail to render.
#  2. kubectl apply --dry-run=server of each rendering: the API server of the
#     pinned release validates every object against its own schemas
#     (strict field validation: an unknown or misspelt field fails).
#  3. The operator commands of docs/install.md, as written there: helm
#     install, helm upgrade, helm uninstall (nothing of the release left).
#  4. kubectl apply of the simulated rendering into a fresh namespace; the
#     objects exist. The fixture's kube-controller-manager makes their pods,
#     but no kubelet runs the chart's images here (they are not built in CI
#     yet): the pods stay Pending, or a kubelet stand-in of step 6 marks one
#     Running without running it.
#  5. RBAC: kubectl auth can-i as each ServiceAccount, for every call its
#     binary makes and for some it must not be able to make.
#  6. The chart's configuration at work: tessera-scheduler, a kube-scheduler
#     and tessera-node (under tessera-nodesim's kubelet stand-in) run with the
#     args, env and config files read back from the applied Deployment,
#     DaemonSet and ConfigMaps, each authenticated with a token of its own
#     ServiceAccount (so with exactly the chart's RBAC), and a pod with the
#     chart's schedulerName is scheduled through the extender, bound with its
#     assignment and allocated by the node agent. Adapted, and only these:
#     file paths (config files and host paths -> temporary files/folders),
#     listen addresses and ports (127.0.0.1, free ports), the API server
#     (a kubeconfig with the ServiceAccount's token instead of the in-cluster
#     one), and the node agent's timing flags, which tessera-nodesim sets.
set -euo pipefail
: "${TESSERA_TEST_KUBECONFIG:?}" "${TESSERA_TEST_CLUSTER_DIR:?}" "${TESSERA_BIN_DIR:?}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cpbin="${TESSERA_CONTROLPLANE_BIN:-$src/tools/controlplane/bin}"
helm="$cpbin/helm" kubectl="$cpbin/kubectl"
for t in "$helm" "$kubectl" "$cpbin/kube-scheduler" "$TESSERA_BIN_DIR/tessera-scheduler" \
         "$TESSERA_BIN_DIR/tessera-node" "$TESSERA_BIN_DIR/tessera-nodesim"; do
  [[ -x "$t" ]] || { echo "FAIL: $t missing (scripts/setup.sh builds helm; the build builds the rest)"; exit 1; }
done
export KUBECONFIG="$TESSERA_TEST_KUBECONFIG"
chart="$src/deploy/helm/tessera"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-helm-test.XXXXXX")"
ns=tessera-chart-e2e          # step 4-6 namespace
rel=tessera-e2e               # ... and release name
docs_ns=tessera-system        # step 3, as docs/install.md writes it
pids=()

step() { echo; echo "=== $*"; }
fail() { echo "FAIL: $*"; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Empties a namespace and finalizes it by hand: sooner than the fixture's
# namespace controller, which first walks every resource type.
drop_namespace() {
  local n=$1
  "$kubectl" get namespace "$n" >/dev/null 2>&1 || return 0
  "$kubectl" -n "$n" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
  "$kubectl" -n "$n" delete all,configmaps,serviceaccounts,roles,rolebindings,leases,events,secrets --all \
    --wait=false >/dev/null 2>&1 || true
  "$kubectl" delete namespace "$n" --wait=false >/dev/null 2>&1 || true
  "$kubectl" get namespace "$n" -o json \
    | python3 -c 'import json,sys; n=json.load(sys.stdin); n["spec"]["finalizers"]=[]; print(json.dumps(n))' \
    | "$kubectl" replace --raw "/api/v1/namespaces/$n/finalize" -f - >/dev/null
  for _ in $(seq 50); do "$kubectl" get namespace "$n" >/dev/null 2>&1 || return 0; sleep 0.2; done
  echo "namespace $n still there"; return 1
}
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if ((rc != 0)); then
    for f in "$work"/*.log "$work"/logs/*.log; do
      [[ -f "$f" ]] && { echo "--- last lines of $f"; tail -n 25 "$f"; }
    done
  fi
  "$kubectl" delete -f "$work/sim.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  "$helm" uninstall tessera --namespace "$docs_ns" >/dev/null 2>&1 || true
  drop_namespace "$ns" || true
  drop_namespace "$docs_ns" || true
  "$kubectl" delete node helm-gpu --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

# Values of the simulated node (steps 4-6): GPUs from a file, not NVML.
cat > "$work/sim-values.yaml" <<'VALUES'
node:
  gpuSource: file
  logLevel: debug
  simulatedGpus: |
    - {index: 0, uuid: GPU-helm-0, model: A100, memMiB: 40960, sms: 108}
  extraArgs: [--usage-interval-ms=1000]     # the pass-through values, with settings the binaries know
extender:
  extraArgs: [--log-level=debug]
  extraConfig: {seed: 7}
scheduler:
  extender:
    extraManagedResources: [{name: example.com/gpu-share, ignoredByScheduler: true}]
# The admission policy checks this test's namespace only, so suites that
# share the cluster fixture are never in its way.
admissionPolicy:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: tessera-chart-e2e}}
networkPolicy:
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
VALUES

step "0. docs/install.md agrees with this test and with values.yaml"
python3 - "$src/docs/install.md" "${BASH_SOURCE[0]}" "$chart/values.yaml" <<'PY'
import re, sys
doc, script, values = (open(p).read() for p in sys.argv[1:4])
# Every command in a block marked *tested* is a line of this script.
blocks = re.findall(r"\*tested\*:\s*```sh\n(.*?)```", doc, re.S)
cmds = [l.strip() for b in blocks for l in b.splitlines() if l.strip()]
lines = {l.strip() for l in script.splitlines()}
missing = [c for c in cmds if c not in lines]
if not cmds or missing:
    sys.exit(f"docs/install.md commands not run by the test: {missing or 'no tested blocks'}")
# Every leaf of values.yaml is in the values table.
stack, leaves = [], []
for line in values.splitlines():
    m = re.match(r"^( *)([A-Za-z][\w]*):(.*)$", line)
    if not m or line.lstrip().startswith("#"):
        continue
    depth = len(m.group(1)) // 2
    stack = stack[:depth] + [m.group(2)]
    rest = m.group(3).split(" #")[0].strip()
    if rest:
        leaves.append(".".join(stack))
# Keys whose value is a block (Kubernetes fields, not chart settings) are
# documented as one row.
blocks = ("node.nodeSelector", "node.tolerations", "extender.resources", "scheduler.resources", "node.resources")
leaves = [k for k in leaves if not k.startswith(tuple(b + "." for b in blocks))] + list(blocks)
undocumented = [k for k in leaves if f"| `{k}` |" not in doc]
if undocumented:
    sys.exit(f"values not in docs/install.md's table: {undocumented}")
print(f"docs: {len(cmds)} tested commands present; {len(leaves)} values documented")
PY

step "1. helm lint and helm template"
"$helm" lint "$chart"
"$helm" lint "$chart" --set scheduler.mode=configOnly
"$helm" lint "$chart" -f "$work/sim-values.yaml"
"$helm" template tessera "$chart" --namespace "$docs_ns" > "$work/default.yaml"
"$helm" template tessera "$chart" --namespace "$docs_ns" --set scheduler.mode=configOnly > "$work/configonly.yaml"
"$helm" template "$rel" "$chart" --namespace "$ns" -f "$work/sim-values.yaml" > "$work/sim.yaml"
# The compatibility front ends (frontEnds.*): off by default, nothing of
# them in the node's args or kube-scheduler's managedResources.
if grep -qF -- '--gpushare' "$work/default.yaml"; then fail "default: renders a --gpushare flag"; fi
if grep -qF -- '--hami' "$work/default.yaml"; then fail "default: renders a --hami flag"; fi
if grep -qF 'name: aliyun.com/gpu-mem' "$work/default.yaml"; then fail "default: manages aliyun.com/gpu-mem"; fi
[[ $(grep -c '^ *enabled: false$' "$work/default.yaml") -ge 2 ]] || fail "default: frontEnds not in the extender's config"
# docs/install.md's front-end values, as the page shows them: gpushare in all
# three places, then HAMi with its count renamed.
python3 - "$src/docs/install.md" "$work" <<'PY'
import re, sys
doc = open(sys.argv[1]).read()
section = doc[doc.index("## gpushare and HAMi manifests"):]
blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
for name, text in zip(("gpushare", "hami"), blocks[:2]):
    open(f"{sys.argv[2]}/{name}.yaml", "w").write(text)
if len(blocks) < 2:
    sys.exit("docs/install.md: the gpushare and HAMi values blocks are missing")
PY
"$helm" template tessera "$chart" --namespace "$docs_ns" -f "$work/gpushare.yaml" > "$work/gpushare-rendered.yaml"
"$helm" template tessera "$chart" --namespace "$docs_ns" -f "$work/hami.yaml" > "$work/hami-rendered.yaml"
expect_rendered() {  # expect_rendered FILE TEXT...: each TEXT is a line of FILE (leading blanks ignored)
  local f=$1; shift
  sed 's/^ *//' "$f" > "$f.lines"
  for want in "$@"; do
    grep -qxF -- "$want" "$f.lines" || fail "$(basename "$f"): no line '$want'"
  done
}
expect_rendered "$work/gpushare-rendered.yaml" '- --gpushare=true' '- --gpushare-resource=aliyun.com/gpu-mem' \
  'gpuMem: aliyun.com/gpu-mem' '- name: aliyun.com/gpu-mem'
python3 - "$work/gpushare-rendered.yaml" <<'PY' || fail "gpushare: frontEnds.gpushare.enabled is not true in the extender's config"
import re, sys
text = open(sys.argv[1]).read()
sys.exit(0 if re.search(r"\n *gpushare:\n *enabled: true\n *gpuMem: aliyun.com/gpu-mem\n", text) else 1)
PY
if grep -qF -- '--hami' "$work/gpushare-rendered.yaml"; then fail "gpushare values: renders --hami"; fi
hami_gpu="$(sed -n 's/^ *gpu: *//p' "$work/hami.yaml")"
[[ -n "$hami_gpu" ]] || fail "docs/install.md's HAMi values rename no count resource"
expect_rendered "$work/hami-rendered.yaml" '- --hami=true' "- --hami-gpu-resource=$hami_gpu" "gpu: $hami_gpu" \
  "- name: $hami_gpu" '- name: nvidia.com/gpumem' '- name: nvidia.com/gpumem-percentage' '- name: nvidia.com/gpucores'
if grep -qF -- '--gpushare' "$work/hami-rendered.yaml"; then fail "HAMi values: renders --gpushare"; fi
# The DRA driver (dra.enabled): off by default; on, the agent's flags, its
# three host folders, the RBAC rules it needs and the DeviceClass.
"$helm" template tessera "$chart" --namespace "$docs_ns" --set dra.enabled=true > "$work/dra-rendered.yaml"
if grep -qE -- '--dra|--cdi-dir|kind: DeviceClass|resources: \[resourceslices\]$' "$work/default.yaml"; then
  fail "default: renders the DRA driver"
fi
expect_rendered "$work/dra-rendered.yaml" '- --dra=true' '- --dra-registry-dir=/var/lib/kubelet/plugins_registry' \
  '- --dra-plugins-dir=/var/lib/kubelet/plugins' '- --cdi-dir=/var/run/cdi' \
  '- {name: dra-registry, mountPath: /var/lib/kubelet/plugins_registry}' \
  '- {name: dra-plugin, mountPath: /var/lib/kubelet/plugins/gpu.tessera.io}' '- {name: cdi, mountPath: /var/run/cdi}' \
  'resources: [resourceslices]' 'verbs: [get, list, watch, create, patch]' 'resources: [resourceclaims]' \
  'kind: DeviceClass' 'name: gpu.tessera.io' 'expression: device.driver == "gpu.tessera.io"'
# MPS (node.mps.mode): off by default (--mps=off, NVML only, no MPS folder);
# on, the agent's flags, the compute capability, the daemons' folder and the
# shared memory at the agent's /dev/shm; a bare YAML off is taken as "off".
"$helm" template tessera "$chart" --namespace "$docs_ns" --set node.mps.mode=on > "$work/mps-rendered.yaml"
expect_rendered "$work/default.yaml" '- --mps=off' '- {name: NVIDIA_DRIVER_CAPABILITIES, value: utility}'
if grep -qE -- '--mps-|name: mps-' "$work/default.yaml"; then fail "default: renders MPS flags or folders"; fi
expect_rendered "$work/mps-rendered.yaml" '- --mps=on' '- --mps-control=nvidia-cuda-mps-control' \
  '- --mps-root=/var/run/tessera/mps' '- --mps-shm=/var/run/tessera/mps/shm' \
  '- {name: NVIDIA_DRIVER_CAPABILITIES, value: utility,compute}' '- {name: mps-root, mountPath: /var/run/tessera/mps}' \
  '- {name: mps-shm, mountPath: /dev/shm}' 'hostPath: {path: /var/run/tessera/mps/shm, type: DirectoryOrCreate}'
printf 'node:\n  mps:\n    mode: off\n' > "$work/mps-bare-off.yaml"
"$helm" template tessera "$chart" -f "$work/mps-bare-off.yaml" | grep -qxF -- '        - --mps=off' \
  || fail "node.mps.mode: off (a YAML false) does not render --mps=off"
if "$helm" template tessera "$chart" --set node.mps.mode=sometimes > /dev/null 2> "$work/bad-mps.err"; then
  fail "node.mps.mode=sometimes rendered"
fi
grep -q 'node.mps.mode must be "off", "auto" or "on", not "sometimes"' "$work/bad-mps.err" || fail "bad MPS mode: $(cat "$work/bad-mps.err")"
if "$helm" template tessera "$chart" --set scheduler.mode=both > /dev/null 2> "$work/bad-mode.err"; then
  fail "scheduler.mode=both rendered"
fi
grep -q "scheduler.mode must be deployment or configOnly" "$work/bad-mode.err" || fail "bad mode: $(cat "$work/bad-mode.err")"
kinds() { grep '^kind:' "$1" | sort | uniq -c | tr -s ' ' | tr '\n' ';'; }
echo "default:    $(kinds "$work/default.yaml")"
echo "configOnly: $(kinds "$work/configonly.yaml")"
[[ $(grep -c '^kind: Deployment' "$work/default.yaml") == 2 ]] || fail "default: expected 2 Deployments (extender, kube-scheduler)"
[[ $(grep -c '^kind: Deployment' "$work/configonly.yaml") == 1 ]] || fail "configOnly: expected only the extender's Deployment"
grep -q 'schedulerName: tessera-scheduler' "$work/default.yaml" || fail "default: no tessera-scheduler profile"
if grep -q 'schedulerName:' "$work/configonly.yaml"; then fail "configOnly: renders a profile"; fi
grep -q 'urlPrefix: http://tessera-extender.tessera-system.svc:12345' "$work/configonly.yaml" || fail "configOnly: no extender entry"
# Who may grant a share, and who may reach the ports: the admission policy
# and its binding everywhere; the extender's NetworkPolicy where the chart
# knows its caller (its own kube-scheduler, or networkPolicy.extenderFrom);
# the metrics port's only when metricsFrom names a scraper.
count() { grep -c "^kind: $2\$" "$1" || true; }
for f in default configonly sim; do
  [[ $(count "$work/$f.yaml" ValidatingAdmissionPolicy) == 1 && $(count "$work/$f.yaml" ValidatingAdmissionPolicyBinding) == 1 ]] \
    || fail "$f: expected one ValidatingAdmissionPolicy and its binding"
done
[[ $(count "$work/default.yaml" NetworkPolicy) == 1 ]] || fail "default: expected the extender's NetworkPolicy only"
[[ $(count "$work/configonly.yaml" NetworkPolicy) == 0 ]] || fail "configOnly without extenderFrom: expected no NetworkPolicy"
[[ $(count "$work/sim.yaml" NetworkPolicy) == 2 ]] || fail "metricsFrom set: expected the extender's and the metrics NetworkPolicy"
"$helm" template tessera "$chart" --namespace "$docs_ns" --set scheduler.mode=configOnly \
  --set-json 'networkPolicy.extenderFrom=[{"ipBlock":{"cidr":"192.0.2.0/24"}}]' > "$work/configonly-np.yaml"
[[ $(count "$work/configonly-np.yaml" NetworkPolicy) == 1 ]] && grep -qF 'cidr: 192.0.2.0/24' "$work/configonly-np.yaml" \
  || fail "configOnly with extenderFrom: no extender NetworkPolicy admitting it"
"$helm" template tessera "$chart" --namespace "$docs_ns" --set admissionPolicy.enabled=false --set networkPolicy.enabled=false \
  > "$work/no-policies.yaml"
[[ $(count "$work/no-policies.yaml" ValidatingAdmissionPolicy) == 0 && $(count "$work/no-policies.yaml" NetworkPolicy) == 0 ]] \
  || fail "policies rendered although disabled"

step "2. kubectl apply --dry-run=server against the pinned release's API server"
drop_namespace "$ns"; drop_namespace "$docs_ns"   # left by an earlier run on this cluster
"$kubectl" version -o json | python3 -c 'import json,sys; print("server", json.load(sys.stdin)["serverVersion"]["gitVersion"])'
"$kubectl" create namespace "$docs_ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" create namespace "$ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
for f in default configonly configonly-np sim gpushare-rendered hami-rendered dra-rendered mps-rendered; do
  "$kubectl" apply --dry-run=server --validate=strict -f "$work/$f.yaml" > "$work/$f.dry-run"
  echo "$f: $(wc -l < "$work/$f.dry-run") objects accepted"
done
# The validation is real: a misspelt field is refused.
sed 's/^  replicas:/  replicaz:/' "$work/default.yaml" > "$work/misspelt.yaml"
if "$kubectl" apply --dry-run=server --validate=strict -f "$work/misspelt.yaml" > /dev/null 2> "$work/misspelt.err"; then
  fail "a misspelt field passed the server's validation"
fi
grep -q 'unknown field "spec.replicaz"' "$work/misspelt.err" || fail "misspelt: $(cat "$work/misspelt.err")"

step "3. docs/install.md: install, upgrade, uninstall"
# These commands are docs/install.md's, word for word (step 0 checks that the
# page still has them).
cd "$src"
helm() { "$cpbin/helm" "$@"; }
kubectl() { "$cpbin/kubectl" "$@"; }
{
  helm install tessera deploy/helm/tessera --namespace tessera-system --create-namespace
} | tee "$work/install.out"
grep -q 'STATUS: deployed' "$work/install.out" || fail "helm install: not deployed"
grep -q 'spec.schedulerName: tessera-scheduler' "$work/install.out" || fail "helm install: NOTES.txt not shown"
kubectl -n tessera-system get deployments,daemonsets,services,configmaps,serviceaccounts -l app.kubernetes.io/instance=tessera
helm upgrade tessera deploy/helm/tessera --namespace tessera-system --reuse-values --set extender.policy=bestfit
kubectl -n tessera-system get configmap tessera-extender -o jsonpath='{.data.tessera-scheduler\.yaml}' | grep -q 'policy: bestfit' \
  || fail "helm upgrade: the extender's policy did not change"
helm history tessera --namespace tessera-system
[[ "$(helm history tessera --namespace tessera-system -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" == 2 ]] \
  || fail "helm history: expected 2 revisions"
helm uninstall tessera --namespace tessera-system
kubectl delete namespace tessera-system --wait=false
unset -f helm kubectl
drop_namespace "$docs_ns"
left="$("$kubectl" get clusterroles,clusterrolebindings -l app.kubernetes.io/instance=tessera -o name)"
[[ -z "$left" ]] || fail "helm uninstall left: $left"

step "4. kubectl apply of the rendering into namespace $ns"
"$kubectl" apply -f "$work/sim.yaml"
for o in deployment/$rel-extender deployment/$rel-kube-scheduler daemonset/$rel-node service/$rel-extender \
         configmap/$rel-extender configmap/$rel-kube-scheduler configmap/$rel-node-gpus \
         serviceaccount/$rel-extender serviceaccount/$rel-node serviceaccount/$rel-kube-scheduler \
         role/$rel-extender rolebinding/$rel-extender role/$rel-kube-scheduler; do
  "$kubectl" -n "$ns" get "$o" -o name >/dev/null || fail "$o not created"
done
"$kubectl" get clusterrole/$rel-extender clusterrole/$rel-node clusterrolebinding/$rel-kube-scheduler -o name >/dev/null
echo "every object created (their pods never run here: no kubelet has the chart's images)"

step "4b. only the chart's service accounts write grants (the ValidatingAdmissionPolicy at work)"
# A pod author (alice, who may create, patch and bind pods in $ns) tries
# what issue 19 found: a pod created with a hand-written assignment, an
# assignment or an allocation added to her own pod, one removed, and a
# Binding carrying an assignment. The API server must refuse each, naming
# the component that owns the annotation; unrelated changes still pass.
"$kubectl" -n "$ns" create role pod-author --verb=create,get,patch,update --resource=pods,pods/binding \
  --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" -n "$ns" create rolebinding pod-author --role=pod-author --user=alice \
  --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
as_alice() { "$kubectl" --as=alice -n "$ns" "$@"; }
forged() {  # forged NAME: a pod on node helm-gpu with an assignment written by hand
  printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","annotations":{"tessera.io/assignment":"%s"}},%s}' "$1" \
    '{\"v\":1,\"containers\":[{\"name\":\"c\",\"gpus\":[{\"index\":0,\"memMiB\":40960,\"corePercent\":100}]}]}' \
    '"spec":{"nodeName":"helm-gpu","containers":[{"name":"c","image":"busybox"}]}'
}
refused() {  # refused WHAT WANT CMD...: CMD must fail with a message containing WANT
  local what=$1 want=$2; shift 2
  if "$@" > "$work/refused.out" 2>&1; then fail "$what: accepted"; fi
  grep -qF -- "$want" "$work/refused.out" || fail "$what: $(cat "$work/refused.out")"
  printf '  refused: %-44s %s\n' "$what" "$(grep -o 'only tessera-[a-z]*.*' "$work/refused.out" | cut -c1-110)"
}
# The policy takes a moment to reach the API server's admission chain.
deadline=$((SECONDS + 30))
until ! forged forged-0 | as_alice create -f - > "$work/refused.out" 2>&1; do
  as_alice delete pod forged-0 --wait=false >/dev/null 2>&1 || true
  "$kubectl" -n "$ns" delete pod forged-0 --grace-period=0 --force >/dev/null 2>&1 || true
  ((SECONDS < deadline)) || fail "the admission policy did not refuse a forged assignment within 30 s"
  sleep 1
done
ext_user="system:serviceaccount:$ns:$rel-extender" node_user="system:serviceaccount:$ns:$rel-node"
refused "create with a hand-written assignment" "only tessera-scheduler ($ext_user) grants GPU shares: alice may not set or change tessera.io/assignment" \
  as_alice create -f - < <(forged forged-1)
printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"own","annotations":{"note":"mine"}},"spec":{"nodeName":"helm-gpu","containers":[{"name":"c","image":"busybox"}]}}' \
  | as_alice create -f - >/dev/null || fail "alice cannot create a plain pod"
refused "annotate an assignment onto her pod" "alice may not set or change tessera.io/assignment, tessera.io/assigned-at" \
  as_alice annotate pod own tessera.io/assignment=x tessera.io/assigned-at=2026-01-01T00:00:00Z
refused "annotate an allocation onto her pod" "only tessera-node ($node_user) records allocations and usage: alice may not set or change tessera.io/allocated" \
  as_alice annotate pod own tessera.io/allocated=c
"$kubectl" -n "$ns" annotate pod own tessera.io/assignment=granted >/dev/null   # as a cluster admin: exempt
refused "remove the assignment" "alice may not set or change tessera.io/assignment" \
  as_alice annotate pod own tessera.io/assignment-
as_alice annotate pod own note=changed --overwrite >/dev/null || fail "an unrelated annotation on a pod with a grant was refused"
as_alice label pod own team=a >/dev/null || fail "a label on a pod with a grant was refused"
printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"unbound"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}' \
  | as_alice create -f - >/dev/null
refused "bind with an assignment in the Binding" "alice may not set or change tessera.io/assignment" \
  as_alice create --raw "/api/v1/namespaces/$ns/pods/unbound/binding" -f - < <(printf \
  '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"unbound","annotations":{"tessera.io/assignment":"x"}},"target":{"kind":"Node","name":"helm-gpu"}}')
"$kubectl" -n "$ns" delete pod own unbound --grace-period=0 --force >/dev/null 2>&1
echo "unrelated changes pass; step 6 shows the chart's own service accounts granting and allocating through the policy"

step "5. RBAC: kubectl auth can-i as each ServiceAccount"
can() {  # can yes|no SA VERB RESOURCE[/NAME][#SUBRESOURCE] [NAMESPACE]
  local want=$1 sa=$2 verb=$3 res=$4 in=${5:-}
  local got sub=()
  [[ "$res" == *"#"* ]] && sub=(--subresource "${res#*#}")
  got="$("$kubectl" auth can-i "$verb" "${res%%#*}" "${sub[@]}" --as="system:serviceaccount:$ns:$sa" ${in:+-n "$in"} 2>/dev/null || true)"
  [[ "$got" == "$want" ]] || fail "can-i $verb $res${in:+ -n $in} as $sa: got '$got', want '$want'"
  printf '  %-3s %-22s %-6s %s%s\n' "$want" "$sa" "$verb" "$res" "${in:+ (namespace $in)}"
}
ext=$rel-extender node=$rel-node ks=$rel-kube-scheduler
# tessera-scheduler: ledger watches, bind, wake, leader election in its namespace.
for v in get list watch; do can yes $ext $v nodes; can yes $ext $v pods; done
can yes $ext patch pods;  can yes $ext create pods#binding
can yes $ext create pods#eviction;  can yes $ext create events default  # GPU preemption
can yes $ext create leases.coordination.k8s.io "$ns"
can yes $ext get leases.coordination.k8s.io/tessera-scheduler "$ns"
can yes $ext update leases.coordination.k8s.io/tessera-scheduler "$ns"
can no  $ext update leases.coordination.k8s.io/tessera-scheduler kube-system
can no  $ext update leases.coordination.k8s.io/other "$ns"
can no  $ext delete pods;  can no $ext patch nodes;  can no $ext get secrets;  can no $ext create pods
# ... DRA: slices and claims watched (claims booked, claim pods steered), and
# the advice on claims no GPU can take (reads only).
for v in get list watch; do
  can yes $ext $v resourceslices.resource.k8s.io;  can yes $ext $v resourceclaims.resource.k8s.io
done
can yes $ext list deviceclasses.resource.k8s.io
can no  $ext create resourceslices.resource.k8s.io;  can no $ext update resourceclaims.resource.k8s.io default
# tessera-node: its Node's inventory, its pods' annotations, Events.
can yes $node get nodes;  can yes $node patch nodes
for v in get list watch patch; do can yes $node $v pods; done
can yes $node create events default
can no  $node create pods#binding;  can no $node delete nodes;  can no $node delete pods
can no  $node get secrets;  can no $node update nodes#status
can no  $node create resourceslices.resource.k8s.io   # only with dra.enabled (rendered in step 1)
# The chart's kube-scheduler: the system:kube-scheduler role, its own Lease.
can yes $ks create pods#binding;  can yes $ks watch nodes
can yes $ks update leases.coordination.k8s.io/$ks "$ns"
can no  $ks get secrets

step "6. the chart's configuration schedules and allocates a pod"
jp() { "$kubectl" -n "$ns" get "$1" -o "jsonpath=$2"; }
sa_kubeconfig() {  # sa_kubeconfig SA FILE: the admin kubeconfig with SA's token instead
  local token; token="$("$kubectl" -n "$ns" create token "$1" --duration=1h)"
  sed "s|^\(\s*token:\).*|\1 $token|" "$KUBECONFIG" > "$2"
  chmod 600 "$2"
  [[ "$(KUBECONFIG="$2" "$kubectl" auth whoami -o jsonpath='{.status.userInfo.username}')" == "system:serviceaccount:$ns:$1" ]] \
    || fail "kubeconfig of $1 does not authenticate as it"
}
sa_kubeconfig $ext "$work/extender.kubeconfig"
sa_kubeconfig $node "$work/node.kubeconfig"
sa_kubeconfig $ks "$work/kube-scheduler.kubeconfig"

# tessera-scheduler: the Deployment's args, its ConfigMap as the config file.
ext_port="$(free_port)"
jp configmap/$ext '{.data.tessera-scheduler\.yaml}' \
  | sed -e "s|^listenAddress: .*|listenAddress: 127.0.0.1|" -e "s|^port: .*|port: $ext_port|" > "$work/tessera-scheduler.yaml"
mapfile -t ext_args < <(jp deployment/$ext '{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
[[ "${ext_args[*]}" == "--config=/etc/tessera/tessera-scheduler.yaml --log-level=debug" ]] || fail "extender args: ${ext_args[*]}"
grep -qx 'seed: 7' "$work/tessera-scheduler.yaml" || fail "extender.extraConfig not in the config file"
ext_args=("${ext_args[@]/#--config=\/etc\/tessera\//--config=$work/}")
echo "tessera-scheduler ${ext_args[*]}   (KUBECONFIG: $ext's token)"
KUBECONFIG="$work/extender.kubeconfig" setsid "$TESSERA_BIN_DIR/tessera-scheduler" "${ext_args[@]}" \
  > "$work/tessera-scheduler.log" 2>&1 < /dev/null &
pids+=($!)

# kube-scheduler: the Deployment's command, its ConfigMap as the config file.
jp configmap/$ks '{.data.scheduler-config\.yaml}' \
  | sed "s|urlPrefix: http://$ext.$ns.svc:12345|urlPrefix: http://127.0.0.1:$ext_port|" > "$work/scheduler-config.yaml"
grep -q "urlPrefix: http://127.0.0.1:$ext_port" "$work/scheduler-config.yaml" || fail "no extender URL to adapt"
grep -q "name: example.com/gpu-share" "$work/scheduler-config.yaml" || fail "extraManagedResources not rendered"
printf 'clientConnection:\n  kubeconfig: %s\n' "$work/kube-scheduler.kubeconfig" >> "$work/scheduler-config.yaml"
mapfile -t ks_cmd < <(jp deployment/$ks '{range .spec.template.spec.containers[0].command[*]}{@}{"\n"}{end}')
[[ "${ks_cmd[0]}" == kube-scheduler && "${ks_cmd[1]}" == --config=/etc/kubernetes/tessera/scheduler-config.yaml ]] \
  || fail "kube-scheduler command: ${ks_cmd[*]}"
ks_cmd=("$cpbin/kube-scheduler" "--config=$work/scheduler-config.yaml" "${ks_cmd[@]:2}"
        --bind-address=127.0.0.1 "--secure-port=$(free_port)"
        --authentication-skip-lookup --authentication-tolerate-lookup-failure)
echo "${ks_cmd[*]}"
setsid "${ks_cmd[@]}" > "$work/kube-scheduler.log" 2>&1 < /dev/null &
pids+=($!)

# tessera-node: the DaemonSet's args. Every path flag must name a hostPath
# mounted at the same path (the agent hands these paths to the kubelet);
# tessera-nodesim replaces those with its temporary folders, and sets the
# timing flags itself. The rest are passed as rendered.
"$kubectl" -n "$ns" get daemonset/$node -o json > "$work/ds.json"
mapfile -t node_args < <(python3 - "$work/ds.json" <<'PY'
import json, sys
ds = json.load(open(sys.argv[1]))
spec = ds["spec"]["template"]["spec"]
c = next(c for c in spec["containers"] if c["name"] == "tessera-node")
hostpaths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
mounts = [(m["mountPath"], m["name"]) for m in c["volumeMounts"]]
set_by_nodesim = {"--device-plugin-dir", "--pod-resources-socket", "--library-host-path", "--preload-host-path",
                  "--region-root", "--simulated-gpus", "--slots-per-gpu", "--metrics-bind-address",
                  "--resync-ms", "--reconcile-interval-ms"}
host_files = {"--library-host-path", "--preload-host-path"}  # mounted into workloads, not into the agent
init = spec["initContainers"][0]
init_dir = next(hostpaths[m["name"]] for m in init["volumeMounts"])
for a in c["args"]:
    flag, _, value = a.partition("=")
    if flag in ("--device-plugin-dir", "--pod-resources-socket", "--region-root"):
        ok = any((value == mp or value.startswith(mp + "/")) and hostpaths.get(n) == mp for mp, n in mounts)
        if not ok:
            sys.exit(f"{a}: no hostPath mounted at the same path")
    if flag in host_files and not value.startswith(init_dir + "/"):
        sys.exit(f"{a}: not in the folder the init step installs to ({init_dir})")
    if flag not in set_by_nodesim:
        print(f"--agent-flag={a}")
env = {e["name"] for e in c.get("env", [])}
if "NODE_NAME" not in env:
    sys.exit("no NODE_NAME env")
PY
)
echo "tessera-node flags as rendered: ${node_args[*]}"
[[ " ${node_args[*]} " == *" --agent-flag=--usage-interval-ms=1000 "* ]] || fail "node.extraArgs not passed"
slots="$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["args"]; print([x.split("=")[1] for x in a if x.startswith("--slots-per-gpu=")][0])' "$work/ds.json")"
jp configmap/$node-gpus '{.data.gpus\.yaml}' > "$work/chart-gpus.yaml"
grep -q 'model: A100, memMiB: 40960' "$work/chart-gpus.yaml" || fail "simulated GPUs ConfigMap"
cat > "$work/nodes.yaml" <<NODES
slotsPerGpu: $slots
nodes:
- {name: helm-gpu, count: 1, cpu: "32", memory: 128Gi, gpus: {model: A100, memMiB: 40960, sms: 108, count: 1}}
NODES
mkdir -p "$work/logs"
setsid "$TESSERA_BIN_DIR/tessera-nodesim" "$work/nodes.yaml" --kubeconfig "$KUBECONFIG" \
  --agent-kubeconfig "$work/node.kubeconfig" --log-dir "$work/logs" --ready-file "$work/nodesim.ready" \
  "${node_args[@]}" > "$work/nodesim.log" 2>&1 < /dev/null &
pids+=($!)

deadline=$((SECONDS + 90))
until [[ -f "$work/nodesim.ready" ]] && curl -sf "http://127.0.0.1:$ext_port/readyz" >/dev/null; do
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a process exited early"; done
  ((SECONDS < deadline)) || fail "extender or node not ready after 90 s"
  sleep 0.5
done
echo "extender ready (leader), node agent registered: $(cat "$work/nodesim.ready")"
holder="$("$kubectl" -n "$ns" get lease tessera-scheduler -o jsonpath='{.spec.holderIdentity}')"
[[ -n "$holder" ]] || fail "no holder of the Lease $ns/tessera-scheduler"
# A second replica of the same configuration stands by: not Ready, not binding.
standby_port="$(free_port)"
sed "s|^port: .*|port: $standby_port|" "$work/tessera-scheduler.yaml" > "$work/standby.yaml"
KUBECONFIG="$work/extender.kubeconfig" setsid "$TESSERA_BIN_DIR/tessera-scheduler" --config="$work/standby.yaml" \
  > "$work/tessera-scheduler-standby.log" 2>&1 < /dev/null &
pids+=($!)
deadline=$((SECONDS + 30))
until [[ "$(curl -s "http://127.0.0.1:$standby_port/readyz" || true)" == *standby* ]]; do
  ((SECONDS < deadline)) || fail "the second replica's /readyz does not say standby: $(curl -s "http://127.0.0.1:$standby_port/readyz")"
  sleep 0.5
done
echo "Lease held by $holder; second replica: $(curl -s "http://127.0.0.1:$standby_port/readyz")"

sched_name="$(awk '$2 == "schedulerName:" {print $3}' "$work/scheduler-config.yaml")"
[[ "$sched_name" == tessera-scheduler ]] || fail "profile name: '$sched_name'"
cat > "$work/pod.yaml" <<POD
apiVersion: v1
kind: Pod
metadata: {name: chart-share, namespace: $ns}
spec:
  schedulerName: $sched_name
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: [helm-gpu]}]
  containers:
  - name: work
    image: busybox
    resources:
      limits: {tessera.io/gpu: 1, tessera.io/gpu-mem: 4096, tessera.io/gpu-core: 25}
POD
"$kubectl" apply -f "$work/pod.yaml"
deadline=$((SECONDS + 90))
until [[ "$("$kubectl" -n "$ns" get pod chart-share -o jsonpath='{.status.phase}')" == Running ]]; do
  ((SECONDS < deadline)) || { "$kubectl" -n "$ns" describe pod chart-share; fail "chart-share not Running after 90 s"; }
  sleep 0.5
done
"$kubectl" -n "$ns" get pod chart-share -o json | python3 -c '
import json, sys
p = json.load(sys.stdin)
a = p["metadata"].get("annotations", {})
assert p["spec"]["nodeName"] == "helm-gpu", p["spec"].get("nodeName")
assignment = a.get("tessera.io/assignment", "")
assert "4096" in assignment, "assignment: " + assignment
assert a.get("tessera.io/allocated") == "work", a
print("bound to", p["spec"]["nodeName"], "with assignment", assignment, "; allocated:", a["tessera.io/allocated"])
' || fail "chart-share's assignment or allocation"
grep -q "bind $ns/chart-share -> node helm-gpu" "$work/tessera-scheduler.log" || fail "the leader did not bind chart-share"
grep -q "filter $ns/chart-share" "$work/tessera-scheduler.log" || fail "kube-scheduler did not call the extender's filter"
# What the agent's Allocate answer gave the container (the kubelet stand-in logs it).
admitted="$(grep "admitted $ns/chart-share" "$work/nodesim.log" || true)"
for want in '"TESSERA_GPU_MEM_LIMIT_MIB_0":"4096"' '"TESSERA_GPU_CORE_PERCENT_0":"25"' \
            '"containerPath":"/etc/ld.so.preload"' '"containerPath":"/usr/local/lib/tessera/libtessera-cuda.so"'; do
  grep -qF "$want" <<<"$admitted" || fail "the container was not given $want: $admitted"
done
echo "container env and mounts from the agent: limits 4096 MiB / 25 %, library and ld.so.preload mounted"
"$kubectl" delete pod -n "$ns" chart-share --wait=false
echo
echo "PASS: chart rendered, validated, installed, upgraded, uninstalled; RBAC as claimed; its configuration scheduled and allocated a pod"
