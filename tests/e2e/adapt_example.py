#!/usr/bin/env python3
"""Adapts an example's objects to run on a test's real node (no GPU, no
registry, 2 CPU cores), changing only what cannot run there as written.

  kubectl create --dry-run=client -o json -f EXAMPLE.yaml | adapt_example.py IMAGE MEM_MIB > adapted.json

Reads kubectl's objects (one after another, or a List) on stdin; writes a List. In every pod
and pod template:
  - each container runs IMAGE (the fake-CUDA workload image, imported, so
    imagePullPolicy Never) with the fake driver's device memory MEM_MIB
    (FAKE_CUDA_MEM_MIB) in its env. A Job's containers hold 512 MiB and exit
    (so the Job completes); every other container holds 512 MiB until it is
    stopped (`fake_cuda_client alloc 512 term`). Init containers run `true`.
  - probes go (the example's server does not run); CPU and memory requests
    and limits go (the node has 2 cores); the extended resources (the GPU
    share), annotations, labels, volumes and everything else stay.
  - a pod with no schedulerName gets tessera-scheduler, as docs/install.md
    says for unchanged gpushare and HAMi manifests under the chart's default
    scheduler.mode=deployment.
Objects that are not workloads (a Service) pass through unchanged.
"""
import json
import sys

PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def adapt_pod_spec(spec, image, mem_mib, completes):
    spec.setdefault("schedulerName", "tessera-scheduler")
    for c in spec.get("initContainers", []):
        c.update(image=image, imagePullPolicy="Never", command=["true"])
        c.pop("args", None)
        c.pop("resources", None)
    for c in spec.get("containers", []):
        c.update(image=image, imagePullPolicy="Never",
                 command=["fake_cuda_client", "alloc", "512", "exit" if completes else "term"])
        c.pop("args", None)
        for p in PROBES:
            c.pop(p, None)
        res = c.get("resources", {})
        for kind in ("requests", "limits"):
            for name in ("cpu", "memory"):
                res.get(kind, {}).pop(name, None)
        c["env"] = [e for e in c.get("env", []) if e.get("name") != "FAKE_CUDA_MEM_MIB"]
        c["env"].append({"name": "FAKE_CUDA_MEM_MIB", "value": str(mem_mib)})


def adapt(obj, image, mem_mib):
    kind = obj.get("kind")
    if kind == "Pod":
        adapt_pod_spec(obj["spec"], image, mem_mib, completes=False)
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        adapt_pod_spec(obj["spec"]["template"]["spec"], image, mem_mib, completes=kind == "Job")
    elif kind == "CronJob":
        adapt_pod_spec(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"], image, mem_mib, completes=True)
    return obj


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    image, mem_mib = sys.argv[1], int(sys.argv[2])
    # kubectl writes one JSON object per document, one after the other.
    text, pos, items = sys.stdin.read(), 0, []
    decoder = json.JSONDecoder()
    while text[pos:].strip():
        doc, end = decoder.raw_decode(text, pos + len(text[pos:]) - len(text[pos:].lstrip()))
        items += doc["items"] if doc.get("kind") == "List" else [doc]
        pos = end
    json.dump({"apiVersion": "v1", "kind": "List", "items": [adapt(o, image, mem_mib) for o in items]},
              sys.stdout, indent=1)


if __name__ == "__main__":
    main()
