# fp8_checkpoint.py PACKAGE OUT.safetensors [nan-code|nan-scale|inf-scale]: an FP8 (F8_E4M3 + F32 per-channel
# weight_scale) checkpoint for every weight of PACKAGE; bf16 for the others. Pure Python.
import json, math, random, sqlite3, struct, sys
pkg, out, mode = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "")
random.seed(7); hdr = {}; blob = bytearray()
def add(name, dt, shape, data):
    hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}; blob.extend(data)
for name, dtype, shape in sqlite3.connect(pkg).execute("SELECT name, dtype, shape FROM weights ORDER BY name"):
    dims = [int(x) for x in shape.strip("[]").split(",")]
    victim = name == "model.layers.0.self_attn.q_proj.weight"
    if dtype.startswith("f8g"):
        N, K = dims
        codes = bytearray(random.randrange(0x20, 0x40) | random.choice((0, 0x80)) for _ in range(N * K))
        if victim and mode == "nan-code": codes[5] = 0x7F              # e4m3fn NaN
        scale = [0.01] * N
        if victim and mode == "nan-scale": scale[7] = float("nan")
        if victim and mode == "inf-scale": scale[7] = float("inf")
        add(name, "F8_E4M3", dims, bytes(codes)); add(name + "_scale", "F32", [N], struct.pack("<%df" % N, *scale))
    else:
        n = math.prod(dims); vals = [(1.0 if "norm" in name else 0.0) + random.gauss(0, 0.08) for _ in range(n)]
        add(name, "BF16", dims, b"".join(struct.pack("<f", v)[2:] for v in vals))
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + bytes(blob))
