/* krun_host.c — the host executor for sweep tests: the LLVM backend's host code, JIT-compiled into this
 * process (codegen/llvm/cg_host.h). Buffers are used in place (the executor's memory is host memory).
 * A run compiles the kernel (~10 ms to 2 s) unless one of the last 256 kernels compiled was the same (its
 * printed IR, params and config): sweeps launch a kernel twice (a determinism check, the epilogue-none
 * twins of a pair, one rope kernel beside every page size) and the JIT is most of their time. A build
 * without LLVM reports the executor unavailable.
 * With KILN_LLVM_GPU_CASES=<dir> each run is also written as a GPU replay case (kcase.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm/cg_host.h"
#include "ir/kir_interp.h"
#include "kcase.h"
#include "krun.h"

static int host_available(char *why, size_t n)
{
    if (cg_host_jit_available()) return 1;
    snprintf(why, n, "this build has no LLVM (KILN_WITH_LLVM=OFF or LLVM 22.1 not found)");
    return 0;
}

/* The last JIT_KEEP kernels compiled, most recent first (well under 1 MB each); key: kernel_key's text
 * (malloc'd). Kept until the process ends. */
enum { JIT_KEEP = 256 };
static struct {
    char *key;
    CgHostKernel *hk;
} jit[JIT_KEEP];

static char *kernel_key(const KirKernel *k)
{
    IrBuf b = {0};
    kir_print(k, &b);
    ir_buf_printf(&b, "\nparams ");
    kir_params_print(k, &b);
    ir_buf_printf(&b, "\nmin_blocks %d\n", k->min_blocks);
    if (b.oom || !b.s) {
        ir_buf_free(&b);
        return NULL;
    }
    return b.s; /* the buffer's text, owned by the caller */
}

/* k's JIT code from the cache or compiled into it (then the oldest entry is freed). */
static IrStatus host_jit(const KirKernel *k, CgHostKernel **out, IrDiag *d)
{
    char *key = kernel_key(k);
    for (int i = 0; key && i < JIT_KEEP; i++)
        if (jit[i].key && !strcmp(jit[i].key, key)) {
            free(key);
            *out = jit[i].hk;
            return IR_OK;
        }
    IrStatus s = cg_host_jit(k, out, d);
    if (s != IR_OK || !key) {
        free(key);
        return s;
    }
    free(jit[JIT_KEEP - 1].key);
    cg_host_free(jit[JIT_KEEP - 1].hk);
    memmove(&jit[1], &jit[0], sizeof jit[0] * (JIT_KEEP - 1));
    jit[0].key = key;
    jit[0].hk = *out;
    return IR_OK;
}

static IrStatus host_run(const KirKernel *k, KRunArg *a, IrDiag *d)
{
    void *ptrs[KIR_MAX_PARAMS], *args[KIR_MAX_PARAMS];
    int64_t storage[KIR_MAX_PARAMS];
    int32_t grid[3];
    for (int i = 0; i < k->n_params; i++)
        ptrs[i] = a[i].data;
    krun_pack_args(k, a, ptrs, args, storage);
    kir_grid_eval(k, args, grid);
    CgHostKernel *hk;
    IrStatus s = host_jit(k, &hk, d);
    if (s != IR_OK) return s;
    void *inputs[KIR_MAX_PARAMS] = {0};
    int record = kcase_dir() != NULL;
    for (int i = 0; record && i < k->n_params; i++)
        if (k->params[i].type.is_ptr && (inputs[i] = malloc(a[i].bytes + 1)) != NULL)
            memcpy(inputs[i], a[i].data, a[i].bytes);
    cg_host_call(hk, args, grid);
    if (record) kcase_write(k, a, inputs, storage, grid, 1e-2); /* sweeps: the GPU's libm-free math */
    for (int i = 0; i < k->n_params; i++)
        free(inputs[i]);
    return IR_OK;
}

const KRunner krun_host = {"host", host_available, host_run};
