#!/usr/bin/env python3
"""bench_attention.py — kiln's attention family on the GPU against PyTorch SDPA, in one run.

1. Correctness sweep: ragged batches over a paged KV cache (shuffled pages, unused slots poisoned with
   NaN), odd lengths, page sizes 8/16/32, GQA ratios 1/4/8, head dims 64/128/256, causal or not,
   chunked prefill, decode, speculative verify; reference in float32 from the gathered cache.
2. Timing (CUDA events, median) against SDPA's FLASH_ATTENTION (FA2) and CUDNN_ATTENTION backends:
   prefill 32 heads d128, 16k tokens per launch (S = 1k/4k/16k, causal and not), TFLOP/s;
   decode GQA 32/8 d128 page 16 (batch 64 x 4096, batch 1 x 32768), effective KV TB/s;
   verify k = 4 and 8 at batch 32 x 4096 against a decode step of the same batch.

Usage: python3 bench/bench_attention.py --lib build-gpu/bench/libkbench.so [--quick] [--only ...]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kb  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--lib", required=True)
p.add_argument("--quick", action="store_true")
p.add_argument("--only", default="", help="comma-separated case-name prefixes (sweep, prefill, decode, verify)")
p.add_argument("--json", default="")
p.add_argument("--config", action="append", default=[], help="MODE=CONFIG override, e.g. 'decode=BLOCK_N=64'")
p.add_argument("--split-waves", type=int, default=2, help="decode split heuristic: programs for this many SM waves")
p.add_argument("--split-cap", type=int, default=32, help="decode split heuristic: at most this many splits")
p.add_argument("--source", default="", help="write the CUDA source of each timed kernel into this folder")
args = p.parse_args()
dev = torch.device("cuda")
torch.manual_seed(int(time.time()))
kb.init(args.lib)
RUNS = 10 if args.quick else 30
overrides = dict(c.split("=", 1) for c in args.config)
results = []


def want(name):
    return not args.only or any(name.startswith(x) for x in args.only.split(","))


class Paged:
    """A paged KV cache holding a batch: pages shuffled, every slot not holding a token is NaN."""

    def __init__(self, seq_lens, Hkv, D, S, dt, extra_pages=3):
        self.S, self.B = S, len(seq_lens)
        n_pages = [math.ceil(L / S) for L in seq_lens]
        P = sum(n_pages) + extra_pages
        self.max_pages = max(max(n_pages), 1)
        self.k = torch.full((P, S, Hkv, D), float("nan"), device=dev, dtype=dt)
        self.v = torch.full_like(self.k, float("nan"))
        perm = torch.randperm(P, device=dev).to(torch.int32)
        self.bt = torch.full((self.B, self.max_pages), -1, device=dev, dtype=torch.int32)
        self.keys, self.vals = [], []
        used = 0
        for b, L in enumerate(seq_lens):
            pages = perm[used:used + n_pages[b]]
            used += n_pages[b]
            self.bt[b, :n_pages[b]] = pages
            kk = torch.randn(L, Hkv, D, device=dev, dtype=dt)
            vv = torch.randn(L, Hkv, D, device=dev, dtype=dt)
            pos = torch.arange(L, device=dev)
            slot_page, slot_off = pages.long()[pos // S], pos % S
            self.k[slot_page, slot_off] = kk
            self.v[slot_page, slot_off] = vv
            self.keys.append(kk)
            self.vals.append(vv)
        self.seq_lens = torch.tensor(seq_lens, device=dev, dtype=torch.int32)


def reference(q, cache, q_lens, H, causal, window, scale, tree=None):
    """float32 attention per sequence from the gathered cache; q [T, H, D]."""
    outs, t0 = [], 0
    for b, ql in enumerate(q_lens):
        L = int(cache.seq_lens[b])
        k, v = cache.keys[b].float(), cache.vals[b].float()
        g = H // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)  # [L, H, D]
        qq = q[t0:t0 + ql].float()
        s = torch.einsum("qhd,khd->hqk", qq, k) * scale
        pos = L - ql + torch.arange(ql, device=dev)[:, None]
        key = torch.arange(L, device=dev)[None, :]
        ok = torch.ones(ql, L, dtype=torch.bool, device=dev)
        if causal:
            ok &= key <= pos
        if window:
            ok &= key > pos - window
        if tree is not None:  # draft-tree verify: the step's own tokens only where the ancestor bit is set
            tm = tree[t0:t0 + ql].to(dev)[:, None]
            rel = (key - (L - ql)).clamp(min=0, max=63)
            ok &= (key < L - ql) | (((tm >> rel) & 1) != 0)
        s = s.masked_fill(~ok[None], float("-inf"))
        pr = torch.softmax(s, -1).nan_to_num(0.0)
        outs.append(torch.einsum("hqk,khd->qhd", pr, v))
        t0 += ql
    return torch.cat(outs, 0)


def build(mode, H, Hkv, D, S, causal=1, window=0, dt="bf16", config="", split=0, tree=0):
    spec = f"mode={mode} H={H} Hkv={Hkv} D={D} page_size={S} causal={causal} window={window} dtype={dt}"
    spec += (" split=1" if split else "") + (" tree=1" if tree else "")
    return kb.Kernel("attention", spec, config or overrides.get(mode, ""), quiet=True)


def random_trees(q_lens):
    """A random draft tree per sequence (parent of token j uniform in [0, j)): ancestor bit masks, i64."""
    masks = []
    for ql in q_lens:
        anc = []
        for j in range(ql):
            par = -1 if j == 0 else int(torch.randint(0, j, (1,)))
            anc.append((anc[par] if par >= 0 else 0) | (1 << j))
        masks += anc
    return torch.tensor(masks, dtype=torch.int64)


def launch(k, q, cache, cu_q, out, max_q):
    T = q.shape[0]
    k(q, cache.k, cache.v, cache.bt, cache.seq_lens, cu_q, out, T, cache.B, cache.max_pages, max_q)


SMS = torch.cuda.get_device_properties(0).multi_processor_count


def n_splits_for(B, Hkv, G, qn, ctx, block_m=16):
    """Flash-decoding's split: enough programs for two waves of SMs, keys per split >= 512, at most 32
    (one trip of attention_merge's default SPLITS)."""
    programs = B * Hkv * math.ceil(qn * G / block_m)
    return max(1, min(math.ceil(args.split_waves * SMS / programs), ctx // 512, args.split_cap))


class Split:
    """attention (split=1) + attention_merge, with their f32 workspace."""

    def __init__(self, mode, H, Hkv, D, S, n, T, dt="bf16", causal=1, window=0):
        self.k = build(mode, H, Hkv, D, S, causal, window, dt, split=1)
        self.m = kb.Kernel("attention_merge", f"H={H} D={D} dtype={dt}", "", quiet=True)
        self.n, self.T = n, T
        self.ws_o = torch.empty(T * H * n, D, device=dev, dtype=torch.float32)
        self.ws_lse = torch.empty(T * H * n, device=dev, dtype=torch.float32)
        self.config = self.k.config

    def __call__(self, q, cache, cu_q, out, max_q):
        self.k(q, cache.k, cache.v, cache.bt, cache.seq_lens, cu_q, out, self.T, cache.B, cache.max_pages, max_q,
               self.ws_o, self.ws_lse, self.n)
        if self.n > 1:  # one split writes out itself
            self.m(self.ws_o, self.ws_lse, out, self.T, self.n)

    def source(self):
        return self.k.source()


def setup(q_lens, seq_lens, H, Hkv, D, S, dt=torch.bfloat16):
    cache = Paged(seq_lens, Hkv, D, S, dt)
    T = sum(q_lens)
    q = torch.randn(T, H, D, device=dev, dtype=dt)
    cu = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0).tolist()), device=dev, dtype=torch.int32)
    out = torch.full((T, H, D), float("nan"), device=dev, dtype=dt)
    return cache, q, cu, out


# ---- 1. correctness sweep ---------------------------------------------------------------------------
if want("sweep"):
    g = torch.Generator().manual_seed(int(time.time()))
    n_ok = n = 0
    worst = 0.0
    for D in (64, 128, 256, 80):
        for ratio in (1, 4, 8):
            for S in (8, 16, 32):
                for causal in (0, 1):
                    Hkv = 2 if ratio < 8 else 1
                    H = Hkv * ratio
                    window = 0 if (D + S) % 3 else 37
                    B = int(torch.randint(1, 5, (1,), generator=g))
                    seq_lens, q_lens = [], []
                    for b in range(B):
                        L = int(torch.randint(1, 300, (1,), generator=g))
                        kind = (b + D + S) % 4  # decode, whole prefill, chunk, verify
                        ql = 1 if kind == 0 else L if kind == 1 else max(1, L // 3) if kind == 2 else min(L, 5)
                        if not causal:
                            ql = min(ql, L)
                        seq_lens.append(L)
                        q_lens.append(ql)
                    mode = "decode" if all(x == 1 for x in q_lens) else "mixed"
                    cache, q, cu, out = setup(q_lens, seq_lens, H, Hkv, D, S)
                    scale = 1.0 / math.sqrt(D)
                    n += 1
                    splits = (n % 3 == 0) * (1 + n % 5)  # a third of the cases: split-KV + merge
                    if splits:
                        Split(mode, H, Hkv, D, S, splits, sum(q_lens), causal=causal, window=window)(
                            q.view(q.shape[0], -1), cache, cu, out, max(q_lens))
                    else:
                        k = build(mode, H, Hkv, D, S, causal, window)
                        launch(k, q.view(q.shape[0], -1), cache, cu, out, max(q_lens))
                    torch.cuda.synchronize()
                    ref = reference(q, cache, q_lens, H, causal, window, scale)
                    e = kb.rel_l2(out, ref)
                    n_ok += e == e and e < 1e-2
                    worst = max(worst, e if e == e else float("inf"))
                    if not (e == e and e < 1e-2):
                        print(f"BAD sweep D{D} H{H}/{Hkv} S{S} causal{causal} win{window} split{splits} q{q_lens} "
                              f"L{seq_lens}: {e:.3e}")
    print(f"sweep: {n_ok}/{n} cases within 1e-2 (worst {worst:.2e})", flush=True)
    results.append(dict(case="sweep", shape=f"{n} ragged cases", ok=n_ok == n, err=worst))


def peer_ms(fn, backend):
    try:
        with sdpa_kernel([backend]):
            return kb.median_ms(lambda i: fn(), 1, RUNS)
    except RuntimeError as e:
        print(f"  peer {backend}: {str(e).splitlines()[0][:120]}")
        return None


def row(case, shape, err, ms, fa2, cudnn, metric, unit):
    ok = err == err and err < 1e-2
    r = dict(case=case, shape=shape, err=err, ok=ok, ms=ms, fa2_ms=fa2, cudnn_ms=cudnn, unit=unit,
             kiln=metric(ms), fa2=metric(fa2) if fa2 else None, cudnn=metric(cudnn) if cudnn else None)
    results.append(r)
    f = lambda x: f"{x:8.1f}" if x else "     n/a"
    print(f"{case:22s} {shape:34s} err {err:.1e} {'ok ' if ok else 'BAD'} kiln {ms * 1e3:9.1f} us "
          f"{f(r['kiln'])} | FA2 {f(r['fa2'])} | cuDNN {f(r['cudnn'])} {unit}", flush=True)
    if args.source:
        os.makedirs(args.source, exist_ok=True)
    return r


# ---- 2. prefill -------------------------------------------------------------------------------------
H, D = 32, 128
for Sq in (1024, 4096, 16384):
    for causal in (0, 1):
        name = f"prefill S{Sq}{' causal' if causal else ''}"
        if not want(name):
            continue
        B = 16384 // Sq
        cache, q, cu, out = setup([Sq] * B, [Sq] * B, H, H, D, 16)
        k = build("prefill", H, H, D, 16, causal)
        qf = q.view(q.shape[0], -1)
        launch(k, qf, cache, cu, out, Sq)
        qs = q.view(B, Sq, H, D).transpose(1, 2)
        ks = torch.stack(cache.keys).transpose(1, 2)
        vs = torch.stack(cache.vals).transpose(1, 2)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            ref = F.scaled_dot_product_attention(qs, ks, vs, is_causal=bool(causal))
        err = kb.rel_l2(out, ref.transpose(1, 2).reshape(out.shape))
        ms = kb.median_ms(lambda i: launch(k, qf, cache, cu, out, Sq), 1, RUNS)
        sd = lambda: F.scaled_dot_product_attention(qs, ks, vs, is_causal=bool(causal))
        fa2, cud = peer_ms(sd, SDPBackend.FLASH_ATTENTION), peer_ms(sd, SDPBackend.CUDNN_ATTENTION)
        flops = 4 * B * H * Sq * Sq * D / (2 if causal else 1)
        row(name, f"B{B} H{H} d{D} bf16 page16", err, ms, fa2, cud, lambda t: flops / t / 1e9, "TFLOP/s")
        if args.source:
            open(os.path.join(args.source, f"prefill{'_causal' if causal else ''}.cu"), "w").write(k.source())
        del cache, q, out, qs, ks, vs, ref


# ---- 3. decode and verify ---------------------------------------------------------------------------
def decode_case(name, B, ctx, qn, mode, H=32, Hkv=8, D=128, S=16, tree=False):
    if not want(name):
        return None
    cache, q, cu, out = setup([qn] * B, [ctx] * B, H, Hkv, D, S)
    n = 1 if tree else n_splits_for(B, Hkv, H // Hkv, qn, ctx)
    trees = random_trees([qn] * B) if tree else None
    k = build(mode, H, Hkv, D, S, 1, tree=tree) if n == 1 else Split(mode, H, Hkv, D, S, n, B * qn)
    qf = q.view(q.shape[0], -1)
    if tree:
        tm = trees.to(dev)
        k0 = k
        k = lambda *a: k0(*a, tm)  # noqa: E731  (tree_mask follows max_q)
        k.source = k0.source
    run = (lambda: launch(k, qf, cache, cu, out, qn)) if n == 1 else (lambda: k(qf, cache, cu, out, qn))
    run()
    torch.cuda.synchronize()
    ref = reference(q, cache, [qn] * B, H, 1, 0, 1.0 / math.sqrt(D), trees) if B * qn <= 4096 else None
    err = kb.rel_l2(out, ref) if ref is not None else float("nan")
    ms = kb.median_ms(lambda i: run(), 1, RUNS)
    qs = q.view(B, qn, H, D).transpose(1, 2)
    ks = torch.stack(cache.keys).transpose(1, 2)
    vs = torch.stack(cache.vals).transpose(1, 2)
    # the peers see contiguous K/V (no paging); causal with q at the end of the context = bottom-right
    mask = None
    if qn > 1:
        mask = torch.ones(qn, ctx, dtype=torch.bool, device=dev).tril(ctx - qn)
    sd = lambda: F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, enable_gqa=True)
    fa2, cud = peer_ms(sd, SDPBackend.FLASH_ATTENTION), peer_ms(sd, SDPBackend.CUDNN_ATTENTION)
    if qn > 1 and fa2 is None:
        fa2 = peer_ms(sd, SDPBackend.EFFICIENT_ATTENTION)
    kvbytes = B * ctx * Hkv * D * 2 * 2
    r = row(name, f"B{B} ctx{ctx} q{qn} H{H}/{Hkv} d{D} pg{S} split{n}", err, ms, fa2, cud,
            lambda t: kvbytes / t / 1e9, "TB/s KV")
    if args.source:
        open(os.path.join(args.source, f"{mode}.cu"), "w").write(k.source())
    del cache, q, out, qs, ks, vs
    return r


decode_case("decode B64x4096", 64, 4096, 1, "decode")
decode_case("decode B1x32768", 1, 32768, 1, "decode")
d32 = decode_case("decode B32x4096", 32, 4096, 1, "decode")
for kk in (4, 8):
    v = decode_case(f"verify k{kk} B32x4096", 32, 4096, kk + 1, "verify")
    if v and d32:
        print(f"  verify k{kk} / decode step: {v['ms'] / d32['ms']:.2f}x (target <= 1.5x)")
        v["vs_decode"] = v["ms"] / d32["ms"]
    v = decode_case(f"verify-tree k{kk} B32x4096", 32, 4096, kk + 1, "verify", tree=True)
    if v and d32:
        print(f"  verify-tree k{kk} / decode step: {v['ms'] / d32['ms']:.2f}x (target <= 1.5x)")
        v["vs_decode"] = v["ms"] / d32["ms"]

# ---- table ------------------------------------------------------------------------------------------
print()
print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  runs/median {RUNS}")
print(f"{'case':22s} {'shape':34s} {'ok':3s} {'kiln us':>9s} {'kiln':>8s} {'FA2':>8s} {'cuDNN':>8s} unit")
for r in results:
    if "ms" not in r:
        print(f"{r['case']:22s} {r['shape']:34s} {'ok' if r['ok'] else 'BAD'}")
        continue
    f = lambda x: f"{x:8.1f}" if x else "     n/a"
    print(f"{r['case']:22s} {r['shape']:34s} {'ok' if r['ok'] else 'BAD':3s} {r['ms'] * 1e3:9.1f} "
          f"{f(r['kiln'])} {f(r['fa2'])} {f(r['cudnn'])} {r['unit']}"
          + (f"  ({r['vs_decode']:.2f}x decode)" if "vs_decode" in r else ""))
if args.json:
    with open(args.json, "w") as fh:
        json.dump(dict(gpu=torch.cuda.get_device_name(), results=results), fh, indent=1)
sys.exit(0 if all(r["ok"] for r in results if r.get("err", 0) == r.get("err", 0)) else 1)
