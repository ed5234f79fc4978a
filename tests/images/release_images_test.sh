#!/usr/bin/env bash
# release_images_test BUILD_DIR STAGE_DIR: the images' build recipe, run
# without Docker. scripts/build-release.sh (the Dockerfile's build stage
# calls the same script) stages this build's artifacts; they are checked to
# run, the node agent's init step is run into a temporary "host" folder, and
# tests/images/dockerfile_check.py checks deploy/images/Dockerfile against the
# staged files, and must reject a broken copy of it for each rule.
set -euo pipefail
build="${1:?usage: release_images_test.sh BUILD_DIR STAGE_DIR}"
stage="${2:?usage: release_images_test.sh BUILD_DIR STAGE_DIR}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
check="$src/tests/images/dockerfile_check.py"
dockerfile="$src/deploy/images/Dockerfile"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-images-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

echo "=== scripts/build-release.sh $build $stage"
"$src/scripts/build-release.sh" "$build" "$stage"

echo "=== the staged artifacts"
for b in tessera-scheduler tessera-node kubectl-tessera; do
  "$stage/bin/$b" --help > /dev/null || fail "$b --help"
  [[ -s "$stage/packages/$b.txt" ]] || fail "no runtime packages listed for $b"
  while read -r p; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || fail "$b: package $p not installed"
  done < "$stage/packages/$b.txt"
  echo "$b: runs; runtime packages: $(tr '\n' ' ' < "$stage/packages/$b.txt")"
done
# The library is loaded into arbitrary workload images: glibc alone (libdl
# and libpthread are glibc's own, stubs since 2.34; src/cuda/glibc_compat.cc).
needed="$(readelf -d "$stage/lib/tessera/libtessera-cuda.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')"
[[ "$needed" == "ld-linux-x86-64.so.2 libc.so.6 libdl.so.2 libpthread.so.0 " ]] || fail "libtessera-cuda.so needs $needed"
echo "libtessera-cuda.so needs only: $needed"
nm -D --defined-only "$stage/lib/tessera/libtessera-cuda.so" | grep -qw cuMemAlloc_v2 || fail "libtessera-cuda.so exports no cuMemAlloc_v2"
# ld.so.preload names the library where Allocate mounts it in containers.
want="$(sed -n 's/.*kLibraryContainerPath = "\(.*\)";/\1/p' "$src/src/node/container_env.h")"
[[ -n "$want" && "$(cat "$stage/lib/tessera/ld.so.preload")" == "$want" ]] || fail "ld.so.preload: '$(cat "$stage/lib/tessera/ld.so.preload")', want '$want'"

echo "=== the node agent's init step (tessera-install-library) into a host folder"
mkdir -p "$work/host-lib"
TESSERA_LIBRARY_SOURCE="$stage/lib/tessera" "$stage/bin/tessera-install-library" "$work/host-lib"
cmp "$stage/lib/tessera/libtessera-cuda.so" "$work/host-lib/libtessera-cuda.so" || fail "library copy differs"
cmp "$stage/lib/tessera/ld.so.preload" "$work/host-lib/ld.so.preload" || fail "ld.so.preload copy differs"
TESSERA_LIBRARY_SOURCE="$stage/lib/tessera" "$stage/bin/tessera-install-library" "$work/host-lib"  # again: replaces
[[ -z "$(find "$work/host-lib" -name '.*.tmp')" ]] || fail "temporary files left"

echo "=== deploy/images/Dockerfile"
python3 "$check" "$dockerfile" "$stage" --root-stage tessera-node

# Each broken copy must be refused, with the rule's message.
expect_refused() {  # expect_refused WHAT MESSAGE SED-SCRIPT
  sed "$3" "$dockerfile" > "$work/Dockerfile.bad"
  if out="$(python3 "$check" "$work/Dockerfile.bad" "$stage" --root-stage tessera-node)"; then
    fail "$1: passed"
  fi
  grep -q "$2" <<<"$out" || fail "$1: $out"
  echo "refused as it should: $1"
}
expect_refused "unpinned base image" "is not pinned" 's|^FROM ${DEBIAN_SLIM} AS tessera-scheduler|FROM debian AS tessera-scheduler|'
expect_refused ":latest base image" "is not pinned" 's|^ARG DEBIAN=debian:12.11$|ARG DEBIAN=debian:latest|'
expect_refused "ADD of a URL" "ADD is not allowed" 's|^WORKDIR /src|ADD https://example.com/x.tgz /x\nWORKDIR /src|'
expect_refused "root scheduler" "tessera-scheduler runs as root" '0,/^USER 65532:65532/s//USER root/'
expect_refused "no USER" "sets no USER" '0,/^USER 65532:65532/{//d}'
expect_refused "COPY --from unknown stage" "names no earlier stage" 's|COPY --from=artifacts /stage/bin/kubectl-tessera|COPY --from=builder /stage/bin/kubectl-tessera|'
expect_refused "file not staged" "not in the staged build output" 's|/stage/bin/tessera-node /usr|/stage/bin/tessera-nodes /usr|'
expect_refused "another build recipe" "build-release.sh" 's|./scripts/build-release.sh /build /stage|cmake -S . -B /build \&\& cmake --build /build|'
expect_refused "artifacts from elsewhere" "not build or staged" 's|^FROM ${ARTIFACTS} AS artifacts|FROM ${DEBIAN} AS artifacts|'
expect_refused "staged copies the context" "may only COPY stage/ /stage/" 's|^COPY stage/ /stage/|COPY . /stage/|'
expect_refused "shell-form ENTRYPOINT" "exec form" 's|^ENTRYPOINT \["/usr/local/bin/tessera-scheduler"\]|ENTRYPOINT /usr/local/bin/tessera-scheduler|'
echo "PASS"
