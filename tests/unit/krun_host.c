/* krun_host.c — the host executor for sweep tests: the LLVM backend's host code, JIT-compiled into this
 * process (codegen/llvm/cg_host.h). Buffers are used in place (the executor's memory is host memory).
 * Each run compiles the kernel afresh (~10-50 ms); a build without LLVM reports the executor unavailable.
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
    IrStatus s = cg_host_jit(k, &hk, d);
    if (s != IR_OK) return s;
    void *inputs[KIR_MAX_PARAMS] = {0};
    int record = kcase_dir() != NULL;
    for (int i = 0; record && i < k->n_params; i++)
        if (k->params[i].type.is_ptr && (inputs[i] = malloc(a[i].bytes + 1)) != NULL)
            memcpy(inputs[i], a[i].data, a[i].bytes);
    cg_host_call(hk, args, grid);
    cg_host_free(hk);
    if (record) kcase_write(k, a, inputs, storage, grid, 1e-2); /* sweeps: the GPU's libm-free math */
    for (int i = 0; i < k->n_params; i++)
        free(inputs[i]);
    return IR_OK;
}

const KRunner krun_host = {"host", host_available, host_run};
