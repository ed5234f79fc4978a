#!/usr/bin/env python3
"""Checks deploy/images/Dockerfile without a Docker engine.

  dockerfile_check.py DOCKERFILE STAGE_DIR [--root-stage NAME ...]

STAGE_DIR is what scripts/build-release.sh staged (CI runs it first). Rules,
each failure printed with its line:
  - every FROM names a pinned tag (not :latest, not untagged) or a digest,
    an earlier stage or `scratch`, with ${ARG}s read from the global ARGs'
    defaults (before the first FROM); stage names are unique;
  - the stage named `build` runs the recipe below; `staged` (if present)
    copies only the build context's stage/; `artifacts` is FROM one of the
    two and its COPYs are checked as the build stage's;
  - no ADD (COPY only: no URLs, no archive auto-extraction);
  - COPY --from names an earlier stage; a file copied from the build stage's
    (or artifacts') /stage exists in STAGE_DIR, and the build stage runs scripts/setup.sh
    and scripts/build-release.sh ... /stage (the recipe CI runs);
  - every runtime stage (all but build, staged, artifacts) ends with a USER, non-root unless named
    with --root-stage, and then a comment in the stage says why (contains
    "Root");
  - ENTRYPOINT is in exec form and names a file COPY'd into that stage;
  - every path the chart's templates run from an image (command: [...]) is
    copied into some runtime stage.
"""
import json
import os
import re
import shlex
import sys


def parse(path):
    """Instructions as (line, keyword, args, comments_before) in order."""
    out, comments, buf, start = [], [], "", 0
    with open(path) as f:
        lines = f.read().split("\n")
    for i, raw in enumerate(lines, 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            if line.startswith("#"):
                comments.append(line)
            continue
        if buf and line.startswith("#"):
            continue  # comment inside a continued instruction
        if not buf:
            start = i
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        keyword, _, args = buf.partition(" ")
        out.append((start, keyword.upper(), args.strip(), comments))
        buf, comments = "", []
    return out


def main(argv):
    args = argv[1:]
    root_stages = set()
    while "--root-stage" in args:
        i = args.index("--root-stage")
        root_stages.add(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__)
        return 2
    dockerfile, stage_dir = args
    repo = os.path.abspath(os.path.join(os.path.dirname(dockerfile), "..", ".."))
    errors = []

    def err(line, msg):
        errors.append(f"{dockerfile}:{line}: {msg}")

    stages = []  # dicts: name, line, instrs, comments, base
    global_args = {}
    for line, kw, rest, comments in parse(dockerfile):
        if kw == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            if not m:
                err(line, f"cannot read FROM {rest!r}")
                continue
            image, name = m.group(1), m.group(2) or str(len(stages))
            for arg in re.findall(r"\$\{(\w+)\}", image):
                if arg not in global_args:
                    err(line, f"FROM uses ${{{arg}}}, which no global ARG gives a default")
                image = image.replace("${" + arg + "}", global_args.get(arg, ""))
            known = [s["name"] for s in stages]
            if name in known:
                err(line, f"stage name {name} used twice")
            if image not in known and image != "scratch":
                ref = image.rsplit("/", 1)[-1]
                if "@sha256:" not in image and (":" not in ref or ref.endswith(":latest")):
                    err(line, f"base image {image} is not pinned to a tag or digest")
            stages.append({"name": name, "line": line, "instrs": [], "comments": list(comments), "base": image})
            continue
        if not stages:
            if kw != "ARG":
                err(line, f"{kw} before the first FROM")
            else:
                key, _, default = rest.partition("=")
                global_args[key.strip()] = default.strip()
            continue
        stages[-1]["instrs"].append((line, kw, rest))
        stages[-1]["comments"] += comments

    if not stages:
        err(1, "no FROM")
    names = [s["name"] for s in stages]
    build = next((s for s in stages if s["name"] == "build"), None)
    if build is None:
        err(1, "no stage named build")
    support = {"build", "staged", "artifacts"}
    # Stages whose /stage is the build stage's: build itself, and artifacts.
    builds = {"build"}
    art = next((s for s in stages if s["name"] == "artifacts"), None)
    if art:
        if art["base"] not in ("build", "staged"):
            err(art["line"], f"artifacts is FROM {art['base']}, not build or staged")
        if art["instrs"]:
            err(art["line"], "artifacts must only name where the artifacts come from")
        builds.add("artifacts")
    staged = next((s for s in stages if s["name"] == "staged"), None)
    if staged:
        for line, kw, rest in staged["instrs"]:
            if kw != "COPY" or shlex.split(rest) != ["stage/", "/stage/"]:
                err(line, "the staged stage may only COPY stage/ /stage/")
    if build:
        runs = " ".join(r for _, k, r in build["instrs"] if k == "RUN")
        if "scripts/setup.sh" not in runs:
            err(build["line"], "the build stage does not run scripts/setup.sh")
        if not re.search(r"scripts/build-release\.sh\s+\S+\s+/stage\b", runs):
            err(build["line"], "the build stage does not run scripts/build-release.sh BUILD /stage")

    copied_anywhere = set()
    for idx, st in enumerate(stages):
        copied = set()
        user = None
        for line, kw, rest in st["instrs"]:
            if kw == "ADD":
                err(line, "ADD is not allowed (use COPY; no URLs or archives)")
            if kw == "COPY":
                words = shlex.split(rest)
                frm = [w.split("=", 1)[1] for w in words if w.startswith("--from=")]
                paths = [w for w in words if not w.startswith("--")]
                srcs, dest = paths[:-1], paths[-1] if paths else ""
                if frm:
                    if frm[0] not in names[:idx]:
                        err(line, f"COPY --from={frm[0]} names no earlier stage")
                    elif frm[0] in builds:
                        for s in srcs:
                            if s.startswith("/stage/"):
                                local = os.path.join(stage_dir, s[len("/stage/"):])
                                if not os.path.exists(local):
                                    err(line, f"{s} is not in the staged build output ({local})")
                for s in srcs:
                    target = dest
                    if dest.endswith("/"):
                        target = dest + os.path.basename(s)
                    copied.add(target)
            if kw == "USER":
                user = rest.split(":")[0]
            if kw == "ENTRYPOINT":
                try:
                    cmd = json.loads(rest)
                except ValueError:
                    cmd = None
                if not isinstance(cmd, list) or not cmd:
                    err(line, "ENTRYPOINT must be in exec form")
                elif cmd[0] not in copied:
                    err(line, f"ENTRYPOINT {cmd[0]} is not copied into stage {st['name']}")
        if st["name"] in support:
            continue
        copied_anywhere |= copied
        if user is None:
            err(st["line"], f"stage {st['name']} sets no USER")
        elif user in ("0", "root"):
            if st["name"] not in root_stages:
                err(st["line"], f"stage {st['name']} runs as root")
            elif not any("Root" in c for c in st["comments"]):
                err(st["line"], f"stage {st['name']} runs as root without a comment saying why")
        elif st["name"] in root_stages:
            err(st["line"], f"stage {st['name']} was expected to run as root")

    templates = os.path.join(repo, "deploy", "helm", "tessera", "templates")
    if os.path.isdir(templates):
        for fname in sorted(os.listdir(templates)):
            with open(os.path.join(templates, fname)) as f:
                for m in re.finditer(r"command:\s*\[(/[^,\]\s]+)", f.read()):
                    if m.group(1) not in copied_anywhere:
                        errors.append(f"{templates}/{fname}: runs {m.group(1)}, which no image stage copies")

    for e in errors:
        print(e)
    if not errors:
        print(f"{dockerfile}: {len(stages)} stages ({', '.join(names)}) pass")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
