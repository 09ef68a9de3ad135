#!/usr/bin/env python3
"""compare_dumps.py — compares two KILN_DUMP_DIR runs of one package (e.g. the host executor and the GPU)
launch by launch: every file present in both, in launch order, with its relative L2 difference; the first
one above the tolerance is where the two devices part.

  KILN_DUMP_DIR=/tmp/d_host kiln run PKG --weights W --prompt-ids "1 2 3" --max-tokens 1 --device host
  KILN_DUMP_DIR=/tmp/d_gpu  kiln run PKG --weights W --prompt-ids "1 2 3" --max-tokens 1 --device 0
  python3 bench/compare_dumps.py /tmp/d_host /tmp/d_gpu [--tol 1e-4]

(the package compiled for both targets: kiln compile ... --target sm_90a,host). Needs numpy.
"""
import argparse
import os
import re

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("a")
p.add_argument("b")
p.add_argument("--tol", type=float, default=1e-4)
p.add_argument("--all", action="store_true", help="print every file, not only up to the first mismatch")
args = p.parse_args()

NAME = re.compile(r"s(\d+)_l(\d+)_a(\d+)_(.+)_([a-z0-9]+)\.bin$")


def load(path, dtype):
    raw = np.fromfile(path, dtype=np.uint8)
    if dtype == "bf16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    np_dt = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u8": np.uint8, "i8": np.int8}[dtype]
    return raw.view(np_dt).astype(np.float64)


files = []
for f in os.listdir(args.a):
    m = NAME.match(f)
    if m and os.path.exists(os.path.join(args.b, f)):
        files.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), f, m.group(5)))
files.sort()
if not files:
    raise SystemExit("no dump file in both directories")
for step, launch, arg, f, dtype in files:
    x, y = load(os.path.join(args.a, f), dtype), load(os.path.join(args.b, f), dtype)
    if x.shape != y.shape:
        print(f"{f}: sizes differ ({x.size} vs {y.size})")
        break
    den = max(np.linalg.norm(x), 1e-30)
    rel = np.linalg.norm(x - y) / den if np.isfinite(x).all() and np.isfinite(y).all() else float("inf")
    bad = rel > args.tol
    if bad or args.all:
        print(f"step {step} launch {launch} arg {arg}: rel L2 {rel:.3e}{'  <-- first above tolerance' if bad else ''}  {f}")
    if bad and not args.all:
        break
else:
    print(f"{len(files)} dumps agree within {args.tol}")
