#!/usr/bin/env python3
"""docs_commands_test: the commands the documentation shows are the ones the
code and the tests have.

Reads every shell block (```sh, ```bash, ```console, and indented code
blocks; `$ ` prompts and trailing comments dropped, `\\` continuations
joined) of README.md and docs/*.md, and checks:

  - kubectl apply|create|delete -f examples/...: the file exists and a test
    applies it: e2e_examples_test (every *.yaml under examples/ but
    examples/cluster/ and examples/dra/, tests/e2e/examples_test.cc) or,
    for examples/dra/, e2e_real_node_dra_test;
  - tessera-node, tessera-scheduler, kubectl tessera (kubectl-tessera),
    tessera-sim, tessera-nodesim, tessera-dev: every --flag given is in the
    binary's --help (or its subcommand's, for `kubectl tessera inspect ...`);
  - make TARGET: a rule of the Makefile;
  - ctest -R NAME: a test registered in some CMake file;
  - helm ... --set KEY=...: KEY is a value of deploy/helm/tessera/values.yaml.

And, both ways, each flag table marked `<!-- flags: BINARY -->` (the line
before the table) against BINARY's --help: every flag in the table exists,
and every flag of --help is in the table.

docs/install.md's blocks marked *tested* are run word for word by
e2e_helm_chart_test; its other blocks are checked here like any page.

Usage: docs_commands_test.py SOURCE_DIR NAME=PATH...  (the binaries)
"""
import glob
import os
import re
import subprocess
import sys

SHELL_LANGS = {"sh", "bash", "console", "shell"}


def shell_commands(path):
    """(line number, command) of each shell command in the page's blocks."""
    out, block, lang, start = [], None, None, 0
    with open(path) as f:
        lines = f.read().splitlines()
    indented, prev_blank = None, True
    for n, line in enumerate(lines, 1):
        # Indented code blocks (four spaces after a blank line), outside fences.
        if block is None and (indented is not None or prev_blank) and line.startswith("    ") \
                and not line.lstrip().startswith(("-", "*", "|")):
            if indented is None:
                indented, istart = [], n - 1
            indented.append(line)
            prev_blank = False
            continue
        if indented is not None and line.strip():
            out.extend(join_lines(indented, istart))
            indented = None
        prev_blank = not line.strip()
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            if block is None:
                block, lang, start = [], fence.group(1), n
            else:
                if lang in SHELL_LANGS:
                    out.extend(join_lines(block, start))
                block = None
            continue
        if block is not None:
            block.append(line)
    if indented is not None:
        out.extend(join_lines(indented, istart))
    return out


def join_lines(block, start):
    cmds, pending, first = [], "", 0
    for i, raw in enumerate(block, start + 1):
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        line = re.sub(r"\s+#\s.*$", "", line)
        if not pending:
            first = i
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line and not line.startswith("#"):
            cmds.append((first, line))
    return cmds


def words(cmd):
    return re.findall(r"'[^']*'|\"[^\"]*\"|\S+", cmd)


def help_text(binary, sub=None, cache={}):
    key = (binary, sub)
    if key not in cache:
        argv = [binary] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        cache[key] = r.stdout + r.stderr
    return cache[key]


def flags_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def example_manifests(src):
    out = set()
    for p in glob.glob(os.path.join(src, "examples", "**", "*.y*ml"), recursive=True):
        rel = os.path.relpath(p, src).replace(os.sep, "/")
        if not rel.startswith("examples/cluster/"):
            out.add(rel)
    return out


def values_keys(src):
    stack, leaves = [], set()
    for line in open(os.path.join(src, "deploy/helm/tessera/values.yaml")):
        m = re.match(r"^( *)([A-Za-z][\w]*):(.*)$", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        leaves.add(".".join(stack))
    return leaves


def main():
    src = sys.argv[1]
    bins = dict(a.split("=", 1) for a in sys.argv[2:])
    pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    manifests = example_manifests(src)
    makefile = open(os.path.join(src, "Makefile")).read()
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
    cmake_text = ""
    for p in glob.glob(os.path.join(src, "**", "*.cmake"), recursive=True) + \
            glob.glob(os.path.join(src, "**", "CMakeLists.txt"), recursive=True):
        if not os.path.relpath(p, src).startswith(("build", "third_party")):
            cmake_text += open(p).read()
    chart_keys = values_keys(src)
    errors, checked = [], 0

    for page in pages:
        rel = os.path.relpath(page, src)
        for n, cmd in shell_commands(page):
            where = f"{rel}:{n}: {cmd}"
            w = [x.strip("'\"") for x in words(cmd)]
            for i, x in enumerate(w):
                # kubectl apply -f examples/...
                if x == "kubectl" and i + 1 < len(w) and w[i + 1] in ("apply", "create", "delete"):
                    for j in range(i + 2, len(w) - 1):
                        if w[j] == "-f" and w[j + 1].startswith("examples/"):
                            checked += 1
                            f = w[j + 1]
                            if not os.path.isfile(os.path.join(src, f)):
                                errors.append(f"{where}: {f} does not exist")
                            elif f not in manifests:
                                errors.append(f"{where}: {f} is not applied by e2e_examples_test "
                                              "or e2e_real_node_dra_test")
                # the project's binaries and their flags
                # (the first word of the command, or a path to the binary)
                name = os.path.basename(x)
                sub_at = i + 1
                if x == "kubectl" and i + 1 < len(w) and w[i + 1] == "tessera":
                    name, sub_at = "kubectl-tessera", i + 2
                if name in bins and (i == 0 or "/" in x):
                    rest = w[sub_at:]
                    sub = rest[0] if rest and re.match(r"^[a-z][a-z-]*$", rest[0]) else None
                    text = help_text(bins[name]) + (help_text(bins[name], sub) if sub else "")
                    known = flags_in(text)
                    for a in rest:
                        if a in ("|", "&&", ";", ">", "2>&1"):
                            break
                        flag = a.split("=", 1)[0]
                        if flag.startswith("--") and flag != "--help":
                            checked += 1
                            if flag not in known:
                                errors.append(f"{where}: {name}{' ' + sub if sub else ''} has no flag {flag}")
                if x == "make" and i == 0:
                    for t in w[1:]:
                        if re.match(r"^[\w-]+$", t):
                            checked += 1
                            if t not in targets:
                                errors.append(f"{where}: no make target {t}")
                if x == "ctest":
                    for j in range(i + 1, len(w) - 1):
                        if w[j] == "-R":
                            checked += 1
                            if not re.search(r"\b" + re.escape(w[j + 1]) + r"\b", cmake_text):
                                errors.append(f"{where}: no test named {w[j + 1]}")
                if x == "helm" or name == "helm":
                    for j in range(i + 1, len(w) - 1):
                        if w[j] == "--set":
                            key = w[j + 1].split("=", 1)[0]
                            checked += 1
                            if key not in chart_keys:
                                errors.append(f"{where}: the chart has no value {key}")

        # Flag tables, both ways.
        lines = open(page).read().splitlines()
        for n, line in enumerate(lines):
            m = re.match(r"^<!-- flags: ([\w-]+) -->$", line.strip())
            if not m:
                continue
            name = m.group(1)
            if name not in bins:
                errors.append(f"{rel}:{n + 1}: no binary {name} given to the test")
                continue
            table = []
            for row in lines[n + 1:]:
                if not row.startswith("|"):
                    if table:
                        break
                    continue
                table.append(row)
            documented = set()
            for row in table:
                first = row.split("|")[1]
                documented |= flags_in(first)
            known = flags_in(help_text(bins[name])) - {"--help"}
            checked += len(documented)
            for f in sorted(documented - known):
                errors.append(f"{rel}:{n + 1}: table lists {f}, which {name} --help does not have")
            for f in sorted(known - documented):
                errors.append(f"{rel}:{n + 1}: {name} has {f}, which the table does not list")

    if errors:
        print("\n".join(errors))
        print(f"FAIL: {len(errors)} of {checked} checks")
        return 1
    print(f"PASS: {checked} checks of commands, flags, targets, tests and values in {len(pages)} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
