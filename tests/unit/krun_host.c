/* krun_host.c — the host executor for sweep tests. (stub until its backend lands) */
#include <stdio.h>

#include "krun.h"

static int host_available(char *why, size_t n)
{
    snprintf(why, n, "the host executor is not built yet");
    return 0;
}

static IrStatus host_run(const KirKernel *k, KRunArg *a, IrDiag *d)
{
    (void)a;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: no host executor", k->name);
}

const KRunner krun_host = {"host", host_available, host_run};
