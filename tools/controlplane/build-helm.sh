#!/usr/bin/env bash
# Builds helm (pinned) from its Go module into tools/controlplane/bin, beside
# the control plane. Helm is built in its own module (go install pkg@version),
# not from tools/controlplane/go.mod, so its dependency versions never fight
# the pinned Kubernetes release's. The link flags are those of helm's own
# Makefile: its version, and the Kubernetes version `helm template` and
# `helm lint` assume without a cluster (from helm's client-go, as upstream).
# Skipped when bin/helm was built by this script as it is (a stamp records
# its hash). Used by the chart test (tests/e2e/helm_chart_test.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
helm_version=v3.22.0
stamp="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"

if [[ -x "$here/bin/helm" && -f "$here/bin/.helm-stamp" && "$(cat "$here/bin/.helm-stamp")" == "$stamp" ]]; then
  echo "helm $helm_version already built in $here/bin"
  exit 0
fi
command -v go >/dev/null || { echo "build-helm.sh: Go is required" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" CGO_ENABLED=0
unset GOFLAGS
mkdir -p "$here/bin"
echo "building helm $helm_version"
start=$SECONDS
gomod="$(go mod download -json "helm.sh/helm/v3@$helm_version" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')"
client_go="$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")"   # v0.MINOR.PATCH
k8s_minor="$(cut -d. -f2 <<<"$client_go")"
[[ -n "$k8s_minor" ]] || { echo "build-helm.sh: no k8s.io/client-go in $gomod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
done
GOBIN="$here/bin" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$helm_version"
echo "$stamp" > "$here/bin/.helm-stamp"
echo "built helm $helm_version (default Kubernetes 1.$k8s_minor) in $((SECONDS - start)) s into $here/bin"
