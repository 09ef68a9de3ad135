/* kcase.h — GPU replay cases for the LLVM backend's NVPTX code. The build machine has LLVM but no GPU,
 * the GPU machine the reverse: with KILN_LLVM_GPU_CASES=<dir>, test_cg_llvm and the host executor
 * (krun_host.c, so every kernel-family sweep) write each kernel they run as a case — its sm_90a PTX,
 * grid, arguments, inputs and the host JIT's outputs; test_cg_llvm_gpu replays them on a GPU.
 * Prefix kcase_.
 *
 * File format (native endianness): "KLC1", u32 len + entry name, u32 len + PTX, i32 grid[3], f64 tol,
 * u32 n_params, then per param u8 is_ptr, u8 dtype, u64 bytes (pointer) or the 8-byte packed scalar
 * (krun_pack_args), then for each pointer param its input bytes and its expected bytes.
 */
#ifndef KILN_KCASE_H
#define KILN_KCASE_H

#include "krun.h"

/* The case directory (KILN_LLVM_GPU_CASES), or NULL: then kcase_write does nothing. */
const char *kcase_dir(void);

/* Writes k's case: a the arguments (buffers hold the host's outputs), inputs the buffers as they were
 * before the run, storage the packed scalars, tol the relative tolerance for float elements (0: exact).
 * Returns 0 when a case was due but could not be written (message on stderr). Thread-compatible only. */
int kcase_write(const KirKernel *k, const KRunArg *a, void *const *inputs, const int64_t *storage,
                const int32_t grid[3], double tol);

typedef struct KcaseParam {
    uint8_t is_ptr, dtype;
    uint64_t v;            /* bytes (pointer) or the packed scalar */
    void *in, *want, *got; /* malloc'd, v bytes each (pointers) */
} KcaseParam;

typedef struct Kcase {
    char entry[256];
    char *ptx; /* NUL-terminated */
    uint32_t ptx_len;
    int32_t grid[3];
    double tol;
    uint32_t n;
    KcaseParam p[KIR_MAX_PARAMS];
} Kcase;

/* Reads a case file (1) or fails (0); kcase_free releases it either way. */
int kcase_read(const char *path, Kcase *c);
void kcase_free(Kcase *c);

#endif
