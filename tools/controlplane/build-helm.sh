#!/usr/bin/env bash
# Builds helm (pinned) from its Go module into tools/controlplane/bin, beside
# the control plane. Helm is built in its own module (go install pkg@version),
# not from tools/controlplane/go.mod, so its dependency versions never fight
# the pinned Kubernetes release's. Skipped when bin/helm reports the pinned
# version. Used by the chart test (tests/e2e/helm_chart_test.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
helm_version=v3.22.0

if [[ -x "$here/bin/helm" ]] &&
   [[ "$("$here/bin/helm" version --template '{{.Version}}' 2>/dev/null)" == "$helm_version" ]]; then
  echo "helm $helm_version already built in $here/bin"
  exit 0
fi
command -v go >/dev/null || { echo "build-helm.sh: Go is required" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" CGO_ENABLED=0
unset GOFLAGS
mkdir -p "$here/bin"
echo "building helm $helm_version"
start=$SECONDS
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
GOBIN="$here/bin" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$helm_version"
echo "built helm $helm_version in $((SECONDS - start)) s into $here/bin"
