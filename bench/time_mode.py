#!/usr/bin/env python3
"""Time-mode benchmark: interference-aware placement on the default openb trace.

Runs `tessera-sim time` (pods arrive at creation_time, leave at deletion_time;
modelled utilization and interference, docs/simulator.md) with tessera,
tessera-interference, bestfit and fgd over several seeds, on
 - the whole GPU cluster (1213 nodes) in trace time, and
 - every 100th node (--node-sample 0.01) in trace time, where pods contend,
then sweeps tessera-interference's knobs one at a time on both. Writes the
tables between markers in bench/RESULTS.md and the time-series plot of the
whole-cluster run (seed 42) to bench/results/time-mode.png, and exits
non-zero unless tessera-interference has fewer high-utilization GPU-hours
than tessera at an equal or better allocation ratio on the whole cluster.

Usage: bench/time_mode.py [--sim build/src/sim/tessera-sim]
                          [--data ../shared/data/alibaba-gpu-v2023] [--seeds 42-46]
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["tessera", "tessera-interference", "bestfit", "fgd"]
SETTINGS = [("whole cluster (1213 nodes, 6212 GPUs)", "1"),
            ("every 100th node (13 nodes, 56 GPUs)", "0.01")]
# tessera-interference knobs, one changed at a time from the defaults.
KNOBS = [("defaults (ceiling 0.70, factor 1.0, weight 1.0, history on)", []),
         ("--ceiling 0.60", ["--ceiling", "0.6"]),
         ("--ceiling 0.80", ["--ceiling", "0.8"]),
         ("--default-factor 0.5", ["--default-factor", "0.5"]),
         ("--load-weight 0.25", ["--load-weight", "0.25"]),
         ("--load-weight 4", ["--load-weight", "4"]),
         ("--no-history", ["--no-history"]),
         ("--history-spread 0", ["--history-spread", "0"]),
         ("--history-alpha 0.8", ["--history-alpha", "0.8"]),
         ("--fade-below-free 0.5", ["--fade-below-free", "0.5"])]
FIELDS = ["alloc_pct", "failed", "failed_gpu_pct", "high_util_gpu_hours", "shared_high_gpu_hours",
          "mean_slowdown", "p95_slowdown"]


def run(sim, nodes, pods, policies, seeds, extra, out, plot=False):
    cmd = [sim, "time", "--nodes", nodes, "--pods", pods, "--policy", ",".join(policies),
           "--seeds", seeds, "--out", out, "--quiet"] + extra + (["--plot"] if plot else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rows = list(csv.DictReader(open(os.path.join(out, "time.csv"))))
    means = {"_rows": rows}
    for p in policies:
        rs = [r for r in rows if r["policy"] == p]
        means[p] = {f: statistics.mean(float(r[f]) for r in rs) for f in FIELDS}
        means[p]["seeds"] = len(rs)
    return means


def row(label, m):
    return (f"| {label} | {m['alloc_pct']:.3f} | {m['failed']:.1f} | {m['failed_gpu_pct']:.2f} | "
            f"{m['high_util_gpu_hours']:.0f} | {m['shared_high_gpu_hours']:.0f} | "
            f"{m['mean_slowdown']:.4f} | {m['p95_slowdown']:.4f} |")


HEADER = ["| {} | alloc % | failed pods | failed GPU % | high-util GPU-h | of which shared | "
          "mean slowdown | p95 slowdown |", "|---|---:|---:|---:|---:|---:|---:|---:|"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build/src/sim/tessera-sim"))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data/alibaba-gpu-v2023"))
    ap.add_argument("--seeds", default="42-46")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench/RESULTS.md"))
    ap.add_argument("--png", default=os.path.join(ROOT, "bench/results/time-mode.png"))
    args = ap.parse_args()
    nodes = os.path.join(args.data, "openb_node_list_gpu_node.csv")
    pods = os.path.join(args.data, "openb_pod_list_default.csv")
    if not os.path.exists(nodes) or not os.path.exists(pods):
        sys.exit(f"time_mode: {args.data}: openb trace not found (not shipped; see its README)")

    start = time.monotonic()
    lines = ["<!-- time-mode:begin -->",
             f"Command: `python3 bench/time_mode.py --seeds {args.seeds}` (runs `tessera-sim time --nodes "
             "openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv --policy "
             f"{','.join(POLICIES)} --seeds {args.seeds} --node-sample S [KNOB]`). "
             f"Machine: {os.cpu_count()} cores, shared. Means over seeds {args.seeds}; the seed draws the "
             "modelled busy factors and the node tie-break order.", ""]
    failures, plot_done = [], False
    with tempfile.TemporaryDirectory() as tmp:
        main_means = {}
        for label, sample in SETTINGS:
            out = os.path.join(tmp, "main-" + sample)
            m = run(args.sim, nodes, pods, POLICIES, args.seeds, ["--node-sample", sample], out,
                    plot=sample == "1" and shutil.which("gnuplot") is not None)
            main_means[sample] = m
            if sample == "1" and os.path.exists(os.path.join(out, "time.png")):
                os.makedirs(os.path.dirname(args.png), exist_ok=True)
                shutil.copyfile(os.path.join(out, "time.png"), args.png)
                plot_done = True
            lines += [f"### Policies, {label}, trace time", ""] + [HEADER[0].format("policy"), HEADER[1]]
            lines += [row(p, m[p]) for p in POLICIES] + [""]
            print(f"{label}: done ({time.monotonic() - start:.0f} s)", flush=True)
        for label, sample in SETTINGS:
            rows = main_means[sample]["_rows"]
            by = {(r["policy"], r["seed"]): r for r in rows}
            seeds = sorted({r["seed"] for r in rows}, key=int)
            lower = sum(float(by[("tessera-interference", s)]["high_util_gpu_hours"]) <
                        float(by[("tessera", s)]["high_util_gpu_hours"]) for s in seeds)
            alloc = sum(float(by[("tessera-interference", s)]["alloc_pct"]) >=
                        float(by[("tessera", s)]["alloc_pct"]) - 0.0005 for s in seeds)
            lines.append(f"Per seed, {label}: tessera-interference has fewer high-util GPU-hours than tessera on "
                         f"{lower}/{len(seeds)} seeds and an equal or better allocation on {alloc}/{len(seeds)}.")
        lines.append("")
        t, i = main_means["1"]["tessera"], main_means["1"]["tessera-interference"]
        if not (i["high_util_gpu_hours"] < t["high_util_gpu_hours"] and i["alloc_pct"] >= t["alloc_pct"] - 0.005):
            failures.append(f"whole cluster: tessera-interference {i['high_util_gpu_hours']:.0f} high-util GPU-h "
                            f"at {i['alloc_pct']:.3f} % vs tessera {t['high_util_gpu_hours']:.0f} at "
                            f"{t['alloc_pct']:.3f} %")
        for label, sample in SETTINGS:
            lines += [f"### tessera-interference knobs, {label}", "", HEADER[0].format("knob"), HEADER[1]]
            lines.append(row("tessera (reference)", main_means[sample]["tessera"]))
            for klabel, extra in KNOBS:
                if not extra:
                    m = main_means[sample]["tessera-interference"]
                else:
                    out = os.path.join(tmp, f"knob-{sample}-{len(lines)}")
                    m = run(args.sim, nodes, pods, ["tessera-interference"], args.seeds,
                            ["--node-sample", sample] + extra, out)["tessera-interference"]
                lines.append(row(klabel, m))
            lines.append("")
            print(f"knobs {label}: done ({time.monotonic() - start:.0f} s)", flush=True)
    if plot_done:
        lines += [f"![time series](results/{os.path.basename(args.png)})", "",
                  "Plot: whole cluster, seed 42, hourly, per policy: GPUs above the 0.7 knee shared by two or "
                  "more pods (top), all GPUs above the knee (middle), allocated GPU core (bottom).", ""]
    lines += [f"Total wall time {time.monotonic() - start:.0f} s.", "<!-- time-mode:end -->"]
    block = "\n".join(lines) + "\n"

    text = open(args.results).read() if os.path.exists(args.results) else "# Benchmark results\n\n"
    b, e = "<!-- time-mode:begin -->", "<!-- time-mode:end -->\n"
    if b in text and e in text:
        text = text[:text.index(b)] + block + text[text.index(e) + len(e):]
    else:
        text += ("\n## Time mode: interference-aware placement (issue 9, step 1)\n\n" + block)
    open(args.results, "w").write(text)
    print(block)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
