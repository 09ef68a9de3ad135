#!/usr/bin/env python3
"""bench_kernels.py — kiln's dense kernel families on the GPU against PyTorch, in one run.

For each case: build the kernel from its family (kernel IR -> CUDA C -> NVRTC) through libkbench, run it
on torch tensors (random inputs, output poisoned first), check it against a PyTorch reference in float64
or float32 (relative L2 error), then time it and its peer with CUDA events (warm-up, median of many
runs, inputs rotated so that the working set exceeds the 60 MB L2 where the case is memory-bound).

Usage: python3 bench/bench_kernels.py --lib build-gpu/bench/libkbench.so [--quick] [--only rmsnorm,...]
Prints one line per case and a table last; --json FILE writes the results.
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--quick", action="store_true", help="fewer timing runs")
p.add_argument("--only", default="", help="comma-separated case-name prefixes")
p.add_argument("--json", default="")
p.add_argument("--config", action="append", default=[], help="NAME=CONFIG override, e.g. 'mm8192=BM=128 BN=128'")
args = p.parse_args()

dev = torch.device("cuda")
torch.manual_seed(int(time.time()))
kb.init(args.lib)
Kernel, rel_l2, sets_for = kb.Kernel, kb.rel_l2, kb.sets_for

overrides = dict(c.split("=", 1) for c in args.config)
RUNS = 20 if args.quick else 100
results = []


def median_ms(fn, sets, runs=RUNS):
    return kb.median_ms(fn, sets, runs)


def want(name):
    return not args.only or any(name.startswith(x) for x in args.only.split(","))


def record(name, shape, err, tol, ms, peer, peer_ms, metric, value, peer_value, unit):
    ok = err == err and err < tol
    r = dict(case=name, shape=shape, rel_l2=err, ok=ok, ms=ms, peer=peer, peer_ms=peer_ms, metric=metric,
             kiln=value, peer_value=peer_value, unit=unit, ratio=(peer_ms / ms if ms and peer_ms else None))
    results.append(r)
    print(f"{name:28s} {shape:30s} err {err:.2e} {'ok ' if ok else 'BAD'} kiln {ms * 1e3:9.1f} us "
          f"{peer} {peer_ms * 1e3 if peer_ms else float('nan'):9.1f} us  {metric} {value:8.1f} vs {peer_value:8.1f} {unit}",
          flush=True)


# ---- copy ceiling -----------------------------------------------------------------------------------
x = torch.empty(1 << 28, dtype=torch.uint8, device=dev)  # 256 MB
y = torch.empty_like(x)
copy_ms = median_ms(lambda i: y.copy_(x), 1)
COPY_TBS = 2 * x.numel() / copy_ms / 1e9
print(f"copy ceiling: {COPY_TBS:.2f} TB/s (256 MB device-to-device, torch copy_)")
del x, y


def cfg(name, default=""):
    return overrides.get(name, default)


# ---- RMSNorm (+ residual) ---------------------------------------------------------------------------
for residual in (0, 1):
    name = f"rmsnorm{'+res' if residual else ''}"
    if not want(name):
        continue
    T, C, eps = 8192, 4096, 1e-5
    k = Kernel("rmsnorm", f"C={C} eps={eps} dtype=bf16 residual={residual}", cfg(name))
    n_sets = sets_for(T * C * 2 * (3 if residual else 2))
    xs = [torch.randn(T, C, device=dev, dtype=torch.bfloat16) for _ in range(n_sets)]
    rs = [torch.randn(T, C, device=dev, dtype=torch.bfloat16) for _ in range(n_sets)] if residual else None
    w = torch.randn(C, device=dev, dtype=torch.bfloat16)
    outs = [torch.full((T, C), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(n_sets)]
    sums = [torch.full((T, C), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(n_sets)] if residual else None

    def run(i):
        if residual:
            k(xs[i], rs[i], w, outs[i], sums[i], T)
        else:
            k(xs[i], w, outs[i], T)

    run(0)
    s = (xs[0].float() + rs[0].float()).bfloat16() if residual else xs[0]
    ref = (s.double() * torch.rsqrt(s.double().pow(2).mean(-1, keepdim=True) + eps) * w.double())
    err = rel_l2(outs[0], ref)
    if residual:
        err = max(err, rel_l2(sums[0], s))
    ms = median_ms(run, n_sets)

    def peer(i):
        h = (xs[i] + rs[i]) if residual else xs[i]
        return torch.nn.functional.rms_norm(h, (C,), w, eps)

    peer_ms = median_ms(peer, n_sets)
    nbytes = T * C * 2 * (4 if residual else 2)
    record(name, f"{T}x{C} bf16", err, 1e-2, ms, "torch", peer_ms, "TB/s", nbytes / ms / 1e9,
           nbytes / peer_ms / 1e9, f"TB/s (copy {COPY_TBS:.2f})")

# ---- RoPE -------------------------------------------------------------------------------------------
if want("rope"):
    T, H, D, theta = 8192, 32, 128, 500000.0
    spec = (f"H={H} D={D} theta={theta} scaling=llama3 factor=8.0 low_freq_factor=1.0 high_freq_factor=4.0 "
            f"original_max_pos=8192 dtype=bf16")
    k = Kernel("rope", spec, cfg("rope"))
    n_sets = sets_for(T * H * D * 4)
    xs = [torch.randn(T, H * D, device=dev, dtype=torch.bfloat16) for _ in range(n_sets)]
    pos = torch.randint(0, 131072, (T,), device=dev, dtype=torch.int32)
    outs = [torch.full_like(xs[0], float("nan")) for _ in range(n_sets)]
    k(xs[0], pos, outs[0], T)
    # HF Llama-3 rope reference in float64 (inv_freq from the llama3 rule in float32, as HF does)
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32, device=dev) / D))
    wavelen = 2 * math.pi / inv
    lo_wl, hi_wl = 8192 / 1.0, 8192 / 4.0
    smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
    inv_l = torch.where(wavelen > lo_wl, inv / 8.0, inv)
    mid = (wavelen <= lo_wl) & (wavelen >= hi_wl)
    inv_l = torch.where(mid, (1 - smooth) * inv_l / 8.0 + smooth * inv_l, inv_l)
    ang = pos.double()[:, None] * inv_l.double()[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    xv = xs[0].double().view(T, H, D)
    rot = torch.cat([-xv[..., D // 2:], xv[..., : D // 2]], -1)
    ref = (xv * cos[:, None, :] + rot * sin[:, None, :]).view(T, H * D)
    err = rel_l2(outs[0], ref)
    ms = median_ms(lambda i: k(xs[i], pos, outs[i], T), n_sets)
    c2, s2 = cos.bfloat16(), sin.bfloat16()

    def peer(i):
        xv2 = xs[i].view(T, H, D)
        r2 = torch.cat([-xv2[..., D // 2:], xv2[..., : D // 2]], -1)
        return xv2 * c2[:, None, :] + r2 * s2[:, None, :]

    peer_ms = median_ms(peer, n_sets)
    nbytes = T * H * D * 2 * 2
    record("rope llama3", f"{T}x{H}x{D} bf16", err, 1e-2, ms, "torch-eager", peer_ms, "TB/s", nbytes / ms / 1e9,
           nbytes / peer_ms / 1e9, f"TB/s (copy {COPY_TBS:.2f})")

# ---- embedding --------------------------------------------------------------------------------------
if want("embedding"):
    T, V, C = 8192, 128256, 4096
    k = Kernel("embedding", f"C={C} V={V} dtype=bf16", cfg("embedding"))
    table = torch.randn(V, C, device=dev, dtype=torch.bfloat16)
    ids = torch.randint(0, V, (T,), device=dev, dtype=torch.int32)
    out = torch.full((T, C), float("nan"), device=dev, dtype=torch.bfloat16)
    k(ids, table, out, T)
    err = rel_l2(out, table[ids.long()])
    ms = median_ms(lambda i: k(ids, table, out, T), 1)
    peer_ms = median_ms(lambda i: torch.nn.functional.embedding(ids, table), 1)
    nbytes = T * C * 2 * 2
    record("embedding", f"{T} tok V{V} C{C}", err, 1e-6, ms, "torch", peer_ms, "TB/s", nbytes / ms / 1e9,
           nbytes / peer_ms / 1e9, "TB/s")

# ---- matmul -----------------------------------------------------------------------------------------
def matmul_case(name, M, N, K, epilogue="none"):
    if not want(name):
        return
    hint = f" m_hint={M}" if M <= 64 else ""
    # as the engine's schedule builds it (ir/sched.c): one product with long rows carries the split-K pair
    inl = epilogue == "none" and K >= 4096
    k = Kernel("matmul", f"N={N} K={K} dtype=bf16 epilogue={epilogue}{hint}{' ws=1' if inl else ''}", cfg(name))
    extra = kb.splitk_buffers(N) if inl else ()
    wbytes = N * K * 2 * (2 if epilogue == "silu_mul" else 1)
    n_sets = sets_for(wbytes) if M <= 256 else 1
    xs = [torch.randn(M, K, device=dev, dtype=torch.bfloat16) for _ in range(n_sets)]
    ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K) for _ in range(n_sets)]
    w2s = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K) for _ in range(n_sets)] \
        if epilogue == "silu_mul" else None
    outs = [torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(n_sets)]

    def run(i):
        if epilogue == "silu_mul":
            k(xs[i], ws[i], w2s[i], outs[i], M)
        else:
            k(xs[i], ws[i], outs[i], *extra, M)

    run(0)
    ref = xs[0].float() @ ws[0].float().t()
    if epilogue == "silu_mul":
        ref = torch.nn.functional.silu(ref) * (xs[0].float() @ w2s[0].float().t())
    err = rel_l2(outs[0], ref)
    ms = median_ms(run, n_sets)
    if epilogue == "silu_mul":
        peer = lambda i: torch.nn.functional.silu(xs[i] @ ws[i].t()) * (xs[i] @ w2s[i].t())
    else:
        peer = lambda i: torch.matmul(xs[i], ws[i].t())
    peer_ms = median_ms(peer, n_sets)
    flops = 2 * M * N * K * (2 if epilogue == "silu_mul" else 1)
    if M >= 1024:
        record(name, f"{M}x{N}x{K} bf16 {epilogue}", err, 1e-2, ms, "cuBLAS", peer_ms, "TFLOP/s",
               flops / ms / 1e9, flops / peer_ms / 1e9, "TFLOP/s")
    else:
        record(name, f"M{M} {N}x{K} bf16 {epilogue}", err, 1e-2, ms, "cuBLAS", peer_ms, "TB/s",
               wbytes / ms / 1e9, wbytes / peer_ms / 1e9, "TB/s of weights")


matmul_case("mm8192", 8192, 8192, 8192)
for M in (1, 16, 64):
    matmul_case(f"mm-decode-up M{M}", M, 28672, 4096)
    matmul_case(f"mm-decode-down M{M}", M, 4096, 14336)
matmul_case("mm-silu M16", 16, 14336, 4096, "silu_mul")

# ---- sampling (greedy argmax over the vocabulary) ------------------------------------------------------
if want("argmax"):
    R, V = 64, 128256
    k = Kernel("sample", f"V={V} mode=greedy", cfg("argmax"))
    logits = torch.randn(R, V, device=dev, dtype=torch.float32)
    out = torch.full((R,), -1, device=dev, dtype=torch.int32)
    k(logits, out, R)
    exact = bool((out.long() == logits.argmax(-1)).all())
    ms = median_ms(lambda i: k(logits, out, R), 1)
    peer_ms = median_ms(lambda i: logits.argmax(-1), 1)
    record("argmax", f"{R}x{V} f32", 0.0 if exact else 1.0, 0.5, ms, "torch", peer_ms, "TB/s",
           R * V * 4 / ms / 1e9, R * V * 4 / peer_ms / 1e9, "TB/s")

# ---- table ------------------------------------------------------------------------------------------
print()
print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  runs/median {RUNS}  copy {COPY_TBS:.2f} TB/s")
print(f"{'case':28s} {'shape':30s} {'ok':3s} {'kiln us':>9s} {'peer us':>9s} {'kiln':>8s} {'peer':>8s} unit")
for r in results:
    print(f"{r['case']:28s} {r['shape']:30s} {'ok' if r['ok'] else 'BAD':3s} {r['ms'] * 1e3:9.1f} "
          f"{(r['peer_ms'] or 0) * 1e3:9.1f} {r['kiln']:8.1f} {r['peer_value']:8.1f} {r['unit']}")
if args.json:
    with open(args.json, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), copy_tbs=COPY_TBS, results=results), f, indent=1)
sys.exit(0 if all(r["ok"] for r in results) else 1)
