#!/usr/bin/env python3
"""Writes a single-layer OCI image tarball (oci-layout, index.json, blobs) from
local files, for `ctr -n k8s.io images import`: how the real-node harness
(tools/realnode) gets images into a node's containerd with no registry and no
Docker daemon.

  oci_image.py OUT.tar NAME:TAG --add SRC:DEST [--add-binary SRC:DEST ...] [--libs-of SRC ...]
               [--link NAME:TARGET ...] [--dir DEST ...] [--env KEY=VALUE ...] -- CMD...

--add copies file SRC to DEST in the image (mode kept); --add-binary does
the same for a dynamically linked program or library and also adds every
shared library `ldd` finds for it (into /lib/<multiarch>/ by file name, the
dynamic loader at its own path); --libs-of adds only those libraries, for a
library the container gets mounted later; --link makes a symlink; --dir an
empty folder; --env sets the image's environment (PATH=/bin when none is
given). CMD is the image's default command (no
entrypoint, so a pod's `command` or `args` replace it, as with Docker's busybox). Everything is owned by root; timestamps are
0, so the same inputs give the same digests. The index entry carries the
io.containerd.image.name annotation (NAME:TAG) and linux/amd64-style platform
of this machine.
"""
import argparse
import hashlib
import io
import json
import os
import platform
import subprocess
import tarfile

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def tar_info(name, kind, mode=0o755, size=0, link=""):
    info = tarfile.TarInfo(name.lstrip("/"))
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.uid = info.gid = 0
    info.mtime = 0
    return info


def shared_libraries(path):
    """(SRC, DEST) of each shared library `ldd PATH` resolves, the loader included."""
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                               check=True).stdout.strip()
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
            libs.append((os.path.realpath(parts[2]), f"/lib/{multiarch}/{parts[0]}"))
        elif parts and parts[0].startswith("/"):   # the dynamic loader, at the path programs name
            libs.append((os.path.realpath(parts[0]), parts[0]))
    return libs


def layer(adds, links, dirs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        parents = set()
        for dest in [d for _, d in adds] + [n for n, _ in links] + dirs:
            p = os.path.dirname(dest.rstrip("/"))
            while p not in ("", "/"):
                parents.add(p)
                p = os.path.dirname(p)
        for d in sorted(parents | set(dirs)):
            t.addfile(tar_info(d, tarfile.DIRTYPE))
        for src, dest in adds:
            data = open(src, "rb").read()
            t.addfile(tar_info(dest, tarfile.REGTYPE, os.stat(src).st_mode & 0o777, len(data)), io.BytesIO(data))
        for name, target in links:
            t.addfile(tar_info(name, tarfile.SYMTYPE, 0o777, link=target))
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("ref")
    ap.add_argument("--add", action="append", default=[])
    ap.add_argument("--link", action="append", default=[])
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--add-binary", action="append", default=[])
    ap.add_argument("--libs-of", action="append", default=[])
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    blobs = {}

    def blob(data, media_type):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    adds = [x.split(":", 1) for x in a.add + a.add_binary]
    for src in [x.split(":", 1)[0] for x in a.add_binary] + a.libs_of:
        adds += shared_libraries(src)
    seen, unique = set(), []
    for src, dest in adds:
        if dest not in seen:
            seen.add(dest)
            unique.append((src, dest))
    layer_tar = layer(unique, [x.split(":", 1) for x in a.link], a.dir)
    layer_desc = blob(layer_tar, "application/vnd.oci.image.layer.v1.tar")
    config = {"architecture": ARCH, "os": "linux",
              "config": {"Cmd": a.cmd, "Env": a.env or ["PATH=/bin"]},
              "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]}}
    config_desc = blob(json.dumps(config, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer_desc]}
    manifest_desc = blob(json.dumps(manifest, sort_keys=True).encode(), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["platform"] = {"architecture": ARCH, "os": "linux"}
    manifest_desc["annotations"] = {"io.containerd.image.name": a.ref,
                                    "org.opencontainers.image.ref.name": a.ref.rsplit(":", 1)[-1]}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [manifest_desc]}
    with tarfile.open(a.out, "w") as t:
        def put(name, data, kind=tarfile.REGTYPE):
            t.addfile(tar_info(name, kind, 0o644 if kind == tarfile.REGTYPE else 0o755, len(data)), io.BytesIO(data))
        put("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        put("index.json", json.dumps(index, sort_keys=True).encode())
        put("blobs", b"", tarfile.DIRTYPE)
        put("blobs/sha256", b"", tarfile.DIRTYPE)
        for digest, data in sorted(blobs.items()):
            put("blobs/sha256/" + digest.split(":", 1)[1], data)


if __name__ == "__main__":
    main()
