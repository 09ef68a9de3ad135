#!/usr/bin/env python3
"""Whole-model check and decode speed on the GPU machine: a random-weight HF LlamaForCausalLM of a
recipe config's shape, saved as safetensors, run by kiln (libkiln through ctypes, and `kiln run`) and
by HF transformers in the same process.

  python3 bench/e2e_llama.py --kiln build-gpu/kiln --lib build-gpu/libkiln.so \
      --package scratch/pkg/llama-3.2-1b.kiln --config llama-3.2-1b [--layers N] [--batches 1,32]

The package is compiled beforehand (on the build machine) with
  kiln compile recipes/llama.lua --model CONFIG [--set n_layers=N] --target sm_90a -o PACKAGE
Checks: teacher-forced logits of 128 random tokens (--score-tokens) against HF in f32 (relative L2 over all logits, bf16
target < 2e-2; HF's own bf16 error printed beside it), HF's default init. Times: batch-B
decode tokens/s of kiln (`kiln run -v`) and of HF generate (eager, greedy, static length).
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

CONFIGS = {  # the recipe's configs (recipes/llama.lua), in HF's terms
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                         num_key_value_heads=8, head_dim=64, vocab_size=128256, rms_norm_eps=1e-5,
                         rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
                         rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0, original_max_position_embeddings=8192)),
    "llama-3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, head_dim=128, vocab_size=128256, rms_norm_eps=1e-5,
                       rope_theta=500000.0, max_position_embeddings=8192, tie_word_embeddings=False),
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, head_dim=64, vocab_size=49152, rms_norm_eps=1e-5,
                         rope_theta=100000.0, max_position_embeddings=8192, tie_word_embeddings=True),
}


class Opts(ctypes.Structure):  # KilnEngineOptions (runtime/kiln.h): keep in step with it
    _fields_ = [("size", ctypes.c_int), ("device", ctypes.c_int), ("kv_cache_bytes", ctypes.c_int64), ("max_seqs", ctypes.c_int),
                ("max_step_tokens", ctypes.c_int), ("no_cuda_graphs", ctypes.c_int),
                ("no_prefix_sharing", ctypes.c_int), ("profile", ctypes.c_int), ("host_threads", ctypes.c_int),
                ("log", ctypes.c_void_p),
                ("log_user", ctypes.c_void_p)]


def exact_rope(model):
    """Recomputes the rotary inv_freq buffers in f32: model.to(bfloat16) rounds them to bf16 too (HF keeps
    them as ordinary buffers), which moves every angle by up to 2^-9 of itself per position, a reference
    error that grows with position (3e-2 relative on q at position 100) and is not the model's math."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    n = 0
    for mod in model.modules():
        inv = getattr(mod, "inv_freq", None)
        if not isinstance(inv, torch.Tensor):
            continue
        fn = getattr(mod, "rope_init_fn", None)
        if fn is None:
            kind = getattr(mod, "rope_type", "default")
            fn = mod.compute_default_rope_parameters if kind == "default" else ROPE_INIT_FUNCTIONS[kind]
        exact, _ = fn(mod.config, inv.device)
        mod.inv_freq = exact.float()
        n += 1
    assert n, "no rotary embedding found to restore"
    return model


def kiln_logits(lib, package, weights, tokens):
    lib.kiln_engine_errmsg.restype = ctypes.c_char_p
    o = Opts()
    lib.kiln_engine_options_init(ctypes.byref(o))
    o.kv_cache_bytes = 4 << 30
    e = ctypes.c_void_p()
    err = ctypes.create_string_buffer(512)
    t0 = time.time()
    if lib.kiln_engine_open(package.encode(), weights.encode(), ctypes.byref(o), ctypes.byref(e), err, 512):
        raise RuntimeError(err.value.decode())
    t_open = time.time() - t0
    V = lib.kiln_engine_vocab(e)
    arr = (ctypes.c_int32 * len(tokens))(*tokens)
    out = torch.empty((len(tokens), V), dtype=torch.float32)
    if lib.kiln_engine_score(e, arr, len(tokens), ctypes.c_void_p(out.data_ptr())):
        raise RuntimeError(lib.kiln_engine_errmsg(e).decode())
    lib.kiln_engine_close(e)
    return out, t_open


def kiln_decode(kiln, package, weights, batch, prompt_len, new_tokens, vocab, extra=()):
    g = torch.Generator().manual_seed(batch)
    cmd = [kiln, "run", package, "--weights", weights, "--max-tokens", str(new_tokens), "--ignore-eos",
           "--print-ids", "-v", "--kv-cache-mb", "16384", *extra]
    for _ in range(batch):
        ids = torch.randint(0, vocab, (prompt_len,), generator=g).tolist()
        cmd += ["--prompt-ids", " ".join(map(str, ids))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-2000:])
    m = re.search(r"\(([0-9.]+) tok/s after the first\)", r.stderr)
    open_s = re.search(r"open ([0-9.]+) s", r.stderr)
    first = re.search(r"first token after ([0-9.]+) s", r.stderr)
    return float(m.group(1)), float(open_s.group(1)), float(first.group(1)), r.stderr, r.stdout


def hf_decode(model, batch, prompt_len, new_tokens, vocab):
    ids = torch.randint(0, vocab, (batch, prompt_len), device="cuda")
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    model.generate(ids, **dict(kw, max_new_tokens=4, min_new_tokens=4))  # warm-up
    torch.cuda.synchronize()
    t0 = time.time()
    model.generate(ids, **kw)
    torch.cuda.synchronize()
    return batch * new_tokens / (time.time() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--package", required=True)
    ap.add_argument("--config", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/kiln-e2e")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--score-tokens", type=int, default=128,
                    help="rows of the teacher-forced check (one step: its matmuls run at this M)")
    ap.add_argument("--json", default="")
    ap.add_argument("--f32-package", default="")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    res = {"config": a.config}
    cfg = dict(CONFIGS[a.config])
    if a.layers:
        cfg["num_hidden_layers"] = a.layers
    torch.manual_seed(0)
    # a true f32 reference: no TF32 in matmuls, and eager attention (SDPA's f32 kernels may use TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    hf_cfg = LlamaConfig(**cfg, attention_bias=False, mlp_bias=False, attn_implementation="eager")
    with torch.device("cuda"):
        model = LlamaForCausalLM(hf_cfg).float().eval()  # HF's init (normal, std 0.02)
    V = cfg["vocab_size"]
    tokens = torch.randint(0, V, (a.score_tokens,)).tolist()
    with torch.no_grad():  # the reference: f32; HF in bf16 beside it shows what bf16 alone costs
        ref = model(torch.tensor([tokens], device="cuda")).logits[0].double().cpu()
        model = exact_rope(model.to(torch.bfloat16))
        ref_bf16 = model(torch.tensor([tokens], device="cuda")).logits[0].double().cpu()
    wdir = os.path.join(a.workdir, a.config)
    os.makedirs(wdir, exist_ok=True)
    t0 = time.time()
    model.save_pretrained(wdir, safe_serialization=True)
    res["save_s"] = time.time() - t0

    lib = ctypes.CDLL(a.lib)
    got, t_open = kiln_logits(lib, a.package, wdir, tokens)
    got = got.double()
    rel = ((got - ref).norm() / ref.norm()).item()
    rel_hf = ((ref_bf16 - ref).norm() / ref.norm()).item()
    agree = (got.argmax(-1) == ref.argmax(-1)).float().mean().item()
    agree_hf = (ref_bf16.argmax(-1) == ref.argmax(-1)).float().mean().item()
    res.update(logits_rel_l2=rel, hf_bf16_rel_l2=rel_hf, argmax_agree=agree, hf_bf16_argmax_agree=agree_hf,
               open_s=t_open, finite=bool(torch.isfinite(got).all()))
    print(f"logits vs HF f32 ({a.score_tokens} tokens): kiln bf16 rel L2 {rel:.2e} (target < 2e-2), HF bf16 {rel_hf:.2e}; "
          f"argmax agreement kiln {agree:.3f}, HF bf16 {agree_hf:.3f}; open {t_open:.1f} s", flush=True)

    if a.f32_package:  # f32 end to end: against HF in f32 on the same (bf16-rounded) weights
        with torch.no_grad():
            ref32 = exact_rope(model.float())(torch.tensor([tokens], device="cuda")).logits[0].double().cpu()
            # greedy tokens, f32 package vs HF f32: kiln_decode's batch-1 prompt (its generator's seed is 1)
            prompt = torch.randint(0, V, (16,), generator=torch.Generator().manual_seed(1)).tolist()
            hf_ids = model.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=32, min_new_tokens=32,
                                    do_sample=False, pad_token_id=0)[0, 16:].tolist()
            model = exact_rope(model.to(torch.bfloat16))
        *_, out = kiln_decode(a.kiln, a.f32_package, wdir, 1, 16, 32, V)
        k_ids = [int(x) for x in out.split()]
        same = next((i for i, (x, y) in enumerate(zip(k_ids, hf_ids)) if x != y), min(len(k_ids), len(hf_ids)))
        res["f32_greedy_tokens_agree"] = same
        print(f"greedy, f32 package vs HF f32 generate: {same} of {len(hf_ids)} tokens agree", flush=True)
        got32, _ = kiln_logits(lib, a.f32_package, wdir, tokens)
        rel32 = ((got32.double() - ref32).norm() / ref32.norm()).item()
        rel_same = ((got - ref32).norm() / ref32.norm()).item()
        res.update(f32_logits_rel_l2=rel32, bf16_vs_same_weights_f32_rel_l2=rel_same)
        print(f"vs HF f32 on the same (bf16) weights: kiln f32 package rel L2 {rel32:.2e} (target < 2e-2), "
              f"kiln bf16 package {rel_same:.2e}", flush=True)

    for b in [int(x) for x in a.batches.split(",") if x]:
        k_tps, k_open, k_first, log, ids = kiln_decode(a.kiln, a.package, wdir, b, 16, a.new_tokens, V)
        n_tps, _, _, _, ids_n = kiln_decode(a.kiln, a.package, wdir, b, 16, a.new_tokens, V, ["--no-cuda-graphs"])
        h_tps = hf_decode(model, b, 16, a.new_tokens, V)
        graphs = "captured" in log
        res[f"decode_b{b}"] = dict(kiln_tok_s=k_tps, kiln_no_graphs_tok_s=n_tps, hf_tok_s=h_tps, open_s=k_open,
                                   first_token_s=k_first, graphs=graphs, graph_tokens_identical=ids == ids_n)
        print(f"decode batch {b}: kiln {k_tps:.1f} tok/s (graphs {'on' if graphs else 'OFF'}; without "
              f"{n_tps:.1f}; tokens identical: {ids == ids_n}), HF eager {h_tps:.1f} tok/s "
              f"({k_tps / h_tps:.1f}x); kiln open {k_open:.1f} s, first token {k_first:.3f} s", flush=True)
        if "CUDA graphs off" in log:
            print("  " + [x for x in log.splitlines() if "CUDA graphs off" in x][0])
    if a.profile:
        *_, log, _ = kiln_decode(a.kiln, a.package, wdir, 1, 16, 32, V, ["--profile"])
        print("\n".join(x for x in log.splitlines() if "%" in x or "profile" in x), flush=True)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
    ok = res["finite"] and (res["f32_logits_rel_l2"] < 2e-2 if a.f32_package else rel < 2e-2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
