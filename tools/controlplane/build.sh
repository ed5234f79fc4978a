#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, the
# kubelet, kube-proxy and etcd from the pinned Go modules into
# tools/controlplane/bin, CoreDNS from tools/coredns, and containerd 2 (the
# daemon, its runc shim and ctr) from tools/containerd (the kubelet,
# kube-proxy, CoreDNS and containerd run real nodes: tools/realnode/). Skips
# the build when the binaries match the current go.mod/go.sum files (a stamp
# records their hash); Go's module and build caches make a rebuild on the same
# machine quick.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

k8s_version="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' go.mod)"
[[ -n "$k8s_version" ]] || { echo "build.sh: k8s.io/kubernetes not found in go.mod" >&2; exit 1; }
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
containerd_version="$(awk '$1=="github.com/containerd/containerd/v2"{print $2; exit}' ../containerd/go.mod)"
[[ -n "$containerd_version" ]] || { echo "build.sh: containerd not found in ../containerd/go.mod" >&2; exit 1; }
stamp="$(cat go.mod go.sum cmd/etcd/main.go build.sh ../coredns/go.mod ../coredns/go.sum ../coredns/main.go \
          ../containerd/go.mod ../containerd/go.sum | sha256sum | cut -c1-16)"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy etcd coredns
      containerd containerd-shim-runc-v2 ctr)

if [[ -f bin/.stamp && "$(cat bin/.stamp)" == "$stamp" ]]; then
  ok=1
  for b in "${bins[@]}"; do [[ -x "bin/$b" ]] || ok=0; done
  if (( ok )); then echo "control plane $k8s_version already built in $here/bin"; exit 0; fi
fi

command -v go >/dev/null || { echo "build.sh: Go is required (>= 1.24, or any Go >= 1.21 with GOTOOLCHAIN=auto)" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" CGO_ENABLED=0 GOFLAGS=-mod=mod
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version}"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${k8s_version}"
ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"

echo "building control plane $k8s_version and containerd $containerd_version (a first build downloads ~1 GB of modules and compiles for ~20 CPU-minutes)"
mkdir -p bin
start=$SECONDS
go build -trimpath -ldflags "$ldflags" -o bin/ \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-proxy \
  ./cmd/etcd
(cd ../coredns && go build -trimpath -ldflags "-s -w" -o "$here/bin/coredns" .)
# containerd as its release Makefile builds it, less cgo: without cgo the btrfs
# snapshotter drops out by itself; the tags drop the other snapshotters a node
# here never uses (devmapper, zfs), and the shim leaves out gRPC (no_grpc), as
# upstream's shim build does. The real node's config disables them too.
ctrd=github.com/containerd/containerd/v2
ctrd_ldflags="-s -w -X $ctrd/version.Version=$containerd_version"
ctrd_tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
(cd ../containerd &&
   go build -trimpath -tags "$ctrd_tags" -ldflags "$ctrd_ldflags" -o "$here/bin/" "$ctrd/cmd/containerd" "$ctrd/cmd/ctr" &&
   go build -trimpath -tags "$ctrd_tags no_grpc" -ldflags "$ctrd_ldflags" -o "$here/bin/" "$ctrd/cmd/containerd-shim-runc-v2")
echo "$stamp" > bin/.stamp
echo "built ${bins[*]} in $((SECONDS - start)) s into $here/bin"
