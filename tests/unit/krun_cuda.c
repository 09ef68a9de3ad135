/* krun_cuda.c — the cuda executor for sweep tests. (stub until its backend lands) */
#include <stdio.h>

#include "krun.h"

static int cuda_available(char *why, size_t n)
{
    snprintf(why, n, "the cuda executor is not built yet");
    return 0;
}

static IrStatus cuda_run(const KirKernel *k, KRunArg *a, IrDiag *d)
{
    (void)a;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: no cuda executor", k->name);
}

const KRunner krun_cuda = {"cuda", cuda_available, cuda_run};
