#!/usr/bin/env python3
"""PyTorch under libtessera-cuda.so on a real GPU.

Run with the library preloaded and TESSERA_GPU_MEM_LIMIT_MIB_0 set (see
CMakeLists.txt). Usage: torch_limits.py CHECK [ALLOC_CONF]
  meminfo     torch.cuda.mem_get_info() and device properties report the limit
  oom         allocating past the limit raises OutOfMemoryError; after freeing
              and empty_cache() the same allocation succeeds
  two         two processes sharing one TESSERA_REGION_DIR, both with their
              contexts up, fill at once: together they hold no more than the
              limit less the two contexts' charges
ALLOC_CONF, e.g. "expandable_segments:True" or "backend:cudaMallocAsync", is
set as PYTORCH_CUDA_ALLOC_CONF before torch is imported.
Prints its numbers as one line RESULT {json}.
Exit 0 pass, 1 fail, 77 skipped (no torch or no GPU; a line SKIP: says why).
"""
import json
import os
import subprocess
import sys

MIB = 1 << 20


def limit_bytes():
    return int(os.environ["TESSERA_GPU_MEM_LIMIT_MIB_0"]) * MIB


def context_bytes():
    """What the library charges the share for one process's CUDA context."""
    v = os.environ.get("TESSERA_GPU_CONTEXT_MIB_0", os.environ.get("TESSERA_GPU_CONTEXT_MIB", "256"))
    return int(v) * MIB


def fill(torch, block):
    held = []
    try:
        while True:
            held.append(torch.empty(block, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError:
        pass
    return held


def result(**numbers):
    print("RESULT " + json.dumps(numbers), flush=True)


def main():
    check = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2]:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = sys.argv[2]
    try:
        import torch
    except ImportError:
        print("SKIP: torch not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no GPU")
        return 77
    limit = limit_bytes()
    room = limit - context_bytes()  # what one process can hold: its context is charged too
    if check == "meminfo":
        free, total = torch.cuda.mem_get_info(0)
        props = torch.cuda.get_device_properties(0)
        print(f"mem_get_info free={free} total={total}; totalGlobalMem={props.total_memory}")
        result(limit_mib=limit // MIB, total_mib=total / MIB, free_mib=free / MIB,
               total_memory_mib=props.total_memory / MIB)
        return 0 if total == limit and props.total_memory == limit and free <= total else 1
    if check == "deviceview":
        # TESSERA_GPU_MEM_VIEW=device (gpushare-style containers): the card's
        # total, the share's free; the limit still holds.
        free, total = torch.cuda.mem_get_info(0)
        print(f"mem_get_info free={free} total={total} (limit {limit})")
        result(limit_mib=limit // MIB, total_mib=total / MIB, free_mib=free / MIB)
        if total <= limit or free > limit:
            return 1
        block = 64 * MIB
        held = fill(torch, block)
        got = len(held) * block
        print(f"held {got // MIB} MiB of {limit // MIB} MiB before OutOfMemoryError")
        result(held_mib=got // MIB)
        return 0 if room - 4 * block <= got <= room else 1
    if check == "oom":
        block = 64 * MIB
        held = fill(torch, block)
        got = len(held) * block
        print(f"held {got // MIB} MiB of {limit // MIB} MiB before OutOfMemoryError")
        if got > room or got < room - 4 * block:
            return 1
        del held
        torch.cuda.empty_cache()
        again = fill(torch, block)
        print(f"after empty_cache: {len(again) * block // MIB} MiB")
        result(limit_mib=limit // MIB, held_mib=got // MIB, again_mib=len(again) * block // MIB)
        return 0 if len(again) * block >= got - block else 1
    if check == "two":
        env = dict(os.environ)
        env.setdefault("TESSERA_REGION_DIR", os.environ.get("TMPDIR", "/tmp"))
        # Each brings its context up and says so; both fill once both are up.
        code = ("import torch,sys\n"
                "torch.cuda.init(); torch.cuda.synchronize()\n"
                "print('ready', flush=True); sys.stdin.readline()\n"
                "h=[]\n"
                "try:\n"
                "  while True: h.append(torch.empty(32<<20,dtype=torch.uint8,device='cuda'))\n"
                "except torch.cuda.OutOfMemoryError: pass\n"
                "print(len(h)*32, flush=True); sys.stdin.read()\n")
        procs = [subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
        ready = [p.stdout.readline().strip() == "ready" for p in procs]
        for p in procs:
            p.stdin.write("fill\n")
            p.stdin.flush()
        mib = [int(p.stdout.readline() or -1) for p in procs]
        for p in procs:
            p.communicate("")
        both = limit - 2 * context_bytes()
        print(f"two processes held {mib} MiB; limit {limit // MIB} MiB, "
              f"{context_bytes() // MIB} MiB per context")
        result(limit_mib=limit // MIB, context_mib=context_bytes() // MIB, a_mib=mib[0], b_mib=mib[1])
        if not all(ready) or min(mib) < 0:
            print("a process did not start or did not report")
            return 1
        # PyTorch's caching allocator rounds: within 4 blocks of 32 MiB.
        return 0 if both - 4 * 32 * MIB <= sum(mib) * MIB <= both else 1
    print(f"unknown check {check}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
