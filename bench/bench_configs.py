#!/usr/bin/env python3
"""bench_configs.py — time one kernel family over a list of configs on the GPU, with the peer in the same
run (the measurement the autotuner will automate). Each config is checked against PyTorch first.

Usage: python3 bench/bench_configs.py --lib build-gpu/bench/libkbench.so CASE "CFG" ["CFG" ...]
CASE: rmsnorm | rmsnorm+res | rope[:MAX_POS] (positions uniform below it, default 131072) | sample:ROWS (V 128256,
temperature 0: greedy through the sampling kernel; checked exact against torch argmax) |
mm:M:N:K[:EPI[:N2[:N3]]] or mmws:... (spec ws=1: split-K reduced inside the launch) (bf16; EPI none, pair, silu_mul or group (N2, N3: the other products' rows); the peer is
cuBLAS per weight (and torch silu * mul); SPLIT_K > 1 (epilogue none) runs the split-K pair:
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


def case_mm(M, N, K, epi, N2=0, N3=0, inl=False):
    spec = f"N={N} K={K} dtype=bf16 epilogue={epi} m_hint={M}" + (" ws=1" if inl else "")
    pair_ = kb.splitk_buffers(N) if inl else ()  # ws=1 (CASE mmws:...): split-K inside the launch
    ns = [N]  # the weights' rows: pair and silu_mul two of N, group N, N2 (, N3)
    if epi in ("pair", "silu_mul"):
        ns = [N, N]
    elif epi == "group":
        spec += f" N2={N2}" + (f" N3={N3}" if N3 else "")
        ns = [N, N2] + ([N3] if N3 else [])
    n = kb.sets_for(sum(ns) * K * 2)
    xs = [torch.randn(M, K, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    wss = [[torch.randn(r, K, device=dev, dtype=torch.bfloat16) / math.sqrt(K) for r in ns] for _ in range(n)]
    n_out = 1 if epi in ("none", "silu_mul") else len(ns)
    outss = [[torch.full((M, ns[o]), float("nan"), device=dev, dtype=torch.bfloat16) for o in range(n_out)]
             for _ in range(n)]
    ws = [w[0] for w in wss]
    outs = [o[0] for o in outss]
    acc = torch.empty(M, N, device=dev, dtype=torch.float32)
    ref = xs[0].float() @ ws[0].float().t()
    if epi == "silu_mul":
        ref = torch.nn.functional.silu(ref) * (xs[0].float() @ wss[0][1].float().t())

    def make(cfg):
        for o in outss[0]:
            o.fill_(float("nan"))  # poisoned: a config that writes nothing (to any output) fails
        k = kb.Kernel("matmul", spec, cfg, quiet=True)
        if epi != "none":
            return k, lambda i: k(xs[i], *wss[i], *outss[i], M)
        if inl or "SPLIT_K=1" in cfg or "SPLIT_K" not in cfg:
            return k, lambda i: k(xs[i], ws[i], outs[i], *pair_, M)
        e = kb.Kernel("matmul_splitk_epilogue", f"N={N} dtype=bf16 epilogue=none", "", quiet=True)

        def run(i):
            acc.zero_()
            k(xs[i], ws[i], acc, M)
            e(acc, outs[i], M)
        return k, run

    def peer(i):
        if epi == "silu_mul":
            return torch.nn.functional.silu(xs[i] @ wss[i][0].t()) * (xs[i] @ wss[i][1].t())
        return [xs[i] @ w.t() for w in wss[i]]

    def check():  # every output against its float32 product
        errs = [kb.rel_l2(outs[0], ref)]
        if epi in ("pair", "group"):
            errs += [kb.rel_l2(outss[0][o], xs[0].float() @ wss[0][o].float().t()) for o in range(1, n_out)]
        if inl:  # the tile counters must be left zero
            errs.append(float(pair_[1].abs().sum().item() != 0))
        return max(errs)

    return make, check, peer, n, sum(ns) * K * 2, "TB/s of weights"


def case_sample(R):
    """mode sample with temperature 0 (greedy through the sampling kernel, as the engine runs it)"""
    V = 128256
    logits = torch.randn(R, V, device=dev, dtype=torch.float32)
    params = torch.zeros(R, 4, device=dev, dtype=torch.float32)
    params[:, 2] = 1.0  # top_p off
    out = torch.full((R,), -1, device=dev, dtype=torch.int32)

    def make(cfg):
        out.fill_(-1)
        k = kb.Kernel("sample", f"V={V} mode=sample", cfg, quiet=True)
        return k, lambda i: k(logits, params, out, R)

    def check():
        return 0.0 if bool((out.long() == logits.argmax(-1)).all()) else 1.0

    return make, check, lambda i: logits.argmax(-1), 1, R * V * 4, "TB/s"


if args.case.startswith("sample:"):
    make, check, peer, sets, nbytes, unit = case_sample(int(args.case[7:]))
elif args.case.startswith(("mm:", "mmws:")):
    f = args.case.split(":")[1:]
    make, check, peer, sets, nbytes, unit = case_mm(int(f[0]), int(f[1]), int(f[2]), f[3] if len(f) > 3 else "none",
                                                    *[int(x) for x in f[4:]], inl=args.case.startswith("mmws:"))
elif args.case.startswith("rope"):
    make, check, peer, sets, nbytes, unit = case_rope(int(args.case[5:] or 131072))
else:
    make, check, peer, sets, nbytes, unit = case_rmsnorm(int(args.case == "rmsnorm+res"))

if args.case.startswith(("rmsnorm", "rope")):  # the copy ceiling, for the bandwidth-bound families
    cx = torch.empty(1 << 28, dtype=torch.uint8, device=dev)
    cy = torch.empty_like(cx)
    copy_ms = kb.median_ms(lambda i: cy.copy_(cx), 1, RUNS)
    print(f"copy ceiling: {2 * cx.numel() / copy_ms / 1e9:.2f} TB/s (256 MB device-to-device, torch copy_)")
    del cx, cy
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
