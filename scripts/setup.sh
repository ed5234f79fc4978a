#!/usr/bin/env bash
# Installs everything Tessera's build and tests need, from Debian packages.
# Idempotent: packages already present are not touched, so a second run is
# quick and needs no network. Later components add their packages here.
# Then builds the local control plane (kube-apiserver, kube-scheduler, kubectl,
# etcd) from pinned Go modules; skip that with TESSERA_SKIP_CONTROLPLANE=1.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ make pkg-config
  clang-14 libclang-rt-14-dev         # fuzzing (libFuzzer) and sanitizer runtimes
  libgtest-dev libgmock-dev           # unit tests
  libbenchmark-dev                    # bench/
  nlohmann-json3-dev                  # annotation codec
  libcli11-dev                        # command-line flags
  gnuplot-nox                         # tessera-sim plot
  libcurl4-openssl-dev                # src/kube REST client
  libcpp-httplib-dev                  # extender HTTP server
  libyaml-cpp-dev                     # scheduler configuration file
  libspdlog-dev                       # structured logs
  libgrpc++-dev protobuf-compiler-grpc  # node agent: device plugin gRPC (proto/)
  libprotobuf-dev protobuf-compiler
  openssl                             # local control plane certificates
  curl                                # control plane readiness checks
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

if [[ "${TESSERA_SKIP_CONTROLPLANE:-0}" != 1 ]]; then
  "$(dirname "${BASH_SOURCE[0]}")/../tools/controlplane/build.sh"
fi
echo "setup: done"
