#!/usr/bin/env python3
"""bench_qmatmul.py — issue 5's w4a16 line on the H200: the qmatmul kernel (wfmt=w4a16, group 128, zero
points, bf16 scales or (--sdtype f16) f16 as packages keep them) against cuBLAS bf16 (torch.matmul on the dense
weights) in the same run, for Llama-3-8B's N x K = 28672x4096 and 4096x14336 at M = 1, 4, 16, 64.
Correctness first: out against float64 x @ dequant(w)^T (relative L2 < 1e-2), dequant(w) = f32(q - z) *
f32(s) rounded to bf16, as the kernel does. The target: kiln >= 3.0x cuBLAS's speed at M <= 16, >= 1.5x
at M = 64.

Usage: python3 bench/bench_qmatmul.py --lib build-gpu/bench/libkbench.so [--runs 50] [--config "BM=16 ..."]
       [--epilogue none|silu_mul|pair] [--shapes NxK,...] [--m 1,4,16,64]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--runs", type=int, default=50)
p.add_argument("--config", action="append", default=[], help="a config to time beside the default")
p.add_argument("--only", action="store_true", help="time the --config ones only, not the default")
p.add_argument("--group", type=int, default=128)
p.add_argument("--epilogue", default="none", choices=["none", "silu_mul", "pair"],
               help="silu_mul / pair: two weights (gate/up, k/v); the peer multiplies both in one cuBLAS call "
                    "on the weights stacked (its silu and product are not timed)")
p.add_argument("--shapes", default=None, help="NxK,... (default: 28672x4096,4096x14336; silu_mul 14336x4096; "
                                              "pair 1024x4096)")
p.add_argument("--m", default="1,4,16,64")
p.add_argument("--sdtype", default="bf16", choices=["bf16", "f16"],
               help="the scales' dtype (packages store bf16: the activations' dtype)")
args = p.parse_args()
kb.init(args.lib)
dev = torch.device("cuda")
G = args.group
sdt = torch.bfloat16 if args.sdtype == "bf16" else torch.float16
epi = args.epilogue
nw = 1 if epi == "none" else 2
default_shapes = {"none": "28672x4096,4096x14336", "silu_mul": "14336x4096", "pair": "1024x4096"}[epi]
shapes = [tuple(int(v) for v in s.split("x")) for s in (args.shapes or default_shapes).split(",")]


def make_weight(N, K, g):
    """Random codes, zero points and scales in kiln's layout; and the dense bf16 weight they mean."""
    q = torch.randint(0, 16, (N, K), device=dev, dtype=torch.int32, generator=g)
    z = torch.randint(0, 16, (N, K // G), device=dev, dtype=torch.int32, generator=g)
    s = (torch.rand((N, K // G), device=dev, generator=g) * 0.004 + 0.002).to(sdt)
    # the fragment order (ir/kfam_qmatmul.c): k = 32b + 8i + 2t + h sits in word 4b + t at nibble i + 4h
    i, h = torch.arange(4, device=dev).view(4, 1), torch.arange(2, device=dev).view(1, 2)
    shifts = ((i + 4 * h) * 4).to(torch.int32)
    qp = q.view(N, K // 32, 4, 4, 2).permute(0, 1, 3, 2, 4)  # [n, b, t, i, h]
    words = (qp << shifts).sum((-2, -1), dtype=torch.int64).reshape(N, K // 8)
    words = torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)
    zi = z.repeat_interleave(G, 1)
    # f16 scales with bf16 activations: the kernel rounds each scale to bf16 first (docs/KERNELS.md)
    dense = ((q - zi).float() * s.bfloat16().float().repeat_interleave(G, 1)).bfloat16()
    return words.contiguous(), s.contiguous(), z.to(torch.uint8).contiguous(), dense


def reference(y, N):
    """The epilogue on float64 products y [M, nw * N]: the outputs' expected values."""
    if epi == "none":
        return [y]
    if epi == "pair":
        return [y[:, :N], y[:, N:]]
    return [torch.nn.functional.silu(y[:, :N]) * y[:, N:]]


rows = []
gen = torch.Generator(device=dev).manual_seed(0)
for N, K in shapes:
    sets = kb.sets_for(nw * N * K // 2)
    wts = [[make_weight(N, K, gen) for _ in range(nw)] for _ in range(sets)]
    dense = [torch.cat([w[3] for w in wt]) for wt in wts]  # [nw * N, K]
    wsb, sem = kb.splitk_buffers(N)  # ws=1: split-K reduced in the launch (the runtime's own form)
    for M in (int(m) for m in args.m.split(",")):
        spec = (f"N={N} K={K} dtype=bf16 wfmt=w4a16 group={G} zeros=1 sdtype={args.sdtype} epilogue={epi} ws=1 "
                f"m_hint={M}")
        xs = [torch.randn(M, K, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
        outs = [[torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16) for _ in range(sets)]
                for _ in range(2 if epi == "pair" else 1)]
        refs = reference(xs[0].double() @ dense[0].double().t(), N)
        peer_ms = kb.median_ms(lambda i: torch.matmul(xs[i], dense[i].t()), sets, args.runs)
        for k in kb.kernels("qmatmul", spec, ([] if args.only else [""]) + args.config):
            def run(i, k=k):
                wargs = [t for w in wts[i] for t in w[:3]]
                k(xs[i], *wargs, *[o[i] for o in outs], wsb, sem, M)

            for o in outs:
                o[0].fill_(float("nan"))
            run(0)
            torch.cuda.synchronize()
            err = max(kb.rel_l2(o[0], r) for o, r in zip(outs, refs))
            ms = kb.median_ms(run, sets, args.runs)
            speed = peer_ms / ms
            want = 3.0 if M <= 16 else 1.5
            rows.append((f"{N}x{K}", M, k.config, err, ms * 1e3, peer_ms * 1e3, speed, want))
            print(f"{N}x{K} M={M} [{k.config}] err {err:.1e}{'' if err < 1e-2 else ' BAD'}: kiln {ms * 1e3:.1f} us, "
                  f"cuBLAS bf16 {peer_ms * 1e3:.1f} us, {speed:.2f}x (target >= {want}x)", flush=True)

print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  runs/median {args.runs}  w4a16 g{G} "
      f"zeros, {args.sdtype} scales, bf16 activations, epilogue {epi}")
print(f"{'shape':12} {'M':>3} {'config':44} {'rel L2':>8} {'kiln us':>8} {'cuBLAS us':>9} {'speedup':>8} target")
for shape, M, cfg, err, k_us, p_us, speed, want in rows:
    print(f"{shape:12} {M:3d} {cfg:44} {err:8.1e} {k_us:8.1f} {p_us:9.1f} {speed:7.2f}x >= {want}x "
          f"{'met' if speed >= want and err < 1e-2 else 'NOT met'}")
