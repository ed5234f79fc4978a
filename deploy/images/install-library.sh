#!/bin/sh
# tessera-install-library DEST: the node agent's init step. Copies the
# interception library and the ld.so.preload file naming it into DEST (the
# host's node.hostPaths.libraryDir), each through a temporary name and a
# rename, so a container starting meanwhile never maps a half-written file.
set -eu
dest="${1:?usage: tessera-install-library DEST}"
src="${TESSERA_LIBRARY_SOURCE:-/usr/local/lib/tessera}"
for f in libtessera-cuda.so ld.so.preload; do
  cp "$src/$f" "$dest/.$f.tmp"
  chmod 0644 "$dest/.$f.tmp"
  mv -f "$dest/.$f.tmp" "$dest/$f"
done
echo "tessera-install-library: installed $(cat "$src/ld.so.preload") in $dest"
