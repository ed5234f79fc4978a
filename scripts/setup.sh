#!/usr/bin/env bash
# Installs everything Tessera's build and tests need, from Debian packages.
# Idempotent: packages already present are not touched, so a second run is
# quick and needs no network. Later components add their packages here.
# Then builds the local control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd), the kubelet, kube-proxy, CoreDNS and
# containerd 2 for real nodes, and helm (for the chart test) from pinned Go
# modules; skip that with TESSERA_SKIP_CONTROLPLANE=1.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ make pkg-config
  ccache                              # compiler cache outside the clone (~/.cache/ccache): rebuilds and CI reuse objects
  clang-14 libclang-rt-14-dev         # fuzzing (libFuzzer) and sanitizer runtimes
  libgtest-dev libgmock-dev           # unit tests
  libbenchmark-dev                    # bench/
  nlohmann-json3-dev                  # annotation codec
  libcli11-dev                        # command-line flags
  gnuplot-nox                         # tessera-sim plot
  libglpk-dev                         # tessera-sim: the LP bound on packing the shares a replay placed
  libcurl4-openssl-dev                # src/kube REST client
  libcpp-httplib-dev                  # extender HTTP server
  libyaml-cpp-dev                     # scheduler configuration file
  libspdlog-dev                       # structured logs
  libgrpc++-dev protobuf-compiler-grpc  # node agent: device plugin gRPC (proto/)
  libprotobuf-dev protobuf-compiler
  openssl                             # local control plane certificates
  curl                                # control plane readiness checks
  prometheus                          # promtool: `promtool check metrics` on /metrics (metrics_promtool_test)
  tmux                                # kubectl-tessera terminal captures (scripts/kubectl-tessera-captures.sh)
  buildah mmdebstrap                  # Tessera's images from deploy/images/Dockerfile without a daemon (scripts/build-images.sh)
  valgrind                            # callgrind instruction counts of the hooked CUDA path (bench/hook_instructions.sh)
  runc                                # real nodes (tools/realnode/): the OCI runtime under each node's containerd
                                      # (containerd 2 itself is built by tools/controlplane/build.sh)
  containernetworking-plugins         # real nodes: the CNI bridge, host-local and loopback plugins
  iptables                            # real nodes: kube-proxy's Service rules in each node's netns
  busybox-static                      # real nodes: the shell image's only binary; `pause` is built with gcc -static
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CUDA and NVML headers for src/cuda (the interception library), from NVIDIA's
# wheels on PyPI, so the build needs no CUDA install. Pinned; unpacked into
# third_party/cuda/<version>/include (git-ignored); skipped when present.
# 12.9 is what the library builds against; 13.0 is only read by the test that
# checks every allocating entry point in the headers has a hook.
fetch_cuda_headers() {  # fetch_cuda_headers VERSION DEST_DIR WHEEL_PREFIX PKG...
  local version=$1 dest=$2 prefix=$3; shift 3
  [[ -f "$dest/include/cuda.h" ]] && return 0
  local tmp; tmp=$(mktemp -d)
  for pkg in "$@"; do
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$pkg" >/dev/null
  done
  rm -rf "$dest.partial"; mkdir -p "$dest.partial/include"
  for whl in "$tmp"/*.whl; do
    python3 - "$whl" "$dest.partial/include" "$prefix" <<'PY'
import sys, zipfile, os
whl, out, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(prefix) and "/include/" in n and not n.endswith("/"):
            rel = n.split("/include/", 1)[1]
            os.makedirs(os.path.dirname(os.path.join(out, rel)) or out, exist_ok=True)
            with open(os.path.join(out, rel), "wb") as f:
                f.write(z.read(n))
PY
  done
  rm -rf "$tmp" "$dest"
  mv "$dest.partial" "$dest"
  echo "setup: CUDA headers $version in $dest"
}
CUDA_HEADERS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/cuda"
fetch_cuda_headers 12.9.79 "$CUDA_HEADERS_DIR/12.9" nvidia/ \
  nvidia-cuda-runtime-cu12==12.9.79 nvidia-nvml-dev-cu12==12.9.79
fetch_cuda_headers 13.0.96 "$CUDA_HEADERS_DIR/13.0" nvidia/ nvidia-cuda-runtime==13.0.96

# CUDA 13.0's compiler (nvcc, cicc, ptxas), its headers and the static
# runtime, from NVIDIA's wheels on PyPI, so `tests/gpu/run.sh --check`
# compiles every GPU test for Hopper here, before any GPU time is spent.
# Only compiles: nothing built with it runs here. Pinned; unpacked into
# third_party/cuda/nvcc-13.0 (git-ignored); skipped when present.
fetch_nvcc() {  # fetch_nvcc DEST_DIR PKG...
  local dest=$1; shift
  [[ -x "$dest/bin/nvcc" ]] && return 0
  local tmp; tmp=$(mktemp -d)
  if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$@" >/dev/null; then
    echo "setup: warning: could not fetch nvcc; run.sh --check will not compile the GPU tests" >&2
    rm -rf "$tmp"; return 0
  fi
  rm -rf "$dest.partial"; mkdir -p "$dest.partial"
  python3 - "$tmp" "$dest.partial" <<'PY'
import glob, os, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
for whl in glob.glob(os.path.join(tmp, "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            # nvidia/cu13/<bin|include|lib|nvvm>/...
            if len(parts) < 4 or parts[0] != "nvidia" or info.is_dir():
                continue
            rel = os.path.join(out, *parts[2:])
            os.makedirs(os.path.dirname(rel), exist_ok=True)
            with open(rel, "wb") as f:
                f.write(z.read(info))
            if parts[2] in ("bin", "nvvm") and "/bin/" in info.filename:
                os.chmod(rel, 0o755)
PY
  # nvcc.profile looks for headers under targets/<arch>-linux.
  mkdir -p "$dest.partial/targets" && ln -s .. "$dest.partial/targets/$(uname -m)-linux"
  # What a toolkit has beside: the runtime's link name, and a link stub of
  # the driver (lib/stubs/libcuda.so): every cu* function cuda.h declares,
  # as plain and per-thread-stream builds name them, doing nothing.
  ln -s libcudart.so.13 "$dest.partial/lib/libcudart.so"
  mkdir -p "$dest.partial/lib/stubs"
  { for flag in -DTESSERA_PLAIN -DCUDA_API_PER_THREAD_DEFAULT_STREAM; do
      cc -E -P "$flag" -I"$dest.partial/include" "$dest.partial/include/cuda.h"
    done; } | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | tr -d ' (' | sort -u |
    sed 's/.*/void &(void) {}/' >"$tmp/libcuda_stub.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$dest.partial/lib/stubs/libcuda.so" "$tmp/libcuda_stub.c"
  rm -rf "$tmp" "$dest"
  mv "$dest.partial" "$dest"
  echo "setup: nvcc 13.0 in $dest"
}
if [[ $(uname -m) == x86_64 ]]; then
  fetch_nvcc "$CUDA_HEADERS_DIR/nvcc-13.0" nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
fi

# An older glibc for cuda_glibc_load_test, which loads libtessera-cuda.so
# under it: Debian 11's libc6 and libc-bin (glibc 2.31, as in Ubuntu 20.04
# images, before libpthread and libdl merged into libc). Fetched with apt
# from the Debian mirror this machine already uses, into private lists
# (the system's apt configuration is not touched); unpacked, never
# installed, into third_party/glibc-old (git-ignored). Optional: without it
# the test skips and says why.
fetch_old_glibc() {  # fetch_old_glibc DEST_DIR
  local dest=$1 suite=bullseye
  [[ -x "$dest/usr/bin/getconf" ]] && return 0
  [[ $(dpkg --print-architecture 2>/dev/null) == amd64 ]] || return 0
  local mirror
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
           awk '$2 !~ /security|updates|backports/ {print $1; exit}')
  if [[ -z "$mirror" ]]; then
    echo "setup: warning: no Debian mirror configured; cuda_glibc_load_test will skip" >&2
    return 0
  fi
  local tmp; tmp=$(mktemp -d)
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb $mirror $suite main" > "$tmp/sources.list"
  local apt=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/nonexistent
             -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o APT::Sandbox::User=root)
  local version
  if apt-get "${apt[@]}" -qq update >/dev/null 2>&1 &&
     version=$(apt-cache "${apt[@]}" madison libc6 | awk -v s="$suite" '$0 ~ s {print $3; exit}') &&
     [[ -n "$version" ]] &&
     (cd "$tmp" && apt-get "${apt[@]}" -qq download "libc6=$version" "libc-bin=$version" >/dev/null 2>&1); then
    rm -rf "$dest.partial" "$dest"; mkdir -p "$dest.partial"
    for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$dest.partial"; done
    mv "$dest.partial" "$dest"
    echo "setup: glibc $version ($suite) in $dest"
  else
    echo "setup: warning: could not fetch $suite's libc6; cuda_glibc_load_test will skip" >&2
  fi
  rm -rf "$tmp"
}
fetch_old_glibc "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/glibc-old"

if [[ "${TESSERA_SKIP_CONTROLPLANE:-0}" != 1 ]]; then
  "$(dirname "${BASH_SOURCE[0]}")/../tools/controlplane/build.sh"
  "$(dirname "${BASH_SOURCE[0]}")/../tools/controlplane/build-helm.sh"
fi
echo "setup: done"
