"""kb.py — shared by the GPU bench scripts: kiln kernels through libkbench (ctypes), errors and timing.

Kernel(family, spec, config) builds one kernel (kernel IR -> CUDA C -> NVRTC) for the GPU in front of us
and launches it on torch tensors (data_ptr) or scalars (ints; floats passed as f32 bits) on torch's
current stream. rel_l2 compares in float64; median_ms times with CUDA events, rotating input sets.
"""
import ctypes
import math
import sys

import torch

lib = None
L2 = 60 << 20


def init(path):
    global lib
    lib = ctypes.CDLL(path)
    lib.kb_build.restype = ctypes.c_void_p
    lib.kb_build.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.kb_launch.restype = ctypes.c_int
    lib.kb_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int, ctypes.c_uint64,
                              ctypes.c_char_p, ctypes.c_int]
    lib.kb_source.restype = ctypes.c_char_p
    lib.kb_source.argtypes = [ctypes.c_void_p]
    lib.kb_config.restype = ctypes.c_char_p
    lib.kb_config.argtypes = [ctypes.c_void_p]
    lib.kb_init.restype = ctypes.c_int
    lib.kb_init.argtypes = [ctypes.c_char_p, ctypes.c_int]
    err = ctypes.create_string_buffer(1024)
    if lib.kb_init(err, 1024) != 0:
        sys.exit("kb_init: " + err.value.decode())


class Kernel:
    def __init__(self, family, spec, config="", quiet=False):
        e = ctypes.create_string_buffer(2048)
        self.h = lib.kb_build(family.encode(), spec.encode(), config.encode(), e, 2048)
        if not self.h:
            raise RuntimeError(f"kb_build {family} {spec} [{config}]: {e.value.decode()}")
        self.config = lib.kb_config(self.h).decode()
        if not quiet:
            print(f"  {family} {spec}: config {self.config}", flush=True)

    def source(self):
        return lib.kb_source(self.h).decode()

    def __call__(self, *argv):
        vals = []
        for a in argv:
            if isinstance(a, torch.Tensor):
                vals.append(a.data_ptr())
            elif isinstance(a, float):
                vals.append(int.from_bytes(torch.tensor([a], dtype=torch.float32).numpy().tobytes(), "little"))
            else:
                vals.append(int(a) & 0xFFFFFFFFFFFFFFFF)
        arr = (ctypes.c_uint64 * len(vals))(*vals)
        e = ctypes.create_string_buffer(1024)
        if lib.kb_launch(self.h, arr, len(vals), torch.cuda.current_stream().cuda_stream, e, 1024) != 0:
            raise RuntimeError("kb_launch: " + e.value.decode())



def kernels(family, spec, configs):
    """The kernels of family/spec built at each config ("" = the family's default); a config the family or
    the GPU refuses prints its one-line reason and is skipped."""
    for cfg in configs:
        try:
            yield Kernel(family, spec, cfg, quiet=True)
        except RuntimeError as e:
            print(f"  [{cfg}] {str(e)[:160]}")

def rel_l2(out, ref):
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("nan")
    return (torch.linalg.vector_norm(out - ref) / max(torch.linalg.vector_norm(ref).item(), 1e-30)).item()


def median_ms(fn, sets, runs):
    """Times fn(i) rotating over `sets` input sets; CUDA events around each call; returns the median.
    A ~40 us GPU sleep goes before the start event, so the host has queued the call before the GPU
    reaches it: the time is the kernel's, not the host's launch latency (which dominates kernels under
    ~20 us)."""
    for i in range(3):
        fn(i % sets)
    torch.cuda.synchronize()
    times = []
    for r in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(80000)
        s.record()
        fn(r % sets)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def sets_for(nbytes):
    """Input sets to rotate so that the working set is twice the L2."""
    return max(1, min(8, math.ceil(2 * L2 / max(nbytes, 1))))


def splitk_buffers(N):
    """The split-K pair of a ws=1 matmul (ir/kfam.h: KFAM_SPLITK_WS = 8 x 64 x N f32 partial slices,
    KFAM_SPLITK_SEMS = 4 x cdiv(N, 16) i32 tile counters), zero; the kernel leaves the counters zero."""
    return (torch.zeros(8 * 64 * N, device="cuda", dtype=torch.float32),
            torch.zeros(4 * ((N + 15) // 16), device="cuda", dtype=torch.int32))
