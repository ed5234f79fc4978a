#!/usr/bin/env bash
# Real Kubernetes nodes beside the loopback control plane of
# tools/controlplane/cluster-up.sh: per node its own network namespace, its own
# mount namespace, its own containerd and its own kubelet. The settings are
# those a kubelet needs on a CI-class VM (cgroup v1, no systemd, no
# CAP_SYS_RESOURCE, no registry); each is commented where it is written.
#
#   realnode.sh up    CLUSTER_DIR NAME        # starts node NAME; returns once its Node is Ready
#   realnode.sh down  CLUSTER_DIR NAME        # stops it and removes what up made
#   realnode.sh enter CLUSTER_DIR NAME CMD... # runs CMD in the node's mount namespace
#                                             # (host network), e.g. a device plugin
#   realnode.sh info  CLUSTER_DIR NAME        # prints the node's facts as shell variables
#   realnode.sh import CLUSTER_DIR NAME TAR...# imports OCI image tarballs into the node's containerd
#   realnode.sh restart CLUSTER_DIR NAME kubelet|containerd  # stops and starts that daemon again
#
# Contract of `up`:
#  - Network: a slot number I (1..250, the first free one on this machine) gives
#    netns tessera-rnI and a veth pair tsrnIh (host, 10.250.I.1/30) / eth0 (node,
#    10.250.I.2/30, the node's InternalIP). Pods get 10.251.I.0/24 on a bridge
#    inside the node's netns; the node's netns has no default route, so nothing
#    leaves for anywhere but the host-side address. kube-apiserver listens on
#    127.0.0.1 only: a forwarder (tcp_forward.py) on 10.250.I.1 carries the
#    kubelet's connections there (TLS checked against the name "localhost").
#  - Cluster services on the node, as a cluster's own add-ons would give them:
#    kube-proxy (iptables mode, in the node's netns) makes Service IPs work for
#    the node's pods; CoreDNS (tools/coredns) answers cluster names on
#    10.250.0.10, the kubelet's clusterDNS; the API server's advertised
#    address 10.250.0.1 (cluster-up.sh), which kube-proxy gives the
#    `kubernetes` Service, is the node's own loopback alias, where a second
#    forwarder carries in-cluster clients (pods) on to the first.
#  - Mount namespace (CLUSTER_DIR/nodes/NAME/ns/mnt): the kubelet's and
#    containerd's fixed paths (/var/lib/kubelet, /var/lib/cni,
#    /var/log/containers, /run/containerd, /run/netns) are bind mounts of the
#    node folder there, so nodes never share them and the host sees none.
#  - Runtime: containerd 2 and its runc shim as tools/controlplane/build.sh
#    builds them (never a containerd on PATH), driving Debian's runc. CDI is
#    on: the node's containerd reads CDI specs from /etc/cdi and /var/run/cdi,
#    which are node folders too (CLUSTER_DIR/nodes/NAME/cdi/{etc,run}), so a
#    DRA driver entered into the node writes its specs where only that node's
#    containerd finds them.
#  - Cgroups: every process of the node (forwarder, containerd, kubelet,
#    shims, containers) lives under /tessera-rnI in each cgroup hierarchy
#    (the kubelet's cgroupRoot), which is how `down` finds them all.
#  - Images: tessera.local/pause:1 (pause.c, gcc -static) and
#    tessera.local/busybox:1 (Debian's busybox-static, every applet in /bin)
#    are imported as OCI tarballs, and tessera.local/kube-scheduler:<version>
#    (the kube-scheduler built by tools/controlplane, as the upstream image
#    holds it) is built for charts that run one; nothing is ever pulled.
#  - Tessera's host folders (/var/run/tessera, /usr/local/lib/tessera) are
#    node folders too, so an agent running there leaves nothing on the host.
#  - Host settings the kubelet changes (vm.overcommit_memory, vm.panic_on_oom,
#    kernel.panic, kernel.panic_on_oops, kernel.keys.*) and net.ipv4.ip_forward
#    are recorded by the first node up on this machine and restored by the
#    last one down, which also removes the empty mount-point folders up had
#    to create (state in /run/tessera-realnode, under flock of /run/lock).
# On failure up prints the last log lines and undoes itself (down).
#
# `down` stops every process of the node by pid (SIGTERM, SIGKILL after 10 s;
# the node's cgroup and every process in its mount namespace),
# deletes the Node object, unmounts the namespace, deletes the netns (its
# veth, bridge and pod interfaces go with it) and the cgroups. It is safe on
# a node that is half up or already down; exits non-zero if anything stays.
# Logs stay in CLUSTER_DIR/nodes/NAME/logs.
#
# Needs root, the kubelet, kube-proxy, kube-scheduler, CoreDNS, kubectl,
# containerd, containerd-shim-runc-v2 and ctr from tools/controlplane/build.sh,
# and Debian's runc, containernetworking-plugins, iptables, curl,
# busybox-static and gcc (scripts/setup.sh installs them all).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { sed -n '8,15p' "${BASH_SOURCE[0]}" >&2; exit 2; }
(($# >= 3)) || usage
verb="$1" dir="$(cd "$2" && pwd)" name="$3"; shift 3
[[ "$name" =~ ^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$ ]] || { echo "realnode: bad node name '$name'" >&2; exit 2; }
[[ -f "$dir/cluster.env" ]] || { echo "realnode: no $dir/cluster.env; start the cluster with cluster-up.sh" >&2; exit 1; }
# shellcheck disable=SC1091
source "$dir/cluster.env"   # KUBECONFIG, TESSERA_APISERVER, TESSERA_CONTROLPLANE_BIN
node="$dir/nodes/$name"
global=/run/tessera-realnode
kubectl() { "$TESSERA_CONTROLPLANE_BIN/kubectl" --kubeconfig "$KUBECONFIG" "$@"; }
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
         kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
host_dirs=(/var/lib/kubelet /var/lib/cni /var/log/containers /run/containerd /run/netns
           /run/tessera /usr/local/lib/tessera /etc/cdi /run/cdi)
# The node's containerd client, as built with its daemon; the socket is the
# node's own inside its mount namespace.
ctr=("$TESSERA_CONTROLPLANE_BIN/ctr" --address /run/containerd/containerd.sock)
# What in-cluster clients on a node dial: the API server's advertised address
# (cluster-up.sh --advertise-address) and the cluster DNS.
api_vip=10.250.0.1 dns_ip=10.250.0.10
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts; }
# Runs "$@" with the machine-wide state locked against other nodes' up/down.
locked() { ( flock 9; "$@" ) 9</run/lock; }

# --- up ----------------------------------------------------------------------
claim_slot() {  # sets slot: the first I whose veth pair could be created
  for i in $(seq 1 250); do
    if ip link add "tsrn${i}h" type veth peer name "tsrn${i}n" 2>/dev/null; then slot=$i; return 0; fi
  done
  echo "realnode: no free slot (250 real nodes on this machine?)" >&2; return 1
}

save_host_state() {  # first node on the machine: record sysctls; make missing mount points
  mkdir -p "$global"
  if [[ ! -f "$global/sysctl.saved" ]]; then
    for s in "${sysctls[@]}"; do echo "$s=$(sysctl -n "$s")"; done > "$global/sysctl.saved.tmp"
    mv "$global/sysctl.saved.tmp" "$global/sysctl.saved"
  fi
  for d in "${host_dirs[@]}"; do
    if [[ ! -e "$d" ]]; then mkdir -p "$d"; echo "$d" >> "$global/created-dirs"; fi
  done
}

restore_host_state() {  # last node on the machine: put back what save_host_state changed
  if ip netns list | grep -q '^tessera-rn'; then return 0; fi
  [[ -d "$global" ]] || return 0
  if [[ -f "$global/sysctl.saved" ]]; then
    while IFS== read -r key value; do sysctl -q -w "$key=$value" || true; done < "$global/sysctl.saved"
  fi
  if [[ -f "$global/created-dirs" ]]; then
    # `ip netns add` left /run/netns bound onto itself: unbind it when empty.
    tac "$global/created-dirs" | while read -r d; do
      if [[ -z "$(ls -A "$d" 2>/dev/null)" ]] && mountpoint -q "$d"; then umount "$d" 2>/dev/null || true; fi
      rmdir "$d" 2>/dev/null || true
    done
  fi
  rm -rf "$global"
}

build_images() {  # the three images, once per cluster folder and recipe
  local out="$dir/realnode-images" stamp
  stamp="$(cat "$here/pause.c" "$here/oci_image.py" "$(command -v busybox)" "${BASH_SOURCE[0]}" \
             "$TESSERA_CONTROLPLANE_BIN/kube-scheduler" | sha256sum | cut -c1-16)"
  [[ -f "$out/busybox.tar" && -f "$out/pause.tar" && -f "$out/kube-scheduler.tar" \
     && "$(cat "$out/.stamp" 2>/dev/null)" == "$stamp" ]] && return 0
  rm -rf "$out"; mkdir -p "$out/tmp"
  gcc -static -O2 -o "$out/tmp/pause" "$here/pause.c"
  python3 "$here/oci_image.py" "$out/tmp/pause.tar" tessera.local/pause:1 --add "$out/tmp/pause:/pause" -- /pause
  local busybox; busybox="$(command -v busybox)"
  if ldd "$busybox" > /dev/null 2>&1; then echo "realnode: $busybox is not static; install busybox-static" >&2; return 1; fi
  local links=()
  for applet in $("$busybox" --list); do [[ "$applet" == busybox ]] || links+=(--link "/bin/$applet:busybox"); done
  python3 "$here/oci_image.py" "$out/tmp/busybox.tar" tessera.local/busybox:1 --add "$busybox:/bin/busybox" \
    "${links[@]}" --dir /etc --dir /tmp --dir /var -- /bin/sh
  # As registry.k8s.io/kube-scheduler holds it: the binary in /usr/local/bin, on PATH.
  python3 "$here/oci_image.py" "$out/tmp/kube-scheduler.tar" "tessera.local/kube-scheduler:$(k8s_version)" \
    --add "$TESSERA_CONTROLPLANE_BIN/kube-scheduler:/usr/local/bin/kube-scheduler" --dir /tmp \
    --env PATH=/usr/local/bin:/bin -- /usr/local/bin/kube-scheduler
  mv "$out/tmp/pause.tar" "$out/tmp/busybox.tar" "$out/tmp/kube-scheduler.tar" "$out/"
  rm -rf "$out/tmp"
  echo "$stamp" > "$out/.stamp"
}

k8s_version() { "$TESSERA_CONTROLPLANE_BIN/kube-scheduler" --version | awk '{print $2}'; }

write_configs() {
  local api_port="${TESSERA_APISERVER##*:}"
  mkdir -p "$node"/{ns,kubelet,pki,logs,pids,pod-logs,log-containers,netns,cni/net.d,cni/cache,cni/networks} \
           "$node"/containerd/{root,run,opt} "$node"/host/{run-tessera,usr-local-lib-tessera} \
           "$node"/cdi/{etc,run}
  # The cluster's kubeconfig, but through the node's way to the API server.
  sed -e "s#server: https://127.0.0.1:${api_port}#server: https://${host_ip}:${api_port}\n    tls-server-name: localhost#" \
    "$KUBECONFIG" > "$node/kubeconfig"
  grep -q "tls-server-name" "$node/kubeconfig" || { echo "realnode: cannot rewrite $KUBECONFIG" >&2; return 1; }
  chmod 600 "$node/kubeconfig"

  cat > "$node/containerd/config.toml" <<EOF
# containerd 2 of real node $name (tools/realnode/realnode.sh); its own root,
# state and socket. /run/containerd, /etc/cdi and /var/run/cdi are the node
# folder's containerd/run, cdi/etc and cdi/run inside the node's mount
# namespace. Config version 3: the CRI plugin is split in three (runtime,
# images, and the CRI gRPC server).
version = 3
root = "$node/containerd/root"
state = "/run/containerd"
# Snapshotters a node here never uses (build.sh leaves btrfs, devmapper and
# zfs out of the binary; a containerd built with them would try them).
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile",
                    "io.containerd.snapshotter.v1.erofs"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$node/containerd/opt"
# NRI listens on a fixed host path (/var/run/nri/nri.sock) that nodes would
# share; nothing here uses it.
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "tessera.local/pause:1"
[plugins."io.containerd.cri.v1.runtime"]
  # The VM withholds CAP_SYS_RESOURCE: no oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  # CDI is always on in containerd 2; where it looks, per node (above).
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # The shim built with this containerd, not an older one on PATH (a
      # Debian containerd 1.x package installs its own).
      runtime_path = "$TESSERA_CONTROLPLANE_BIN/containerd-shim-runc-v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        # cgroup v1 controllers, no systemd (the kubelet's cgroupDriver: cgroupfs).
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$node/cni/net.d"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF

  cat > "$node/cni/net.d/10-tessera-realnode.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "tessera-realnode",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${pod_cidr}"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$node/cni/networks"}}
  ]
}
EOF

  cat > "$node/kubelet-config.yaml" <<EOF
# KubeletConfiguration of real node $name (tools/realnode/realnode.sh).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${node_ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# cgroup v1 controllers on this VM, no systemd; every cgroup under our own root.
cgroupDriver: cgroupfs
cgroupRoot: /tessera-rn${slot}
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
enforceNodeAllocatable: ["none"]
# Our images are imported, never pulled: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1%", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
# A test cluster: anyone on the node's address may call the kubelet.
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
podLogsDir: $node/pod-logs
resolvConf: ""
# CoreDNS of this node (below) answers cluster names; nothing else resolves.
clusterDNS: [${dns_ip}]
clusterDomain: cluster.local
serializeImagePulls: false
EOF

  cat > "$node/kube-proxy-config.yaml" <<EOF
# KubeProxyConfiguration of real node $name (tools/realnode/realnode.sh).
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $node/kubeconfig}
hostnameOverride: $name
mode: iptables
clusterCIDR: 10.251.0.0/16
bindAddress: ${node_ip}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [${node_ip}/32]
# Zero: leave the machine-wide conntrack table size and timeouts alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF

  cat > "$node/Corefile" <<EOF
# CoreDNS of real node $name: cluster names only, from the API server.
.:53 {
  bind ${dns_ip}
  errors
  health 127.0.0.1:8080
  ready 127.0.0.1:8181
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig $node/kubeconfig
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
  }
  cache 30
}
EOF
}

setup_network() {
  ip netns add "$netns"
  ip link set "tsrn${slot}n" netns "$netns"
  ip addr add "${host_ip}/30" dev "tsrn${slot}h"
  ip link set "tsrn${slot}h" up
  ip -n "$netns" link set lo up
  ip -n "$netns" addr add "${api_vip}/32" dev lo
  ip -n "$netns" addr add "${dns_ip}/32" dev lo
  ip -n "$netns" link set "tsrn${slot}n" name eth0
  ip -n "$netns" addr add "${node_ip}/30" dev eth0
  ip -n "$netns" link set eth0 up
}

setup_mounts() {  # a persistent mount namespace, its fixed paths bound to the node folder
  mount --bind "$node/ns" "$node/ns"
  mount --make-private "$node/ns"
  touch "$node/ns/mnt"
  unshare --mount="$node/ns/mnt" --propagation private -- sh -euc '
    n="$1"
    mount --bind "$n/kubelet" /var/lib/kubelet
    mount --bind "$n/cni/cache" /var/lib/cni
    mount --bind "$n/log-containers" /var/log/containers
    mount --bind "$n/containerd/run" /run/containerd
    mount --bind "$n/netns" /run/netns
    mount --bind "$n/host/run-tessera" /run/tessera
    mount --bind "$n/host/usr-local-lib-tessera" /usr/local/lib/tessera
    mount --bind "$n/cdi/etc" /etc/cdi
    mount --bind "$n/cdi/run" /run/cdi' sh "$node"
}

setup_cgroups() {
  local m
  while read -r m; do mkdir -p "$m/tessera-rn${slot}"; done < <(cgroup_mounts)
  mkdir -p "/sys/fs/cgroup/pids/tessera-rn${slot}/daemons"
}

# start NAME NETNS|- CMD...: in the node's pids cgroup, its own session, log and
# pid file. The daemon keeps no descriptor of the caller's above stderr: one
# that holds a lock (`flock LOCK realnode.sh up ...`) would otherwise hold it
# for as long as the node runs, and a `down` under the same lock would wait
# forever.
start() {
  local what="$1" ns="$2"; shift 2
  local enter=(nsenter "--mount=$node/ns/mnt")
  [[ "$ns" == - ]] && enter=() || enter+=("--net=/run/netns/$ns")
  setsid bash -c 'echo $$ > "$0"
                  for fd in /proc/self/fd/*; do fd=${fd##*/}; ((fd > 2)) && eval "exec $fd>&-"; done
                  exec "$@"' "/sys/fs/cgroup/pids/tessera-rn${slot}/daemons/cgroup.procs" \
    "${enter[@]}" "$@" > "$node/logs/$what.log" 2>&1 < /dev/null &
  echo $! > "$node/pids/$what.pid"
}

wait_for() {  # WHAT SECONDS CMD...: until CMD succeeds; fails early if WHAT's process died
  local what="$1" secs="$2"; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" > /dev/null 2>&1; do
    if ! kill -0 "$(cat "$node/pids/$what.pid")" 2>/dev/null || ((SECONDS >= deadline)); then
      echo "realnode: $what of $name not ready after $((secs - deadline + SECONDS)) s; last lines of $node/logs/$what.log:" >&2
      tail -n 20 "$node/logs/$what.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

node_ready() {
  [[ "$(kubectl get node "$name" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

in_node() { nsenter "--mount=$node/ns/mnt" "$@"; }
start_containerd() {
  start containerd "$netns" "$TESSERA_CONTROLPLANE_BIN/containerd" --config "$node/containerd/config.toml"
}
start_kubelet() {
  start kubelet "$netns" "$TESSERA_CONTROLPLANE_BIN/kubelet" --config "$node/kubelet-config.yaml" \
    --kubeconfig "$node/kubeconfig" --root-dir "$node/kubelet" --cert-dir "$node/pki" \
    --node-ip "$node_ip" --hostname-override "$name" --v=2
}

# restart kubelet|containerd: stops the daemon (SIGTERM, SIGKILL after 10 s)
# and starts it again with the same configuration, as a node's init system
# would after a crash or an upgrade. Containers keep running: their shims are
# not the daemon's children.
restart() {
  local what="$1"
  [[ "$what" == kubelet || "$what" == containerd ]] || usage
  slot="$(cat "$node/slot")"; facts
  stop_pids "$(cat "$node/pids/$what.pid")"
  mv "$node/logs/$what.log" "$node/logs/$what.log.$(date +%s)"   # the run before, kept
  "start_$what"
  if [[ "$what" == containerd ]]; then
    wait_for containerd 30 in_node "${ctr[@]}" version
  else
    wait_for kubelet 60 in_netns curl -sf http://127.0.0.1:10248/healthz
    wait_for kubelet 60 node_ready
  fi
  echo "restarted $what of $name"
}
in_netns() { ip netns exec "$netns" "$@"; }

up() {
  [[ $(id -u) == 0 ]] || { echo "realnode: needs root" >&2; return 1; }
  for b in kubelet kubectl kube-proxy kube-scheduler coredns containerd containerd-shim-runc-v2 ctr; do
    b="$TESSERA_CONTROLPLANE_BIN/$b"
    [[ -x "$b" ]] || { echo "realnode: $b missing; run tools/controlplane/build.sh" >&2; return 1; }
  done
  for b in runc gcc busybox iptables curl /usr/lib/cni/bridge; do
    command -v "$b" > /dev/null || { echo "realnode: $b missing; run scripts/setup.sh" >&2; return 1; }
  done
  [[ ! -f "$node/slot" ]] || { echo "realnode: $name is up (slot $(cat "$node/slot")); down it first" >&2; return 1; }
  local t0=$SECONDS
  rm -rf "$node"; mkdir -p "$node"
  build_images
  claim_slot
  echo "$slot" > "$node/slot"
  facts
  trap 'rc=$?; if ((rc)); then echo "realnode: up of $name failed; undoing" >&2; down >&2 || true; fi' EXIT
  locked save_host_state
  write_configs
  setup_network
  setup_mounts
  setup_cgroups
  local api_port="${TESSERA_APISERVER##*:}"
  start forward - python3 "$here/tcp_forward.py" "$host_ip" "$api_port" 127.0.0.1 "$api_port"
  start forward-in-node "$netns" python3 "$here/tcp_forward.py" "$api_vip" "$api_port" "$host_ip" "$api_port"
  start_containerd
  wait_for containerd 30 in_node "${ctr[@]}" version
  for img in pause busybox kube-scheduler; do
    in_node "${ctr[@]}" -n k8s.io images import \
      "$dir/realnode-images/$img.tar" > /dev/null
  done
  start_kubelet
  wait_for kubelet 90 node_ready
  start kube-proxy "$netns" "$TESSERA_CONTROLPLANE_BIN/kube-proxy" --config "$node/kube-proxy-config.yaml" --v=1
  start coredns "$netns" "$TESSERA_CONTROLPLANE_BIN/coredns" -conf "$node/Corefile"
  wait_for kube-proxy 30 in_netns curl -sf http://127.0.0.1:10256/healthz
  wait_for coredns 30 in_netns curl -sf http://127.0.0.1:8181/ready
  trap - EXIT
  echo "real node $name Ready in $((SECONDS - t0)) s: netns $netns, InternalIP $node_ip, logs in $node/logs"
}

# --- down --------------------------------------------------------------------
facts() {  # from the slot: the names and addresses of this node
  netns="tessera-rn${slot}"
  host_ip="10.250.${slot}.1" node_ip="10.250.${slot}.2" pod_cidr="10.251.${slot}.0/24"
}

# The node's processes: all in its pids cgroup, and any other process in its
# mount namespace (a device plugin started with `enter`).
node_pids() {
  cat "/sys/fs/cgroup/pids/tessera-rn${slot}"/cgroup.procs \
      "/sys/fs/cgroup/pids/tessera-rn${slot}"/**/cgroup.procs 2>/dev/null || true
  # Only while the namespace file is still bound (nsfs): a plain file's inode
  # number means nothing here.
  [[ "$(stat -f -c %T "$node/ns/mnt" 2>/dev/null)" == nsfs ]] || return 0
  local ns p; ns="mnt:[$(stat -L -c %i "$node/ns/mnt")]"
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/ns/mnt" 2>/dev/null)" == "$ns" ]] && echo "${p#/proc/}"
  done
  return 0
}

stop_pids() {  # SIGTERM, then SIGKILL after 10 s, to the given pids; 1 if one survives
  local pids=("$@") p
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  sleep 0.3
  for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then echo "realnode: pid $p survived SIGKILL" >&2; return 1; fi; done
}

down() {
  [[ -f "$node/slot" ]] || { echo "realnode: $name is not up"; return 0; }
  slot="$(cat "$node/slot")"
  facts
  shopt -s globstar nullglob
  local rc=0
  # The kubelet first, so it restarts nothing; then every process left in the
  # node: containers, shims, containerd, the forwarder, anything entered.
  [[ -f "$node/pids/kubelet.pid" ]] && { stop_pids "$(cat "$node/pids/kubelet.pid")" || rc=1; }
  # Containers go as on a power cut: their PID 1 often ignores SIGTERM.
  mapfile -t pids < <(cat "/sys/fs/cgroup/pids/tessera-rn${slot}"/kubepods/**/cgroup.procs 2>/dev/null)
  ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
  for _ in 1 2 3; do
    mapfile -t pids < <(node_pids | sort -u)
    ((${#pids[@]})) || break
    stop_pids "${pids[@]}" || rc=1
  done
  rm -f "$node"/pids/*.pid
  kubectl delete node "$name" --ignore-not-found --wait=false > /dev/null 2>&1 || true
  # No process holds the mount namespace now: unmounting its file frees it
  # and everything mounted inside (container root filesystems, pod netns pins).
  if mountpoint -q "$node/ns"; then
    umount "$node/ns/mnt" 2>/dev/null || true
    umount "$node/ns" || rc=1
  fi
  ip netns del "$netns" 2>/dev/null || true
  ip link del "tsrn${slot}h" 2>/dev/null || true
  local m d
  while read -r m; do
    [[ -d "$m/tessera-rn${slot}" ]] || continue
    for _ in 1 2 3 4 5; do
      find "$m/tessera-rn${slot}" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [[ -d "$m/tessera-rn${slot}" ]] || break
      sleep 0.2
    done
    [[ -d "$m/tessera-rn${slot}" ]] && { echo "realnode: cannot remove cgroup $m/tessera-rn${slot}" >&2; rc=1; }
  done < <(cgroup_mounts)
  locked restore_host_state
  rm -rf "$node/containerd/root" "$node/containerd/opt" "$node/ns" "$node/slot"
  echo "real node $name down (logs in $node/logs)"
  return $rc
}

info() {
  slot="$(cat "$node/slot")"; facts
  printf 'slot=%s\nnetns=%s\nhost_ip=%s\nnode_ip=%s\npod_cidr=%s\nnode_dir=%s\nmntns=%s\n' \
    "$slot" "$netns" "$host_ip" "$node_ip" "$pod_cidr" "$node" "$node/ns/mnt"
}

case "$verb" in
  up) up ;;
  down) down ;;
  enter) [[ -f "$node/slot" ]] || { echo "realnode: $name is not up" >&2; exit 1; }
         (($#)) || usage; exec nsenter "--mount=$node/ns/mnt" "$@" ;;
  info) [[ -f "$node/slot" ]] || { echo "realnode: $name is not up" >&2; exit 1; }; info ;;
  restart) [[ -f "$node/slot" ]] || { echo "realnode: $name is not up" >&2; exit 1; }
           (($# == 1)) || usage; restart "$1" ;;
  import) [[ -f "$node/slot" ]] || { echo "realnode: $name is not up" >&2; exit 1; }
          (($#)) || usage
          for t in "$@"; do
            nsenter "--mount=$node/ns/mnt" "${ctr[@]}" -n k8s.io \
              images import "$t" || { echo "realnode: cannot import $t into $name" >&2; exit 1; }
          done ;;
  *) usage ;;
esac
