/* cg_cuda.c — the CUDA backend: kernel IR -> CUDA C -> NVRTC -> PTX + cubin. (stub: being written) */
#include "cg.h"

static int cuda_supports(const CgTarget *t)
{
    (void)t;
    return 0;
}

static IrStatus cuda_compile(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    (void)out;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: no CUDA backend for %s yet", k->name, t->name);
}

const CgBackend cg_cuda_backend = {"cuda", cuda_supports, cuda_compile};
