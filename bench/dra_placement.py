#!/usr/bin/env python3
"""Placement under DRA: unallocated GPUs at 130 % arrived, every openb trace.

Runs `tessera-sim fgd` (the FGD protocol: arrival-only, demand inflated to
1.3x the cluster's GPUs) once per trace with fgd, tessera and the DRA
placement variants (src/core/dra_policy.h), all seeds in one process, so
every policy sees the same arrivals:

  dra-kube            node by kube-scheduler's default scoring, GPU by the DRA
                      allocator's first fit over the slice in GPU index order
  dra-kube-sorted     the same, the slice listed least-free-first (first fit = best fit)
  dra-tessera-node    node by tessera scored with its own GPU choice, GPU by first fit
  dra-tessera         node by tessera scored with the GPU first fit will take
  dra-tessera-sorted  as dra-tessera, the slice listed least-free-first

Prints, per trace, the mean over seeds of unallocated GPU % (100 - allocation
at 130 % arrived), then per policy the mean and smallest reduction against
fgd and the traces where it leaves more than fgd (issue 22: "below
FGD-level placement is not acceptable as the default"), and the mean
difference to tessera. With --write, puts the table in bench/RESULTS.md
between the dra-placement markers.

Usage: bench/dra_placement.py [--sim build/src/sim/tessera-sim]
         [--data ../shared/data/alibaba-gpu-v2023] [--traces default,cpu300]
         [--seeds 42-51] [--jobs 1] [--write]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["fgd", "tessera", "dra-kube", "dra-kube-sorted", "dra-tessera-node", "dra-tessera",
            "dra-tessera-sorted"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build/src/sim/tessera-sim"))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data/alibaba-gpu-v2023"))
    ap.add_argument("--traces", default="", help="comma list of trace names (default: every openb trace)")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--jobs", default="1")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench/RESULTS.md"))
    args = ap.parse_args()

    nodes = os.path.join(args.data, "openb_node_list_gpu_node.csv")
    if not os.path.exists(nodes):
        sys.exit(f"dra_placement: {nodes}: not found (the trace is not shipped; see docs/simulator.md)")
    if not os.access(args.sim, os.X_OK):
        sys.exit(f"dra_placement: {args.sim}: not built (cmake --build build --target tessera-sim)")
    traces = sorted(f[len("openb_pod_list_"):-4] for f in os.listdir(args.data)
                    if f.startswith("openb_pod_list_") and f.endswith(".csv"))
    if args.traces:
        wanted = args.traces.split(",")
        unknown = sorted(set(wanted) - set(traces))
        if unknown:
            sys.exit(f"dra_placement: no trace named {', '.join(unknown)} in {args.data}")
        traces = [t for t in traces if t in wanted]

    rows = []  # (trace, {policy: unallocated %})
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for t in traces:
            out = os.path.join(tmp, t)
            subprocess.run([args.sim, "fgd", "--nodes", nodes,
                            "--pods", os.path.join(args.data, f"openb_pod_list_{t}.csv"),
                            "--policy", ",".join(POLICIES), "--seeds", args.seeds, "--tune", "1.3",
                            "--jobs", args.jobs, "--out", out, "--quiet"],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "alloc.csv")) as f:
                runs = list(csv.DictReader(f))
            un = {}
            for p in POLICIES:
                vals = [float(r["130"]) for r in runs if r["sc_policy"] == p and r.get("130", "") != ""]
                un[p] = 100 - statistics.mean(vals)
            rows.append((t, un))
            print(f"{t}: " + ", ".join(f"{p} {un[p]:.2f}" for p in POLICIES), file=sys.stderr, flush=True)
    wall = time.monotonic() - start

    def red(un, p):
        return (un["fgd"] - un[p]) / un["fgd"] * 100 if un["fgd"] else 0.0

    tr = f" --traces {args.traces}" if args.traces else ""
    lines = [f"Command: `python3 bench/dra_placement.py --seeds {args.seeds}{tr}` ({len(traces)} traces x "
             f"{len(POLICIES)} policies, {wall:.0f} s wall, --jobs {args.jobs}).",
             "",
             "Mean unallocated GPU % at 130 % arrived over the seeds (lower is better).",
             "",
             "| trace | " + " | ".join(POLICIES) + " |",
             "|---|" + "---:|" * len(POLICIES)]
    for t, un in rows:
        best = min(un.values())
        lines.append(f"| {t} | " + " | ".join(f"**{un[p]:.2f}**" if un[p] == best else f"{un[p]:.2f}"
                                               for p in POLICIES) + " |")
    lines += ["", "| policy | mean unallocated % | fewer unallocated than fgd: mean | smallest | traces worse than fgd "
              "| vs tessera: mean pp | traces worse than tessera |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for p in POLICIES:
        reds = [red(un, p) for _, un in rows]
        worst = min(range(len(rows)), key=lambda i: reds[i])
        worse = [t for t, un in rows if un[p] > un["fgd"]]
        diff = statistics.mean(un[p] - un["tessera"] for _, un in rows)
        worse_t = sum(un[p] > un["tessera"] for _, un in rows)
        lines.append(f"| {p} | {statistics.mean(un[p] for _, un in rows):.2f} | {statistics.mean(reds):+.1f} % | "
                     f"{reds[worst]:+.1f} % ({rows[worst][0]}) | {len(worse)}/{len(rows)} | {diff:+.2f} | "
                     f"{worse_t}/{len(rows)} |")
    block = "\n".join(lines) + "\n"
    print(block)
    if args.write:
        b, e = "<!-- dra-placement:begin -->\n", "<!-- dra-placement:end -->\n"
        with open(args.results) as f:
            text = f.read()
        if b in text and e in text:
            text = text[:text.index(b) + len(b)] + block + text[text.index(e):]
        else:
            text += "\n## Placement under DRA (issue 22, step 3)\n\n" + b + block + e
        with open(args.results, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
