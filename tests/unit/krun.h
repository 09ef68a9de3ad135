/* krun.h — run a kernel on one executor with host buffers: how the sweep tests check every backend
 * against the same C reference. Executors: the IR interpreter, the host backend (LLVM JIT) and the CUDA
 * backend on a GPU; an executor that is not usable here says why and its tests skip. */
#ifndef KILN_KRUN_H
#define KILN_KRUN_H

#include <stddef.h>
#include <stdint.h>

#include "ir/base.h"
#include "ir/kir.h"

/* One kernel argument, in param order. Buffer params: data/bytes (host memory, copied to the executor's
 * memory before the run and back after it, for every buffer). Scalar params: i (integers) or f (f32). */
typedef struct KRunArg {
    void *data;
    size_t bytes;
    int64_t i;
    double f;
} KRunArg;

typedef struct KRunner {
    const char *name; /* "interp", "host", "cuda" */
    /* 1 when usable in this process; else 0 with a one-line reason in why. */
    int (*available)(char *why, size_t n);
    /* Runs k over its grid (evaluated from the scalar args). */
    IrStatus (*run)(const KirKernel *k, KRunArg *args, IrDiag *d);
} KRunner;

extern const KRunner krun_interp; /* krun_interp.c */
extern const KRunner krun_host;   /* krun_host.c: codegen/llvm host JIT */
extern const KRunner krun_cuda;   /* krun_cuda.c: codegen/cuda + runtime device layer */

/* Whether krun_host compiles kernel k with LLVM's optimizer (1, the default for any kernel: the code a
 * package ships) or without it (0: cg_host_object_unoptimized). The sweeps mark each kernel they build
 * (ksweep.h's tiers); the mark follows the pointer until another kernel is marked at the same address. */
void krun_host_optimize(const KirKernel *k, int optimize);

/* The cache option for a `kiln compile` a test runs: "--cache-dir '<KILN_TEST_JIT_CACHE>/compile-<hash of
 * the code generator's sources>'" (so both builds share the binaries, and a changed backend never meets
 * an old entry), or "--no-cache" without KILN_TEST_JIT_CACHE. Into buf (n bytes); returns buf. */
const char *krun_compile_cache_flag(char *buf, size_t n);

/* Builds the CUDA-convention argument array (args[i] points to param i's value) for k from a: pointer
 * params get ptrs[i] (the executor's copy of the buffer); scalars are converted to the param's dtype
 * into storage. */
void krun_pack_args(const KirKernel *k, const KRunArg *a, void *const *ptrs, void **args, int64_t *storage);

#endif
