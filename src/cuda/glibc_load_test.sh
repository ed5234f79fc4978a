#!/usr/bin/env bash
# Loads libtessera-cuda.so into a program of an older glibc, under that
# glibc's own loader, with every symbol bound at load (LD_BIND_NOW): a
# version or library the old glibc lacks fails here as it would in a user's
# image. The old glibc is Debian 11's (2.31), unpacked by scripts/setup.sh
# into third_party/glibc-old; without it the test skips (77) and says why.
#   glibc_load_test.sh LIB OLD_GLIBC_ROOT
set -u
lib=$1 root=$2
libdir=$root/lib/x86_64-linux-gnu
loader=$libdir/ld-linux-x86-64.so.2
if [[ ! -e "$loader" || ! -x "$root/usr/bin/getconf" ]]; then
  echo "skip: no older glibc in $root (scripts/setup.sh fetches Debian 11's libc6 when the mirror has it)"
  exit 77
fi
want=$("$loader" --library-path "$libdir" "$root/usr/bin/getconf" GNU_LIBC_VERSION) || {
  echo "FAIL: the old glibc does not run here without the library"; exit 1; }
got=$(LD_BIND_NOW=1 "$loader" --library-path "$libdir" --preload "$lib" \
      "$root/usr/bin/getconf" GNU_LIBC_VERSION 2>&1)
rc=$?
if [[ $rc -ne 0 || "$got" != "$want" ]]; then
  echo "FAIL: with libtessera-cuda.so preloaded under $want (exit $rc):"
  echo "$got"
  exit 1
fi
echo "libtessera-cuda.so loads and binds every symbol under $want"
