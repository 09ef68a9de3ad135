#!/usr/bin/env python3
"""Checks the linear layers and norms of a package, kernel by kernel, at the configs the package's
binaries for one target carry, against float64 PyTorch on random inputs (GPU machine).

  python3 bench/check_package.py --lib build-gpu/bench/libkbench.so PACKAGE [--target sm_90a] [--M 128]

Families checked: matmul (epilogues none / silu_mul, gathered rows), rmsnorm (with and without residual).
Prints rel L2 per (kernel, config); tolerance bf16/f16 1e-2, f32 1e-4 (DESIGN.md).
"""
import argparse
import math
import os
import sqlite3
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def spec_dict(spec):
    return dict(kv.split("=", 1) for kv in spec.split() if "=" in kv)


def check_matmul(spec, cfg, M):
    s = spec_dict(spec)
    N, K, dt = int(s["N"]), int(s["K"]), DT[s["dtype"]]
    odt = DT[s.get("out_dtype", s["dtype"])]
    dev = "cuda"
    T = M + 7 if s.get("gather") == "1" else M
    x = torch.randn(T, K, device=dev).to(dt)
    w = (torch.randn(N, K, device=dev) / math.sqrt(K)).to(dt)
    out = torch.full((M, N), float("nan"), device=dev, dtype=odt)
    k = kb.Kernel("matmul", spec, cfg, quiet=True)
    if s.get("epilogue") == "silu_mul":
        w2 = (torch.randn(N, K, device=dev) / math.sqrt(K)).to(dt)
        k(x, w, w2, out, M)
        g, u = x.double() @ w.double().t(), x.double() @ w2.double().t()
        ref = g * torch.sigmoid(g) * u
    elif s.get("epilogue") == "pair":
        w2 = (torch.randn(N, K, device=dev) / math.sqrt(K)).to(dt)
        out2 = torch.full((M, N), float("nan"), device=dev, dtype=odt)
        k(x, w, w2, out, out2, M)
        out = torch.cat([out, out2], 1)
        ref = torch.cat([x.double() @ w.double().t(), x.double() @ w2.double().t()], 1)
    elif s.get("gather") == "1":
        rows = torch.randperm(T, device=dev)[:M].to(torch.int32)
        k(x, w, rows, out, M)
        ref = x.double()[rows.long()] @ w.double().t()
    else:  # ws=1: the split-K pair follows out (a split variant serves at most 64 rows)
        k(x, w, out, *(kb.splitk_buffers(N) if s.get("ws") == "1" else ()), M)
        ref = x.double() @ w.double().t()
    return kb.rel_l2(out, ref), s["dtype"]


def check_rmsnorm(spec, cfg, M):
    s = spec_dict(spec)
    C, eps, dt = int(s["C"]), float(s["eps"]), DT[s["dtype"]]
    x, r = torch.randn(M, C, device="cuda").to(dt), torch.randn(M, C, device="cuda").to(dt)
    w = torch.randn(C, device="cuda").to(dt)
    out = torch.full_like(x, float("nan"))
    k = kb.Kernel("rmsnorm", spec, cfg, quiet=True)
    if s.get("residual") == "1":
        sm = torch.full_like(x, float("nan"))
        k(x, r, w, out, sm, M)
        h = (x.double() + r.double()).to(dt).double()
    else:
        k(x, w, out, M)
        h = x.double()
    ref = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    return kb.rel_l2(out, ref), s["dtype"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--M", type=int, default=128)
    ap.add_argument("package")
    a = ap.parse_args()
    kb.init(a.lib)
    db = sqlite3.connect(f"file:{a.package}?mode=ro", uri=True)
    rows = db.execute("SELECT k.family, k.spec, b.config FROM binaries b JOIN kernels k ON k.id = b.kernel_id "
                      "WHERE b.target = ? ORDER BY k.id, b.config", (a.target,)).fetchall()
    bad = 0
    for fam, spec, cfg in rows:
        if spec.startswith(fam + " "):
            spec = spec[len(fam) + 1:]  # the package stores "family key=value ..."
        fn = {"matmul": check_matmul, "rmsnorm": check_rmsnorm}.get(fam)
        if not fn:
            continue
        for M in sorted({1, a.M}):
            if "ws=1" in spec and "SPLIT_K=1" not in cfg and M > 64:
                M = 64  # a variant that splits K inside the launch serves at most 64 rows (kfam_matmul.c)
            try:
                err, dt = fn(spec, cfg, M)
            except RuntimeError as e:
                err, dt = float("nan"), str(e)[:120]
            tol = 1e-4 if dt == "f32" else 1e-2  # (dt: an error text when the kernel did not run)
            ok = err < tol
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {fam} {spec} [{cfg}] M={M}: rel L2 {err:.2e} (tol {tol:g})", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
