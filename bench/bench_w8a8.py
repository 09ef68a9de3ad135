#!/usr/bin/env python3
"""bench_w8a8.py — issue 5's W8A8 FP8 line on the H200: qmatmul with act=fp8 (e4m3 codes of x and w,
per-row activation scales xs, per-channel weight scales) against torch._scaled_mm (FP8 tensor cores,
row-wise scales) on the same codes and scales, in the same run. quant_rows (bf16 -> e4m3 codes + row
scales) is timed beside it and checked against torch's own quantization of the same rule.
Correctness first: both outputs against float64 (codes x scales), relative L2 < 1e-2. The target: kiln's
TFLOP/s >= 70% of _scaled_mm's at 8192 x 8192 x 8192.

Usage: python3 bench/bench_w8a8.py --lib build-gpu/bench/libkbench.so [--runs 20] [--size 8192] [--config ...]
       [--act fp8|int8]
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
p.add_argument("--act", default="fp8", choices=["fp8", "int8"],
               help="int8: SmoothQuant-style int8 codes (wfmt=w8a16 act=int8, bf16 channel scales) against "
                    "torch._int_mm (its int32 product only: the peer's scaling is not timed)")
args = p.parse_args()
kb.init(args.lib)
dev = torch.device("cuda")
M = N = K = args.size
f8 = torch.float8_e4m3fn


INT8 = args.act == "int8"
RANGE = 127.0 if INT8 else 448.0


def quantize_rows(x):
    """quant_rows' rule in torch: s = amax / 448 (int8: 127; 1 for a zero row), q = e4m3(x / s) (int8:
    round half to even, clamped to +-127)."""
    amax = x.float().abs().amax(dim=1, keepdim=True)
    # amax / range as a tensor division: torch divides by a Python scalar as a product with its reciprocal,
    # which is not the rule (one IEEE division)
    s = torch.where(amax > 0, amax / torch.full_like(amax, RANGE), torch.ones_like(amax))
    q = (x.float() / s)
    q = torch.round(q).clamp(-127, 127).to(torch.int8) if INT8 else q.to(f8)
    return q, s.squeeze(1).contiguous()


x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
xq_t, xs_t = quantize_rows(x)
wq, ws = quantize_rows(w)  # per output channel
if INT8:
    ws = ws.bfloat16()  # w8a16's channel scales are the activation dtype
code_t = torch.int8 if INT8 else f8

# quant_rows: kiln's codes and scales vs torch's
qr = kb.Kernel("quant_rows", f"C={K} dtype=bf16 fmt={args.act}", "", quiet=True)
xq = torch.empty(M, K, device=dev, dtype=code_t)
xs = torch.full((M,), float("nan"), device=dev, dtype=torch.float32)
qr(x, xq.view(torch.uint8), xs, M)
torch.cuda.synchronize()
codes_equal = torch.equal(xq.view(torch.uint8), xq_t.view(torch.uint8))
scales_equal = torch.equal(xs, xs_t)
qr_ms = kb.median_ms(lambda i: qr(x, xq.view(torch.uint8), xs, M), 1, args.runs)

ref = (xq.double() * xs.double()[:, None]) @ (wq.double() * ws.double()[:, None]).t()
flop = 2.0 * M * N * K

if INT8:  # the peer: cuBLAS int8 x int8 -> int32 (b column-major), scaled afterwards (untimed)
    peer_name = "torch._int_mm"
    acc = torch._int_mm(xq, wq.t())
    out_p = (acc.double() * xs.double()[:, None] * ws.double()[None, :]).bfloat16()
    peer_ms = kb.median_ms(lambda i: torch._int_mm(xq, wq.t()), 1, args.runs)
else:  # the peer: _scaled_mm wants b column-major ([K, N] with stride (1, K)), row-wise scales [M,1], [1,N]
    peer_name = "torch._scaled_mm"
    out_p = torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :], out_dtype=torch.bfloat16)
    peer_ms = kb.median_ms(lambda i: torch._scaled_mm(xq, wq.t(), scale_a=xs[:, None], scale_b=ws[None, :],
                                                      out_dtype=torch.bfloat16), 1, args.runs)
err_p = kb.rel_l2(out_p, ref)

rows = []
spec = (f"N={N} K={K} dtype=bf16 wfmt=w8a16 act=int8 epilogue=none" if INT8 else
        f"N={N} K={K} dtype=bf16 wfmt=fp8 act=fp8 epilogue=none")
out = torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
for k in kb.kernels("qmatmul", spec, [""] + args.config):
    out.fill_(float("nan"))
    k(xq.view(torch.uint8), xs, wq.view(torch.uint8), ws, out, M)
    torch.cuda.synchronize()
    err = kb.rel_l2(out, ref)
    ms = kb.median_ms(lambda i, k=k: k(xq.view(torch.uint8), xs, wq.view(torch.uint8), ws, out, M), 1, args.runs)
    rows.append((k.config, err, ms, flop / ms / 1e9))

print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  runs/median {args.runs}  "
      f"W8A8 {args.act} {M}x{N}x{K}, row-wise scales")
print(f"quant_rows {M}x{K} bf16 -> {args.act}: {qr_ms * 1e3:.1f} us, codes equal to torch's: {codes_equal}, "
      f"scales equal: {scales_equal}")
peer_tf = flop / peer_ms / 1e9
print(f"{peer_name}: {peer_ms * 1e3:.1f} us, {peer_tf:.1f} TFLOP/s, rel L2 {err_p:.1e}")
for cfg, err, ms, tf in rows:
    print(f"kiln qmatmul act={args.act} [{cfg}]: {ms * 1e3:.1f} us, {tf:.1f} TFLOP/s = {tf / peer_tf:.2f} of "
          f"{peer_name}{' (target >= 0.70)' if not INT8 else ''}, rel L2 {err:.1e}{'' if err < 1e-2 else ' BAD'}")
