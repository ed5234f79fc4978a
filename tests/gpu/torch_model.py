#!/usr/bin/env python3
"""A PyTorch model under libtessera-cuda.so on a real GPU.

The model is a small transformer built from CONFIG with random weights
(nothing is downloaded). Usage: torch_model.py CHECK
  train     train on a fixed batch and serve, under whatever limits the
            environment sets (TESSERA_GPU_MEM_LIMIT_MIB_0, a compute share);
            then an oversized batch must raise torch.cuda.OutOfMemoryError and
            a normal step after it must succeed. Checks: the loss falls,
            mem_get_info's total is the limit, the allocator never reserved
            more than the limit.
  graph     torch.cuda.graph capture and replay of the model's forward pass,
            in each capture_error_mode (global, thread_local, relaxed), under
            the environment's compute share; replays must match eager.
  overhead  median training-step time with no library, a memory limit only
            and an uncontended compute share (50 %, hard; the GPU idles
            between steps so the share is never reached), each in its own
            process; TESSERA_CUDA_LIB names the library. Fails when the share
            costs more than 1 % per step.
Prints one RESULT {json} line with its numbers. Exit 0 pass, 1 fail,
77 skipped (no torch or no GPU), 2 usage.
"""
import json
import math
import os
import subprocess
import sys
import time

MIB = 1 << 20
CONFIG = {"vocab": 4096, "d_model": 256, "heads": 4, "layers": 4, "ff": 1024,
          "max_seq": 512, "batch": 16, "seq": 128}
# Far past a 2 GiB limit: the logits alone are 1024 * 512 * 4096 * 4 B = 8 GiB.
OVERSIZED = {"batch": 1024, "seq": 512}


def build(torch, cfg):
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            self.embed = nn.Embedding(cfg["vocab"], d)
            self.pos = nn.Parameter(torch.randn(cfg["max_seq"], d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, cfg["heads"], cfg["ff"], dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
            self.head = nn.Linear(d, cfg["vocab"])

        def forward(self, tokens):
            x = self.embed(tokens) + self.pos[: tokens.shape[1]]
            return self.head(self.encoder(x))

    torch.manual_seed(0)
    return Model().cuda()


def batch(torch, cfg, b, s, seed=1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    tokens = torch.randint(0, cfg["vocab"], (b, s), device="cuda", generator=g)
    targets = torch.randint(0, cfg["vocab"], (b, s), device="cuda", generator=g)
    return tokens, targets


def step(torch, model, opt, tokens, targets):
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def result(numbers):
    print("RESULT " + json.dumps(numbers), flush=True)


def check_train(torch):
    cfg = CONFIG
    limit_mib = int(os.environ.get("TESSERA_GPU_MEM_LIMIT_MIB_0", "0"))
    free, total = torch.cuda.mem_get_info(0)
    model = build(torch, cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens, targets = batch(torch, cfg, cfg["batch"], cfg["seq"])
    losses = [step(torch, model, opt, tokens, targets) for _ in range(3)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(30):
        losses.append(step(torch, model, opt, tokens, targets))
    train_s = time.perf_counter() - t0
    model.eval()
    with torch.inference_mode():
        t0 = time.perf_counter()
        for i in range(20):
            x, _ = batch(torch, cfg, 32, cfg["seq"], seed=100 + i)
            model(x).argmax(-1).cpu()
        serve_s = time.perf_counter() - t0
    model.train()
    oom = False
    try:
        big, big_t = batch(torch, cfg, OVERSIZED["batch"], OVERSIZED["seq"])
        step(torch, model, opt, big, big_t)
    except torch.cuda.OutOfMemoryError:
        oom = True
    big = big_t = None
    opt.zero_grad(set_to_none=True)
    torch.cuda.empty_cache()
    after = step(torch, model, opt, tokens, targets)
    reserved_mib = torch.cuda.max_memory_reserved() / MIB
    numbers = {"limit_mib": limit_mib, "total_mib": total / MIB, "free_mib_at_start": free / MIB,
               "first_loss": losses[0], "last_loss": losses[-1], "loss_after_oom": after,
               "train_steps_per_s": 30 / train_s, "serve_batches_per_s": 20 / serve_s,
               "oom_raised": oom, "max_reserved_mib": reserved_mib}
    result(numbers)
    failures = []
    if limit_mib and total != limit_mib * MIB:
        failures.append(f"mem_get_info total {total / MIB:.0f} MiB, limit {limit_mib} MiB")
    if not losses[-1] < losses[0]:
        failures.append(f"loss did not fall: {losses[0]:.3f} -> {losses[-1]:.3f}")
    if limit_mib and not oom:
        failures.append("the oversized batch did not raise OutOfMemoryError")
    if not math.isfinite(after):
        failures.append("the step after the OutOfMemoryError failed")
    if limit_mib and reserved_mib > limit_mib:
        failures.append(f"reserved {reserved_mib:.0f} MiB above the {limit_mib} MiB limit")
    for f in failures:
        print("FAIL: " + f)
    print(f"train: loss {losses[0]:.3f} -> {losses[-1]:.3f}, {30 / train_s:.1f} steps/s, "
          f"serve {20 / serve_s:.1f} batches/s, OOM raised {oom}, after it loss {after:.3f}, "
          f"max reserved {reserved_mib:.0f} MiB")
    return 1 if failures else 0


def check_graph(torch):
    cfg = CONFIG
    # Training mode with dropout 0: deterministic, and the layers' ordinary
    # path (eval mode would take the fused inference path instead).
    model = build(torch, cfg).train()
    numbers = {}
    failures = 0
    for mode in ("global", "thread_local", "relaxed"):
        static_in, _ = batch(torch, cfg, 8, cfg["seq"])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        with torch.no_grad(), torch.cuda.graph(graph, capture_error_mode=mode):
            static_out = model(static_in)
        capture_ms = (time.perf_counter() - t0) * 1000
        worst = 0.0
        t0 = time.perf_counter()
        for i in range(10):
            x, _ = batch(torch, cfg, 8, cfg["seq"], seed=200 + i)
            static_in.copy_(x)
            graph.replay()
            with torch.no_grad():
                eager = model(x)
            worst = max(worst, (static_out - eager).abs().max().item())
        replay_ms = (time.perf_counter() - t0) * 1000 / 10  # per replay and eager pass
        ok = worst < 1e-3
        failures += 0 if ok else 1
        numbers[f"{mode}_capture_ms"] = capture_ms
        numbers[f"{mode}_replay_ms"] = replay_ms
        numbers[f"{mode}_max_diff"] = worst
        print(f"graph {mode}: capture {capture_ms:.1f} ms, replay+eager {replay_ms:.2f} ms, "
              f"max |graph - eager| {worst:.2e}  {'ok' if ok else 'WRONG'}")
    result(numbers)
    return 1 if failures else 0


def overhead_child(torch):
    # Big enough that a step is bound by the GPU, as real training is, not by
    # launching kernels; the sleep after each step keeps the GPU idle 60 % of
    # the time, below the 50 % share.
    cfg = dict(CONFIG, d_model=512, ff=2048, batch=32, seq=256)
    model = build(torch, cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens, targets = batch(torch, cfg, cfg["batch"], cfg["seq"])
    for _ in range(10):
        step(torch, model, opt, tokens, targets)
    times = []
    for _ in range(60):
        t0 = time.perf_counter()
        step(torch, model, opt, tokens, targets)
        dt = time.perf_counter() - t0
        times.append(dt)
        time.sleep(max(1.5 * dt, 0.002))
    times.sort()
    print(json.dumps({"step_ms": times[len(times) // 2] * 1000}), flush=True)
    return 0


def check_overhead():
    lib = os.environ.get("TESSERA_CUDA_LIB")
    if not lib:
        print("TESSERA_CUDA_LIB must name libtessera-cuda.so")
        return 2
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TESSERA_") and k != "LD_PRELOAD"}
    configs = [("none", {}),
               ("memlimit", {"LD_PRELOAD": lib, "TESSERA_GPU_MEM_LIMIT_MIB_0": "8192"}),
               ("share", {"LD_PRELOAD": lib, "TESSERA_GPU_CORE_POLICY": "hard",
                          "TESSERA_GPU_CORE_PERCENT_0": "50"}),
               ("none_again", {})]
    numbers = {}
    for name, extra in configs:
        out = subprocess.run([sys.executable, __file__, "overhead-child"], env=dict(base, **extra),
                             capture_output=True, text=True, timeout=60)
        lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
        if out.returncode != 0 or not lines:
            print(f"FAIL: configuration {name} exited {out.returncode}: {out.stderr[-2000:]}")
            return 1
        numbers[f"step_ms_{name}"] = json.loads(lines[-1])["step_ms"]
    none = (numbers["step_ms_none"] + numbers["step_ms_none_again"]) / 2
    for name in ("memlimit", "share"):
        numbers[f"overhead_pct_{name}"] = (numbers[f"step_ms_{name}"] / none - 1) * 100
    numbers["noise_pct_none"] = abs(numbers["step_ms_none_again"] / numbers["step_ms_none"] - 1) * 100
    result(numbers)
    for k in sorted(numbers):
        print(f"{k}: {numbers[k]:.3f}")
    ok = numbers["overhead_pct_share"] <= 1.0
    if not ok:
        print("FAIL: the uncontended share costs more than 1 % per step")
    return 0 if ok else 1


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    check = sys.argv[1]
    if check == "overhead":
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            print("SKIP: torch not installed")
            return 77
        return check_overhead()
    try:
        import torch
    except ImportError:
        print("SKIP: torch not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch sees no GPU")
        return 77
    if check == "train":
        return check_train(torch)
    if check == "graph":
        return check_graph(torch)
    if check == "overhead-child":
        return overhead_child(torch)
    print(f"unknown check {check}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
