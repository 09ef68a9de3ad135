#!/usr/bin/env python3
"""make_seeds.py CORPUS_DIR: writes the hand-made seeds of the weight-file fuzz targets (small, valid
files that reach deep into the readers): GGUF v3 and v2 files with llama metadata, a tokenizer and one
tensor of every type kiln reads; safetensors files of every float dtype and rank. The package and
tuning-store seeds come from kiln itself (tests/fuzz/make_seeds.sh). Deterministic (seed 1)."""
import json, os, random, struct, sys

out = sys.argv[1]
rng = random.Random(1)

def gg_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b

def gg_kv(key, typ, val):
    b = gg_str(key) + struct.pack("<I", typ)
    if typ == 4: b += struct.pack("<I", val)
    elif typ == 5: b += struct.pack("<i", val)
    elif typ == 6: b += struct.pack("<f", val)
    elif typ == 7: b += struct.pack("<B", val)
    elif typ == 8: b += gg_str(val)
    elif typ == 9:
        elem, items = val
        b += struct.pack("<IQ", elem, len(items))
        for it in items:
            b += gg_str(it) if elem == 8 else struct.pack("<i" if elem == 5 else "<f", it)
    return b

# (name, ggml type, ne, bytes per block, elements per block)
TYPES = {"F32": (0, 4, 1), "F16": (1, 2, 1), "Q4_0": (2, 18, 32), "Q4_1": (3, 20, 32), "Q8_0": (8, 34, 32),
         "Q4_K": (12, 144, 256), "Q6_K": (14, 210, 256), "BF16": (30, 2, 1)}

def block_bytes(tname, n):
    t, size, blk = TYPES[tname]
    data = bytearray(rng.getrandbits(8) for _ in range(n // blk * size))
    if tname in ("Q4_0", "Q4_1", "Q8_0"):  # keep the f16 scales small and finite
        for i in range(0, len(data), size):
            data[i:i + 2] = struct.pack("<e", rng.uniform(-0.1, 0.1))
            if tname == "Q4_1": data[i + 2:i + 4] = struct.pack("<e", rng.uniform(-0.1, 0.1))
    if tname == "F32": data = b"".join(struct.pack("<f", rng.gauss(0, 1)) for _ in range(n))
    if tname == "F16": data = b"".join(struct.pack("<e", rng.gauss(0, 1)) for _ in range(n))
    if tname == "BF16": data = b"".join(struct.pack("<f", rng.gauss(0, 1))[2:] for _ in range(n))
    return bytes(data)

def byte_alphabet():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256 + n); n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]

def gguf(version, tensors, tokenizer=True, align=32):
    kvs = [gg_kv("general.architecture", 8, "llama"), gg_kv("general.alignment", 4, align),
           gg_kv("llama.block_count", 4, 1), gg_kv("llama.embedding_length", 4, 64),
           gg_kv("llama.attention.head_count", 4, 4), gg_kv("llama.attention.head_count_kv", 4, 2),
           gg_kv("llama.rope.freq_base", 6, 10000.0), gg_kv("llama.context_length", 4, 128),
           gg_kv("llama.attention.layer_norm_rms_epsilon", 6, 1e-5)]
    if tokenizer:
        toks = byte_alphabet() + ["he", "ll", "hell", "\u0120t", "<|im_start|>", "<|im_end|>"]
        types = [1] * 260 + [3, 3]
        kvs += [gg_kv("tokenizer.ggml.model", 8, "gpt2"), gg_kv("tokenizer.ggml.pre", 8, "smollm"),
                gg_kv("tokenizer.ggml.tokens", 9, (8, toks)), gg_kv("tokenizer.ggml.token_type", 9, (5, types)),
                gg_kv("tokenizer.ggml.merges", 9, (8, ["h e", "l l", "he ll", "\u0120 t"])),
                gg_kv("tokenizer.ggml.bos_token_id", 4, 260), gg_kv("tokenizer.ggml.eos_token_id", 4, 261)]
    infos, blob = b"", b""
    for name, tname, ne in tensors:
        n = 1
        for x in ne: n *= x
        blob += b"\0" * (-len(blob) % align)
        infos += gg_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", TYPES[tname][0], len(blob))
        blob += block_bytes(tname, n)
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * (-len(head) % align)
    return head + blob

def write(sub, name, data):
    os.makedirs(os.path.join(out, sub), exist_ok=True)
    with open(os.path.join(out, sub, name), "wb") as f: f.write(data)

every = [("token_embd.weight", "Q4_0", [64, 8]), ("blk.0.attn_q.weight", "Q8_0", [64, 64]),
         ("blk.0.attn_k.weight", "Q4_1", [64, 32]), ("blk.0.ffn_down.weight", "Q4_K", [256, 2]),
         ("blk.0.ffn_up.weight", "Q6_K", [256, 2]), ("blk.0.attn_norm.weight", "F32", [64]),
         ("output_norm.weight", "F16", [64]), ("output.weight", "BF16", [64, 8])]
write("gguf", "llama_v3_every_type.gguf", gguf(3, every))
write("gguf", "llama_v2_f32.gguf", gguf(2, [("blk.0.attn_norm.weight", "F32", [64])], align=64))
write("gguf", "tokenizer_only.gguf", gguf(3, []))
write("gguf", "empty_v3.gguf", gguf(3, [], tokenizer=False))
# a fuzz finding (UBSan, rt_w_read): an empty tensor whose row claims 2^61 elements
write("gguf", "zero_dim_huge_row.gguf", gguf(3, [("blk.0.attn_norm.weight", "F32", [2522015791327477759, 0])]))

def safetensors(tensors, meta=None):
    header, blob = {}, b""
    if meta: header["__metadata__"] = meta
    for name, dt, shape in tensors:
        n = 1
        for x in shape: n *= x
        data = block_bytes({"F32": "F32", "F16": "F16", "BF16": "BF16"}[dt], n)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob

write("safetensors", "floats.safetensors", safetensors(
    [("model.embed_tokens.weight", "BF16", [8, 16]), ("model.norm.weight", "F32", [16]),
     ("lm_head.weight", "F16", [8, 16]), ("scalar", "F32", []), ("model.layers.0.x", "F32", [2, 3, 4, 5])],
    meta={"format": "pt"}))
write("safetensors", "one.safetensors", safetensors([("model.norm.weight", "BF16", [4])]))
write("safetensors", "empty.safetensors", safetensors([]))

tok = os.path.join(out, "tokenizer")
for i, text in enumerate([b"\x00Hello world! <|im_start|>user\n12345", b"\x04caf\xc3\xa9 <|im_end|><tool> x",
                          b"\x01 the abc \xe2\x96\x81the\n\n  \t", b"\x06\xff\xfe\x80 broken utf-8 \xf0\x9f\x98",
                          b"\x02I'm 2024's 1234567 'll'VE"]):
    write("tokenizer", "text%d" % i, text)
