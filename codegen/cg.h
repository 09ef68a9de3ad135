/* cg.h — code generation: backends turn a kernel (kernel IR + config) into a binary for a target.
 * Prefix cg_. Backends are vtables (one file each), registered in cg.c's table; core code has no
 * backend #ifdefs. A backend that this build lacks (no NVRTC, no LLVM) is simply not registered.
 *
 *     const CgBackend *be = cg_backend_for(cg_target_find("sm_90a"), NULL);
 *     CgBinary bin;
 *     if (be->compile(k, target, &bin, &d) != IR_OK) ...;   // d: "kernel X: nvrtc: <log line>"
 *     ... bin.data / bin.size ...;  cg_binary_free(&bin);
 */
#ifndef KILN_CG_H
#define KILN_CG_H

#include <stddef.h>

#include "cg_target.h"
#include "ir/kir.h"

/* A compiled kernel. `format`: "cuda-c" (generated source), "ptx", "cubin", "amdgpu-elf" (relocatable),
 * "hsaco" (linked code object), "host-obj" (ELF relocatable object), "host-so" (ELF shared object:
 * target host), "llvm-ir" (text). */
typedef struct CgBinary {
    const char *format;
    void *data; /* malloc'd; owned by the binary */
    size_t size;
    char *entry;    /* malloc'd symbol name of the kernel entry */
    double compile_ms;
    /* Launch geometry, set by the backend that made the binary (the runtime cannot recompute it): threads
     * per block (the CUDA backend: 32 x warps; the LLVM lowerings run a program on one thread: 1) and
     * dynamic shared memory per block in bytes (0 for host and LLVM GPU code). */
    int threads, smem;
} CgBinary;
void cg_binary_free(CgBinary *b);
/* A malloc'd copy of s (NULL when out of memory), for CgBinary.entry. */
char *cg_strdup(const char *s);

typedef struct CgBackend {
    const char *name; /* "cuda" (CUDA C -> NVRTC), "llvm" (LLVM C API) */
    int (*supports)(const CgTarget *t);
    /* Compiles k for t. Returns IR_OK and fills out (each of its buffers malloc'd), or a status with one
     * line in d. IR_ERR_LIMIT / IR_ERR_UNSUPPORTED mean the config cannot run on t (INVALID). Thread-safe:
     * kiln compiles kernels in parallel. */
    IrStatus (*compile)(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d);
    /* The code compile hands its toolchain, as text: format "cuda-c" (the generated CUDA C) or "llvm-ir"
     * (the module before optimization). Deterministic for (k, t) and cheap (no NVRTC, no LLVM passes):
     * the golden kernel corpus hashes it (tests/cli/corpus.sh) and a review diffs it. Same errors as
     * compile, except the limits only the toolchain finds (registers). Thread-safe. */
    IrStatus (*source)(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d);
} CgBackend;

/* The backend for target t: `prefer` names one ("cuda" or "llvm") or is NULL for the default (cuda for
 * NVIDIA targets when NVRTC is built in, else llvm). NULL when none in this build serves t. */
const CgBackend *cg_backend_for(const CgTarget *t, const char *prefer);

#endif
