#!/usr/bin/env python3
"""bench_w8a8.py — issue 5's W8A8 FP8 line on the H200: qmatmul with act=fp8 (e4m3 codes of x and w,
per-row activation scales xs, per-channel weight scales) against torch._scaled_mm (FP8 tensor cores,
row-wise scales) on the same codes and scales, in the same run. quant_rows (bf16 -> e4m3 codes + row
scales) is timed beside it and checked against torch's own quantization of the same rule.
Correctness first: both outputs against float64 (codes x scales), relative L2 < 1e-2. The target: kiln's
TFLOP/s >= 70% of _scaled_mm's at 8192 x 8192 x 8192.

Written in session 6 without a GPU: not run yet.
Usage: python3 bench/bench_w8a8.py --lib build-gpu/bench/libkbench.so [--runs 20] [--size 8192] [--config ...]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--runs", type=int, default=20)
p.add_argument("--size", type=int, default=8192)
p.add_argument("--config", action="append", default=[], help="a qmatmul config to time beside the default")
args = p.parse_args()
kb.init(args.lib)
dev = torch.device("cuda")
M = N = K = args.size
f8 = torch.float8_e4m3fn


def quantize_rows(x):
    """quant_rows' rule in torch: s = amax / 448 (1 for a zero row), q = e4m3(x / s)."""
    amax = x.float().abs().amax(dim=1, keepdim=True)
    # amax / 448 as a tensor division: torch divides by a Python scalar as a product with its reciprocal,
    # which is not the rule (one IEEE division)
    s = torch.where(amax > 0, amax / torch.full_like(amax, 448.0), torch.ones_like(amax))
    return (x.float() / s).to(f8), s.squeeze(1).contiguous()


x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
xq_t, xs_t = quantize_rows(x)
wq, ws = quantize_rows(w)  # per output channel

# quant_rows: kiln's codes and scales vs torch's
qr = kb.Kernel("quant_rows", f"C={K} dtype=bf16 fmt=fp8", "", quiet=True)
xq = torch.empty(M, K, device=dev, dtype=f8)
xs = torch.full((M,), float("nan"), device=dev, dtype=torch.float32)
qr(x, xq.view(torch.uint8), xs, M)
torch.cuda.synchronize()
codes_equal = torch.equal(xq.view(torch.uint8), xq_t.view(torch.uint8))
scales_equal = torch.equal(xs, xs_t)
qr_ms = kb.median_ms(lambda i: qr(x, xq.view(torch.uint8), xs, M), 1, args.runs)

ref = (xq.double() * xs.double()[:, None]) @ (wq.double() * ws.double()[:, None]).t()
flop = 2.0 * M * N * K

# the peer: _scaled_mm wants b column-major ([K, N] with stride (1, K)), row-wise scales [M,1] and [1,N]
out_p = torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :], out_dtype=torch.bfloat16)
err_p = kb.rel_l2(out_p, ref)
peer_ms = kb.median_ms(lambda i: torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :],
                                                  out_dtype=torch.bfloat16), 1, args.runs)

rows = []
spec = f"N={N} K={K} dtype=bf16 wfmt=fp8 act=fp8 epilogue=none"
out = torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
for k in kb.kernels("qmatmul", spec, [""] + args.config):
    out.fill_(float("nan"))
    k(xq.view(torch.uint8), xs, wq.view(torch.uint8), ws, out, M)
    torch.cuda.synchronize()
    err = kb.rel_l2(out, ref)
    ms = kb.median_ms(lambda i, k=k: k(xq.view(torch.uint8), xs, wq.view(torch.uint8), ws, out, M), 1, args.runs)
    rows.append((k.config, err, ms, flop / ms / 1e9))

print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  runs/median {args.runs}  "
      f"W8A8 FP8 {M}x{N}x{K}, row-wise scales")
print(f"quant_rows {M}x{K} bf16 -> e4m3: {qr_ms * 1e3:.1f} us, codes equal to torch's: {codes_equal}, "
      f"scales equal: {scales_equal}")
peer_tf = flop / peer_ms / 1e9
print(f"torch._scaled_mm: {peer_ms * 1e3:.1f} us, {peer_tf:.1f} TFLOP/s, rel L2 {err_p:.1e}")
for cfg, err, ms, tf in rows:
    print(f"kiln qmatmul act=fp8 [{cfg}]: {ms * 1e3:.1f} us, {tf:.1f} TFLOP/s = {tf / peer_tf:.2f} of _scaled_mm "
          f"(target >= 0.70), rel L2 {err:.1e}{'' if err < 1e-2 else ' BAD'}")
