/* cg_llvm.c — the LLVM backend: kernel IR -> LLVM IR -> NVPTX, AMDGPU, host. (stub: being written) */
#include "cg.h"

static int llvm_supports(const CgTarget *t)
{
    (void)t;
    return 0;
}

static IrStatus llvm_compile(const KirKernel *k, const CgTarget *t, CgBinary *out, IrDiag *d)
{
    (void)out;
    return ir_diag_set(d, IR_ERR_UNSUPPORTED, "kernel %s: no LLVM backend for %s yet", k->name, t->name);
}

const CgBackend cg_llvm_backend = {"cuda", llvm_supports, llvm_compile};
