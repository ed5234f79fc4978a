#!/usr/bin/env python3
"""release_images_run_test: the OCI archives scripts/build-images.sh wrote run.

  image_run_test.py IMAGES_DIR

For each image listed in IMAGES_DIR/images.txt (`make images` writes it):
reads the archive's index, manifest and config as a container runtime
would; checks the name, entrypoint, user and exposed port the Dockerfile
declares; unpacks its layers into a root filesystem (applying whiteouts)
and runs the entrypoint there with --help under chroot, so every shared
library the binary needs is in the image. For tessera-node it also runs the
image's init step (tessera-install-library) into a folder standing in for
the host's library folder.

Exit 77 (ctest: skipped) when IMAGES_DIR has no images.txt or this is not
root, unless TESSERA_REQUIRE_IMAGES=1 (`make test` sets it), which makes
those failures.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

# What deploy/images/Dockerfile declares for each target.
EXPECTED = {
    "tessera-scheduler": {"entrypoint": ["/usr/local/bin/tessera-scheduler"], "user": "65532:65532",
                          "ports": {"12345/tcp"}},
    "tessera-node": {"entrypoint": ["/usr/local/bin/tessera-node"], "user": "0:0", "ports": {"9410/tcp"}},
    "kubectl-tessera": {"entrypoint": ["/usr/local/bin/kubectl-tessera"], "user": "65532:65532", "ports": set()},
}


def skip_or_fail(msg):
    if os.environ.get("TESSERA_REQUIRE_IMAGES") == "1":
        print("FAIL:", msg)
        sys.exit(1)
    print("SKIP:", msg)
    sys.exit(77)


def blob(archive, digest):
    algo, hexd = digest.split(":", 1)
    return archive.extractfile(f"blobs/{algo}/{hexd}")


def unpack(archive, layers, rootfs):
    """Applies each layer in order, as the OCI image spec's layer rules say."""
    for layer in layers:
        with tarfile.open(fileobj=blob(archive, layer["digest"]), mode="r:*") as t:
            members = []
            for m in t.getmembers():
                d, base = os.path.split(m.name)
                if base == ".wh..wh..opq":
                    target = os.path.join(rootfs, d)
                    for e in os.listdir(target) if os.path.isdir(target) else []:
                        p = os.path.join(target, e)
                        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
                elif base.startswith(".wh."):
                    p = os.path.join(rootfs, d, base[4:])
                    if os.path.isdir(p) and not os.path.islink(p):
                        shutil.rmtree(p)
                    elif os.path.lexists(p):
                        os.remove(p)
                else:
                    members.append(m)
            # Pythons with extraction filters (3.12, and later 3.11 builds) want
            # one named; these layers are ours, and their links must stay as built.
            trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
            t.extractall(rootfs, members=members, numeric_owner=True, **trusted)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    images_dir = sys.argv[1]
    listing = os.path.join(images_dir, "images.txt")
    if not os.path.exists(listing):
        skip_or_fail(f"{listing} missing: run `make images` (scripts/build-images.sh)")
    if os.geteuid() != 0:
        skip_or_fail("needs root to chroot into the images")
    seen = set()
    for line in open(listing):
        path, ref = line.split()
        target = ref.split("/")[-1].split(":")[0]
        want = EXPECTED.get(target)
        if want is None:
            print(f"FAIL: {ref}: not a target this test knows")
            return 1
        seen.add(target)
        with tarfile.open(path) as archive:
            index = json.load(archive.extractfile("index.json"))
            names = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in index["manifests"]]
            if ref not in names:
                print(f"FAIL: {path}: names {names}, not {ref}")
                return 1
            manifest = json.load(blob(archive, index["manifests"][0]["digest"]))
            config = json.load(blob(archive, manifest["config"]["digest"]))["config"]
            problems = []
            if config.get("Entrypoint") != want["entrypoint"]:
                problems.append(f"entrypoint {config.get('Entrypoint')}")
            if config.get("User") != want["user"]:
                problems.append(f"user {config.get('User')}")
            if set(config.get("ExposedPorts") or {}) != want["ports"]:
                problems.append(f"ports {sorted(config.get('ExposedPorts') or {})}")
            if problems:
                print(f"FAIL: {ref}: {', '.join(problems)}")
                return 1
            with tempfile.TemporaryDirectory(prefix="tessera-image-") as rootfs:
                unpack(archive, manifest["layers"], rootfs)
                run = subprocess.run(["chroot", rootfs] + want["entrypoint"] + ["--help"],
                                     capture_output=True, text=True, timeout=60)
                if run.returncode != 0:
                    print(f"FAIL: {ref}: {want['entrypoint'][0]} --help exited {run.returncode}: {run.stderr[-500:]}")
                    return 1
                extra = ""
                if target == "tessera-node":
                    os.makedirs(os.path.join(rootfs, "host-lib"))
                    init = subprocess.run(["chroot", rootfs, "/usr/local/bin/tessera-install-library", "/host-lib"],
                                          capture_output=True, text=True, timeout=60)
                    got = sorted(os.listdir(os.path.join(rootfs, "host-lib")))
                    if init.returncode != 0 or got != ["ld.so.preload", "libtessera-cuda.so"]:
                        print(f"FAIL: {ref}: init step exited {init.returncode}, installed {got}: {init.stderr[-500:]}")
                        return 1
                    extra = "; init step installed the library and ld.so.preload"
                size = sum(l["size"] for l in manifest["layers"]) / 2**20
                print(f"{ref}: {len(manifest['layers'])} layers, {size:.0f} MiB compressed; user {config['User']}; "
                      f"{want['entrypoint'][0]} --help runs in its root filesystem{extra}")
    missing = set(EXPECTED) - seen
    if missing:
        print(f"FAIL: images.txt lacks {sorted(missing)}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
