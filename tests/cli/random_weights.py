#!/usr/bin/env python3
"""random_weights.py PACKAGE OUT.safetensors: random bf16 weights for every weight a kiln package names
(norms near 1, the rest near 0; seed 7), so the CLI tests can run a tiny model without a checkpoint."""
import json, random, sqlite3, struct, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT name, shape FROM weights ORDER BY name").fetchall()
random.seed(7); header = {}; blob = b""
for name, shape in rows:
    dims = [int(x) for x in shape.strip("[]").split(",")]; n = 1
    for x in dims: n *= x
    vals = [(1.0 if "norm" in name else 0.0) + random.gauss(0, 0.08) for _ in range(n)]
    data = b"".join(struct.pack("<f", v)[2:] for v in vals)
    header[name] = {"dtype": "BF16", "shape": dims, "data_offsets": [len(blob), len(blob) + len(data)]}; blob += data
h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + blob)
