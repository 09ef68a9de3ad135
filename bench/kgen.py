#!/usr/bin/env python3
"""kgen.py — print one kernel's IR or generated CUDA C, no GPU needed.

Usage: python3 bench/kgen.py [--ir] [--target sm_90a] LIB FAMILY "SPEC" ["CONFIG"]
e.g.   python3 bench/kgen.py build/bench/libkbench.so rmsnorm "C=4096 eps=1e-5 dtype=bf16" "ROWS=2"
"""
import argparse
import ctypes

p = argparse.ArgumentParser()
p.add_argument("--ir", action="store_true")
p.add_argument("--compile", action="store_true", help="NVRTC too: ptxas's register/spill report follows the source")
p.add_argument("--target", default="sm_90a")
p.add_argument("lib")
p.add_argument("family")
p.add_argument("spec")
p.add_argument("config", nargs="?", default="")
a = p.parse_args()
lib = ctypes.CDLL(a.lib)
lib.kb_gen.restype = ctypes.c_void_p
lib.kb_gen.argtypes = [ctypes.c_char_p] * 4 + [ctypes.c_int]
r = lib.kb_gen(a.family.encode(), a.spec.encode(), a.config.encode(), a.target.encode(), 0 if a.ir else 2 if a.compile else 1)
print(ctypes.string_at(r).decode() if r else "out of memory")
