#!/usr/bin/env python3
"""bench_configs.py — time one kernel family over a list of configs on the GPU, with the peer in the same
run (the measurement the autotuner will automate). Each config is checked against PyTorch first.

Usage: python3 bench/bench_configs.py --lib build-gpu/bench/libkbench.so CASE "CFG" ["CFG" ...]
CASE: rmsnorm | rmsnorm+res | rope[:MAX_POS] (positions uniform below it, default 131072) | mm:M:N:K (bf16, epilogue none; SPLIT_K > 1 runs the split-K pair:
zero the f32 workspace, the matmul, matmul_splitk_epilogue, all inside the timed region).
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--runs", type=int, default=50)
p.add_argument("case")
p.add_argument("configs", nargs="+")
args = p.parse_args()
kb.init(args.lib)
dev = torch.device("cuda")
RUNS = args.runs


def case_rmsnorm(residual):
    T, C, eps = 8192, 4096, 1e-5
    spec = f"C={C} eps={eps} dtype=bf16 residual={residual}"
    n = kb.sets_for(T * C * 2 * (3 if residual else 2))
    xs = [torch.randn(T, C, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    rs = [torch.randn(T, C, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    w = torch.randn(C, device=dev, dtype=torch.bfloat16)
    outs = [torch.full((T, C), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(n)]
    sums = [torch.full((T, C), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(n)]
    s = (xs[0].float() + rs[0].float()).bfloat16() if residual else xs[0]
    ref = s.double() * torch.rsqrt(s.double().pow(2).mean(-1, keepdim=True) + eps) * w.double()

    def make(cfg):
        outs[0].fill_(float("nan"))  # poisoned: a config that writes nothing fails
        k = kb.Kernel("rmsnorm", spec, cfg, quiet=True)
        if residual:
            return k, lambda i: k(xs[i], rs[i], w, outs[i], sums[i], T)
        return k, lambda i: k(xs[i], w, outs[i], T)

    def peer(i):
        return torch.nn.functional.rms_norm(xs[i] + rs[i] if residual else xs[i], (C,), w, eps)

    return make, lambda: kb.rel_l2(outs[0], ref), peer, n, T * C * 2 * (4 if residual else 2), "TB/s"


def case_rope(max_pos):
    T, H, D = 8192, 32, 128
    spec = (f"H={H} D={D} theta=500000.0 scaling=llama3 factor=8.0 low_freq_factor=1.0 high_freq_factor=4.0 "
            f"original_max_pos=8192 dtype=bf16")
    n = kb.sets_for(T * H * D * 4)
    xs = [torch.randn(T, H * D, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    pos = torch.randint(0, max_pos, (T,), device=dev, dtype=torch.int32)
    outs = [torch.full_like(xs[0], float("nan")) for _ in range(n)]
    ref = {}

    def make(cfg):
        outs[0].fill_(float("nan"))  # poisoned: a config that writes nothing fails
        k = kb.Kernel("rope", spec, cfg, quiet=True)
        if not ref:  # the first config is the reference for the others (bench_kernels.py checks vs HF math)
            k(xs[0], pos, outs[0], T)
            ref["y"] = outs[0].clone()
        return k, lambda i: k(xs[i], pos, outs[i], T)

    def peer(i):
        return xs[i] * 2

    return make, lambda: kb.rel_l2(outs[0], ref["y"]), peer, n, T * H * D * 4, "TB/s"


def case_mm(M, N, K):
    spec = f"N={N} K={K} dtype=bf16 epilogue=none m_hint={M}"
    n = kb.sets_for(N * K * 2)
    xs = [torch.randn(M, K, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K) for _ in range(n)]
    outs = [torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(n)]
    acc = torch.empty(M, N, device=dev, dtype=torch.float32)
    ref = xs[0].float() @ ws[0].float().t()

    def make(cfg):
        outs[0].fill_(float("nan"))  # poisoned: a config that writes nothing fails
        k = kb.Kernel("matmul", spec, cfg, quiet=True)
        if "SPLIT_K=1" in cfg or "SPLIT_K" not in cfg:
            return k, lambda i: k(xs[i], ws[i], outs[i], M)
        e = kb.Kernel("matmul_splitk_epilogue", f"N={N} dtype=bf16 epilogue=none", "", quiet=True)

        def run(i):
            acc.zero_()
            k(xs[i], ws[i], acc, M)
            e(acc, outs[i], M)
        return k, run

    return make, lambda: kb.rel_l2(outs[0], ref), lambda i: xs[i] @ ws[i].t(), n, N * K * 2, "TB/s of weights"


if args.case.startswith("mm:"):
    M, N, K = map(int, args.case[3:].split(":"))
    make, check, peer, sets, nbytes, unit = case_mm(M, N, K)
elif args.case.startswith("rope"):
    make, check, peer, sets, nbytes, unit = case_rope(int(args.case[5:] or 131072))
else:
    make, check, peer, sets, nbytes, unit = case_rmsnorm(int(args.case == "rmsnorm+res"))

peer_ms = kb.median_ms(peer, sets, RUNS)
print(f"{args.case}: peer {peer_ms * 1e3:.1f} us = {nbytes / peer_ms / 1e9:.2f} {unit}")
for cfg in args.configs:
    try:
        k, run = make(cfg)
    except RuntimeError as e:
        print(f"  [{cfg}] {str(e)[:150]}")
        continue
    run(0)
    torch.cuda.synchronize()
    err = check()
    ms = kb.median_ms(run, sets, RUNS)
    print(f"  [{k.config}] {ms * 1e3:8.1f} us {nbytes / ms / 1e9:6.2f} {unit}  x{ms / peer_ms:.2f} of peer time"
          f"  err {err:.1e}{'' if err < 1e-2 else ' BAD'}", flush=True)
