/* kir_interp.c — the kernel-IR interpreter. (stub: being written) */
#include "kir_interp.h"

void kir_grid_eval(const KirKernel *k, void *const *args, int32_t grid[3])
{
    (void)k;
    (void)args;
    grid[0] = grid[1] = grid[2] = 1;
}

IrStatus kir_interp_run(const KirKernel *k, void *const *args, const int32_t grid[3], IrDiag *d)
{
    (void)args;
    (void)grid;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: interpreter not written yet", k->name);
}
