#!/usr/bin/env python3
"""results.json and summary.txt of a GPU run, for tests/gpu/run.sh.

Usage: report.py MANIFEST OUTDIR. MANIFEST has one line per test,
"name|status|reason|seconds|output file"; every `RESULT {json}` line of a
test's output is merged into that test's "numbers". GPU, DRIVER, CUDA, TORCH,
GLIBC, TOTAL_S and ONLY (run.sh's TESSERA_GPU_ONLY: a partial run) come from
the environment.
"""
import json
import os
import sys
import time


def numbers_of(path):
    numbers = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if not line.startswith("RESULT "):
                    continue
                try:
                    numbers.update(json.loads(line[7:]))
                except ValueError:
                    numbers.setdefault("unparsed", []).append(line[7:].strip())
    except OSError:
        pass
    return numbers


def read_manifest(path):
    tests = []
    with open(path) as f:
        for line in f:
            name, status, reason, seconds, out = line.rstrip("\n").split("|", 4)
            tests.append({"name": name, "status": status, "reason": reason,
                          "seconds": float(seconds), "numbers": numbers_of(out)})
    return tests


def write_summary(doc, path):
    tests = doc["tests"]
    count = {s: sum(t["status"] == s for t in tests) for s in ("pass", "fail", "skip")}
    with open(path, "w") as f:
        f.write(f"Tessera GPU run, {doc['date']}\n")
        f.write(f"GPU {doc['gpu']}, driver {doc['driver']}, CUDA {doc['cuda']}, "
                f"PyTorch {doc['torch']}, {doc['glibc']}\n")
        f.write(f"{count['pass']} passed, {count['fail']} failed, {count['skip']} skipped "
                f"in {doc['total_seconds']:.0f} s\n")
        if doc.get("only"):
            f.write(f"A partial run: only the tests matching '{doc['only']}' (TESSERA_GPU_ONLY)\n")
        f.write("\n")
        f.write(f"{'test':<30} {'status':<6} {'s':>6}  reason; numbers\n")
        for t in tests:
            nums = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                             for k, v in t["numbers"].items())
            text = "; ".join(x for x in (t["reason"], nums) if x)
            f.write(f"{t['name']:<30} {t['status']:<6} {t['seconds']:>6.1f}  {text}\n")
        skips = [t for t in tests if t["status"] == "skip"]
        if skips:
            f.write("\nSkipped, and why:\n")
            for t in skips:
                f.write(f"  {t['name']}: {t['reason']}\n")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    manifest, outdir = sys.argv[1], sys.argv[2]
    doc = {k.lower(): os.environ.get(k, "") for k in ("GPU", "DRIVER", "CUDA", "TORCH", "GLIBC")}
    doc["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["total_seconds"] = float(os.environ.get("TOTAL_S", "0") or 0)
    if os.environ.get("ONLY"):
        doc["only"] = os.environ["ONLY"]
    doc["tests"] = read_manifest(manifest)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    write_summary(doc, os.path.join(outdir, "summary.txt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
