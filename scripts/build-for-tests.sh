#!/usr/bin/env bash
# Builds only what the tests with some labels run, in a configured Ninja
# build folder: every file of that folder named on those tests' command
# lines (executables, libraries, objects a check reads), and what they need.
# `make test-asan` uses it so the sanitizer pass compiles its unit and fuzz
# tests, not the e2e suites and tools it never runs.
#
#   scripts/build-for-tests.sh BUILD_DIR LABEL_REGEX
#
# Fails, naming the test, when a matching test names nothing to build and
# runs no program outside the build folder (a test this script cannot see).
set -euo pipefail
build="${1:?usage: build-for-tests.sh BUILD_DIR LABEL_REGEX}"
labels="${2:?usage: build-for-tests.sh BUILD_DIR LABEL_REGEX}"
jobs="${JOBS:-$(nproc)}"
cd "$build"
ctest -N -L "$labels" --show-only=json-v1 > .tests-for-build.json
ninja -t targets all | sed 's/: .*//' > .ninja-outputs
mapfile -t outputs < <(python3 - <<'PY'
import json, os, re
build = os.getcwd()
known = set(open(".ninja-outputs").read().split())
tests = json.load(open(".tests-for-build.json"))["tests"]
want = set()
for t in tests:
    named = set()
    for arg in t.get("command", []):
        for part in re.split(r"[=;]", arg):
            rel = os.path.relpath(part, build) if os.path.isabs(part) else part
            if rel in known:
                named.add(rel)
    runs_outside = t.get("command") and os.path.isabs(t["command"][0]) and not t["command"][0].startswith(build + "/")
    if not named and not runs_outside:
        raise SystemExit(f"build-for-tests: test {t['name']} names nothing in {build} to build")
    want |= named
print("\n".join(sorted(want)))
PY
)
rm -f .tests-for-build.json .ninja-outputs
echo "build-for-tests: ${#outputs[@]} outputs for the tests labelled '$labels'"
ninja -j "$jobs" "${outputs[@]}"
