#!/usr/bin/env bash
# Builds Tessera's release images from deploy/images/Dockerfile without a
# Docker daemon or a registry, as OCI archives a container runtime imports
# (`ctr -n k8s.io images import`). CI and the local cluster run these.
#
#   scripts/build-images.sh BUILD_DIR OUT_DIR
#
# 1. scripts/build-release.sh BUILD_DIR stages the artifacts of BUILD_DIR's
#    build (the one the tests ran), as the Dockerfile's build stage would.
# 2. The Dockerfile's runtime targets are built by buildah (Debian's), with
#    ARTIFACTS=staged, so they copy those artifacts instead of compiling
#    again, and with a Debian 12 base made by mmdebstrap from the Debian
#    mirror apt already uses, in place of the pinned debian:12.11-slim:
#    nothing is pulled from an image registry. The runtime stages' own
#    `apt-get install` reaches the same mirror (host network, as setup.sh).
# 3. Each target is written to OUT_DIR/<target>.tar, named
#    tessera.local/<target>:$TAG (TAG defaults to "local"), and listed in
#    OUT_DIR/images.txt ("<archive> <image name>").
#
# The base is cached outside the clone ($TESSERA_CACHE_DIR, default
# ~/.cache/tessera) and remade after 30 days. buildah keeps its storage
# under OUT_DIR/buildah, so nothing outside OUT_DIR and the cache changes.
# Needs root (buildah's chroot isolation and mmdebstrap write as root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:?usage: build-images.sh BUILD_DIR OUT_DIR}"
out="${2:?usage: build-images.sh BUILD_DIR OUT_DIR}"
tag="${TAG:-local}"
targets=(tessera-scheduler tessera-node kubectl-tessera)
cache="${TESSERA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera}"
base_tar="$cache/debian-12-base.tar"
base_ref=localhost/tessera-debian-base:12
start=$SECONDS

for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "build-images: $tool missing; run scripts/setup.sh" >&2; exit 1; }
done
[[ $(id -u) -eq 0 ]] || { echo "build-images: needs root (buildah --isolation chroot, mmdebstrap)" >&2; exit 1; }
mkdir -p "$out" "$cache"
out="$(cd "$out" && pwd)"

echo "build-images: staging the artifacts of $build"
rm -rf "$out/context"
"$root/scripts/build-release.sh" "$build" "$out/context/stage" > "$out/build-release.log"

# The base: Debian 12 minbase, trimmed as the -slim images are (no manuals,
# docs or translations), from the first non-security mirror apt is set up with.
if [[ ! -s "$base_tar" ]] || [[ -n "$(find "$base_tar" -mtime +30)" ]]; then
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
           awk '$2 !~ /security|updates|backports/ {print $1; exit}')
  [[ -n "$mirror" ]] || { echo "build-images: no Debian mirror in apt's sources" >&2; exit 1; }
  echo "build-images: making the Debian 12 base from $mirror (once; cached in $cache)"
  mmdebstrap --quiet --variant=minbase --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$base_tar.partial" "deb $mirror bookworm main"
  mv "$base_tar.partial" "$base_tar"
fi

export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
bah=(buildah --root "$out/buildah/storage" --runroot "$out/buildah/run")
cleanup() { "${bah[@]}" rm --all >/dev/null 2>&1 || true; }
trap cleanup EXIT
# Import the base into this storage once per base tarball (a remade one is
# imported again).
base_id="$(stat -c '%s-%Y' "$base_tar")"
if [[ "$(cat "$out/buildah/base.stamp" 2>/dev/null)" != "$base_id" ]] ||
   ! "${bah[@]}" inspect --type image "$base_ref" >/dev/null 2>&1; then
  "${bah[@]}" rmi --force "$base_ref" >/dev/null 2>&1 || true
  c=$("${bah[@]}" from scratch)
  m=$("${bah[@]}" mount "$c")
  tar -C "$m" -xf "$base_tar"
  "${bah[@]}" umount "$c" >/dev/null
  "${bah[@]}" commit --quiet "$c" "$base_ref" >/dev/null
  "${bah[@]}" rm "$c" >/dev/null
  echo "$base_id" > "$out/buildah/base.stamp"
fi

: > "$out/images.txt.partial"
for t in "${targets[@]}"; do
  ref="tessera.local/$t:$tag"
  echo "build-images: $ref"
  "${bah[@]}" bud --quiet --isolation chroot --network host --layers=false \
    --build-arg ARTIFACTS=staged --build-arg DEBIAN_SLIM="$base_ref" --build-arg DEBIAN="$base_ref" \
    --target "$t" -t "$ref" -f "$root/deploy/images/Dockerfile" "$out/context" > "$out/$t.log" 2>&1 \
    || { tail -n 30 "$out/$t.log" >&2; echo "build-images: $t failed (log: $out/$t.log)" >&2; exit 1; }
  rm -f "$out/$t.tar"
  "${bah[@]}" push --quiet "$ref" "oci-archive:$out/$t.tar:$ref" >> "$out/$t.log" 2>&1
  "${bah[@]}" rmi "$ref" >/dev/null
  echo "$out/$t.tar $ref" >> "$out/images.txt.partial"
done
mv "$out/images.txt.partial" "$out/images.txt"
rm -rf "$out/context"
echo "build-images: ${#targets[@]} images in $out in $((SECONDS - start)) s"
