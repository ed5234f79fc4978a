#!/usr/bin/env bash
# The one build recipe of Tessera's release artifacts, shared by the image
# build (deploy/images/Dockerfile, build stage) and CI (ctest
# release_images_test), so what CI checks is what the images ship.
#
#   scripts/build-release.sh BUILD_DIR STAGE_DIR
#
# Configures BUILD_DIR as CI's build is (RelWithDebInfo, -Werror; no
# benchmarks) unless it already holds a CMake build (CI passes its own build
# folder, so nothing is rebuilt), builds the shipped targets, and stages them
# without their debug sections:
#   STAGE_DIR/bin/tessera-scheduler, tessera-node, kubectl-tessera,
#                 tessera-install-library (the node agent's init step)
#   STAGE_DIR/lib/tessera/libtessera-cuda.so, ld.so.preload
#   STAGE_DIR/packages/<binary>.txt  Debian packages each binary's shared
#                 libraries come from (the runtime stages install these)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:?usage: build-release.sh BUILD_DIR STAGE_DIR}"
stage="${2:?usage: build-release.sh BUILD_DIR STAGE_DIR}"
jobs="${JOBS:-$(nproc)}"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON -DTESSERA_BUILD_BENCH=OFF
fi
cmake --build "$build" -j "$jobs" --target tessera-scheduler tessera-node kubectl-tessera tessera-cuda

rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib/tessera" "$stage/packages"
for b in tessera-scheduler tessera-node kubectl-tessera; do
  install -m 0755 --strip "$build/bin/$b" "$stage/bin/$b"
done
lib="$(find "$build/src/cuda" -maxdepth 2 -name 'libtessera-cuda.so' -print -quit)"
[[ -n "$lib" ]] || { echo "build-release: libtessera-cuda.so not found under $build/src/cuda" >&2; exit 1; }
install -m 0644 "$lib" "$stage/lib/tessera/libtessera-cuda.so"
strip --strip-debug "$stage/lib/tessera/libtessera-cuda.so"
# What sharing containers find at /etc/ld.so.preload: the library's path
# inside them (src/node/container_env.h, kLibraryContainerPath).
echo /usr/local/lib/tessera/libtessera-cuda.so > "$stage/lib/tessera/ld.so.preload"
install -m 0755 "$root/deploy/images/install-library.sh" "$stage/bin/tessera-install-library"

# Runtime packages: the Debian package of each shared library a binary names
# (DT_NEEDED; apt brings their own dependencies), minus libc's and the
# compiler runtime's, which every Debian image has.
for f in "$stage/bin/tessera-scheduler" "$stage/bin/tessera-node" "$stage/bin/kubectl-tessera" \
         "$stage/lib/tessera/libtessera-cuda.so"; do
  name="$(basename "$f" .so)"
  resolved="$(ldd "$f")"
  for needed in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ "$needed" == ld-linux* ]] && continue   # the dynamic loader: libc6
    so="$(awk -v n="$needed" '$1 == n && $2 == "=>" {print $3}' <<<"$resolved")"
    [[ -n "$so" ]] || { echo "build-release: $f needs $needed, which ldd does not resolve" >&2; exit 1; }
    dpkg -S "$(readlink -f "$so")" 2>/dev/null || dpkg -S "$so"
  done | cut -d: -f1 | sort -u | { grep -vx 'libc6\|libgcc-s1\|libstdc++6' || true; } > "$stage/packages/$name.txt"
done
echo "build-release: staged in $stage"
