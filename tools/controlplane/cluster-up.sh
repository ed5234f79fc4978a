#!/usr/bin/env bash
# Starts a loopback Kubernetes control plane for tests and the demo: etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler (built by
# build.sh), with generated certificates, a static admin token and a
# kubeconfig, all under DIR.
#
#   cluster-up.sh DIR          # kube-scheduler calls tessera-scheduler at $TESSERA_EXTENDER_PORT
#   EXTENDER=0 cluster-up.sh DIR   # plain kube-scheduler, no extender
#   SCHEDULER=0 cluster-up.sh DIR  # no kube-scheduler yet: start it later with scheduler-up.sh DIR
#   CONTROLLER_MANAGER=0 cluster-up.sh DIR  # no kube-controller-manager
#   SCHEDULER_NAMES="default-scheduler tessera-scheduler" cluster-up.sh DIR
#       # kube-scheduler serves a profile per name, each with the extender: pods
#       # with `schedulerName: tessera-scheduler` (the Helm chart's profile,
#       # docs/install.md) are scheduled too. The demo's choice; the ctest
#       # fixture leaves it out, as a test that installs the chart runs that
#       # chart's own kube-scheduler under that name.
#
# kube-controller-manager makes the workload controllers (Deployments, Jobs,
# DaemonSets, StatefulSets), namespace deletion, garbage collection and node
# lifecycle real. Node lifecycle means a Node whose Lease in kube-node-lease
# is not renewed for 50 s is tainted unreachable and its pods evicted: real
# nodes' kubelets (tools/realnode) renew theirs, and so does every process
# that creates simulated nodes (tests/support/node_leases.h).
#
# Writes DIR/kubeconfig, DIR/cluster.env (ports and paths to source), logs in
# DIR/logs and pids in DIR/pids. Stop with cluster-down.sh DIR. Ports are
# picked free at start unless given (APISERVER_PORT, ETCD_PORT,
# TESSERA_EXTENDER_PORT).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:?usage: cluster-up.sh DIR}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
bin="${TESSERA_CONTROLPLANE_BIN:-$here/bin}"
extender="${EXTENDER:-1}"

controller_manager="${CONTROLLER_MANAGER:-1}"
if [[ -n "${SCHEDULER_NAMES:-}" ]]; then
  [[ "$extender" == 1 ]] || { echo "cluster-up: SCHEDULER_NAMES needs the extender (EXTENDER=1)" >&2; exit 1; }
  for n in ${SCHEDULER_NAMES//,/ }; do
    [[ "$n" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || { echo "cluster-up: bad scheduler name '$n'" >&2; exit 1; }
  done
fi
for b in etcd kube-apiserver kube-scheduler $([[ $controller_manager == 1 ]] && echo kube-controller-manager); do
  [[ -x "$bin/$b" ]] || { echo "cluster-up: $bin/$b missing; run tools/controlplane/build.sh (or scripts/setup.sh)" >&2; exit 1; }
done
if [[ -d "$dir/pids" ]] && compgen -G "$dir/pids/*.pid" >/dev/null; then
  echo "cluster-up: $dir already has a running cluster; cluster-down.sh $dir first" >&2
  exit 1
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
etcd_port="${ETCD_PORT:-$(free_port)}"
etcd_peer_port="$(free_port)"
api_port="${APISERVER_PORT:-$(free_port)}"
kcm_port="$(free_port)"
ext_port="${TESSERA_EXTENDER_PORT:-$(free_port)}"

mkdir -p "$dir/pki" "$dir/logs" "$dir/pids"
rm -rf "$dir/etcd-data"

# --- certificates and credentials -------------------------------------------
pki="$dir/pki"
# The API server's names: loopback for clients on this machine; the
# `kubernetes` Service's ClusterIP (first of --service-cluster-ip-range) and
# the advertised address for in-cluster clients on real nodes (tools/realnode).
api_sans='IP:127.0.0.1,IP:10.0.0.1,IP:10.250.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local'
if [[ -f "$pki/apiserver.ext" ]] && ! grep -q "^subjectAltName=${api_sans}\$" "$pki/apiserver.ext"; then
  rm -f "$pki/ca.crt"   # a folder from before these names: new certificates
fi
if [[ ! -f "$pki/ca.crt" ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=tessera-local-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$api_sans" > "$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "$token,admin,admin-uid,\"system:masters\"" > "$pki/tokens.csv"
  chmod 600 "$pki"/*.key "$pki/tokens.csv"
fi
token="$(cut -d, -f1 "$pki/tokens.csv")"

cat > "$dir/kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: tessera-local
  cluster:
    server: https://127.0.0.1:${api_port}
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: admin
  user:
    token: ${token}
contexts:
- name: tessera-local
  context: {cluster: tessera-local, user: admin}
current-context: tessera-local
KCFG
chmod 600 "$dir/kubeconfig"

# --- processes ----------------------------------------------------------------
# Each runs in its own session so cluster-down can end it and its children.
start() {
  local name="$1"; shift
  setsid "$@" >"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$name.pid"
}
fail() {
  echo "cluster-up: $1; last lines of $dir/logs/$2.log:" >&2
  tail -n 20 "$dir/logs/$2.log" >&2 || true
  "$here/cluster-down.sh" "$dir" >&2 || true
  exit 1
}
wait_for() {  # NAME LOG SECONDS COMMAND...
  local name="$1" log="$2" secs="$3"; shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    kill -0 "$(cat "$dir/pids/$log.pid")" 2>/dev/null || fail "$name exited" "$log"
    ((SECONDS < deadline)) || fail "$name not ready after ${secs}s" "$log"
    sleep 0.2
  done
}

start etcd "$bin/etcd" --name tessera-local --data-dir "$dir/etcd-data" \
  --listen-client-urls "http://127.0.0.1:${etcd_port}" --advertise-client-urls "http://127.0.0.1:${etcd_port}" \
  --listen-peer-urls "http://127.0.0.1:${etcd_peer_port}" --initial-advertise-peer-urls "http://127.0.0.1:${etcd_peer_port}" \
  --initial-cluster "tessera-local=http://127.0.0.1:${etcd_peer_port}" \
  --unsafe-no-fsync --log-level warn
wait_for etcd etcd 30 curl -sf "http://127.0.0.1:${etcd_port}/health"

# --advertise-address is what the `kubernetes` Service leads to: not an address
# of this machine, but one each real node (tools/realnode) serves on its own
# loopback and forwards here. Without kube-controller-manager nothing creates
# the `default` ServiceAccount, so its admission plugin would refuse every pod.
sa_admission=()
[[ "$controller_manager" == 1 ]] || sa_admission=(--disable-admission-plugins ServiceAccount)
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:${etcd_port}" \
  --bind-address 127.0.0.1 --advertise-address 10.250.0.1 --secure-port "${api_port}" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.0.0.0/24 "${sa_admission[@]}" \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --cert-dir "$dir/pki/apiserver-generated" \
  --profiling=false --v=1
wait_for kube-apiserver kube-apiserver 90 curl -sf --cacert "$pki/ca.crt" \
  -H "Authorization: Bearer ${token}" "https://127.0.0.1:${api_port}/readyz"

# Real nodes' kubelets (tools/realnode) are reached on their InternalIP, an
# address the harness assigns; simulated nodes have none and are never dialled.
if [[ "$controller_manager" == 1 ]]; then
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$dir/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "${kcm_port}" \
    --authentication-skip-lookup --authentication-tolerate-lookup-failure \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --profiling=false --v=1
  wait_for kube-controller-manager kube-controller-manager 60 curl -sfk "https://127.0.0.1:${kcm_port}/healthz"
  # Pods need their namespace's `default` ServiceAccount, which it creates.
  wait_for kube-controller-manager kube-controller-manager 30 curl -sf --cacert "$pki/ca.crt" \
    -H "Authorization: Bearer ${token}" "https://127.0.0.1:${api_port}/api/v1/namespaces/default/serviceaccounts/default"
fi

# The extender entries match deploy/ (docs/scheduler-extender.md explains
# them; the second steers DRA claim pods), but for percentageOfNodesToScore:
# test clusters have fewer than 100 nodes, where every node is scored anyway,
# and the throughput benchmark's 5,000 nodes keep kube-scheduler's default.
# The first entry has the compatibility front ends' names too
# (docs/migration.md): pods that use them reach the extender, which reads
# them only when its flags enable them.
extender_yaml=""
if [[ -n "${SCHEDULER_NAMES:-}" ]]; then
  # Top-level extenders serve every profile.
  extender_yaml="profiles:"
  for n in ${SCHEDULER_NAMES//,/ }; do
    extender_yaml+="
- schedulerName: $n"
  done
  extender_yaml+="
"
fi
if [[ "$extender" == 1 ]]; then
  extender_yaml+="extenders:
- urlPrefix: http://127.0.0.1:${ext_port}
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  preemptVerb: preempt
  weight: 5
  nodeCacheCapable: true
  httpTimeout: 5s
  ignorable: false
  managedResources:
  - {name: tessera.io/gpu, ignoredByScheduler: true}
  - {name: tessera.io/gpu-mem, ignoredByScheduler: true}
  - {name: tessera.io/gpu-core, ignoredByScheduler: true}
  - {name: aliyun.com/gpu-mem, ignoredByScheduler: false}
  - {name: nvidia.com/gpu, ignoredByScheduler: true}
  - {name: nvidia.com/gpumem, ignoredByScheduler: true}
  - {name: nvidia.com/gpumem-percentage, ignoredByScheduler: true}
  - {name: nvidia.com/gpucores, ignoredByScheduler: true}
- urlPrefix: http://127.0.0.1:${ext_port}/dra
  prioritizeVerb: prioritize
  weight: 100
  nodeCacheCapable: true
  httpTimeout: 5s
  ignorable: true"
else
  # The same pods, scheduled by slots only: the share resources are ignored
  # as the extender configuration's ignoredByScheduler would.
  extender_yaml="profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResources: [tessera.io/gpu-mem, tessera.io/gpu-core]"
fi
cat > "$dir/scheduler-config.yaml" <<SCFG
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $dir/kubeconfig
  qps: ${SCHEDULER_QPS:-200}
  burst: ${SCHEDULER_BURST:-400}
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
${extender_yaml}
SCFG

cat > "$dir/cluster.env" <<ENV
export KUBECONFIG=$dir/kubeconfig
export TESSERA_CLUSTER_DIR=$dir
export TESSERA_APISERVER=https://127.0.0.1:${api_port}
export TESSERA_EXTENDER_PORT=${ext_port}
export TESSERA_CONTROLPLANE_BIN=$bin
ENV
if [[ "${SCHEDULER:-1}" == 1 ]]; then
  "$here/scheduler-up.sh" "$dir" || { "$here/cluster-down.sh" "$dir" >&2; exit 1; }
fi
echo "cluster up: apiserver https://127.0.0.1:${api_port}, extender expected on 127.0.0.1:${ext_port}$([[ $extender == 1 ]] || echo ' (not used)'), logs in $dir/logs"
echo "  source $dir/cluster.env   # KUBECONFIG for kubectl and Tessera"
